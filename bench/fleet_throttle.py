"""Fleet probe bench: is a CPU-throttled host named among its peers, on this machine, now?

Five loopback sshd hosts of the test bed (tests/support/testbed.py) run the real fleet probes of the benchmark
stage (:func:`diagnose.probes.fleet.run`, called directly): ``fleet_probe.py`` and a gloo all_reduce under
torchrun over each host's own SSH connection. Every host gets a fixed share of a CPU through a cgroup v1 group
of its own (its sshd, hence every later session, torchrun and the probe), as separate machines would have:
five hosts sharing two cores otherwise copy at whatever speed the others' torch imports leave them. The peers
get three tenths of a CPU each; node3 gets a tenth while it starts and a thirty-third from its probe's
``start`` line on, as a host whose CPUs a noisy neighbour or a power cap takes away would.

The outcome depends on the machine's load (CI's shared cores spread the peers' copies by up to 26 % MAD,
and the quotas were retuned three times after failures there), so it is a measurement, not a test: it
prints each host's copy figure, deviation and robust z, and the verdicts, once per ``--repeat``, and
exits 1 unless every repeat named node3 alone. The verdict on given readings is tested in
tests/unit/probes/test_fleet_verdicts.py, and a host the bed slows by a fixed factor of a CPU-time clock is
named end to end in tests/integration/test_fleet_probes.py; needs root and /sys/fs/cgroup/cpu.

    python bench/fleet_throttle.py [--repeat 3] [--min-rel-dev-pct 30]
"""

from __future__ import annotations

import argparse
import secrets
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from diagnose.benchmarks.setup import BenchContext, choose_setup  # noqa: E402
from diagnose.benchmarks.stage import Stage  # noqa: E402
from diagnose.connectors import connect  # noqa: E402
from diagnose.core.model import CheckResult  # noqa: E402
from diagnose.launchers.base import remote_dir  # noqa: E402
from diagnose.probes import fleet as fleet_probes  # noqa: E402
from tests.support.bedhosts import hosts_of  # noqa: E402
from tests.support.nshost import pids_in  # noqa: E402
from tests.support.testbed import HostSpec, TestBed, TestHost  # noqa: E402

PLAN = SimpleNamespace(
    enabled=True,
    workload="dense",
    collectives=("all_reduce",),
    min_bytes=1 << 20,
    max_bytes=1 << 20,
    step_factor=2,
    warmup_iters=1,
    iters=5,
    tool="torch",
    straggler_isolation=False,
    timeout_s=None,
    fleet_probes=True,
)
CPU_CGROUP = Path("/sys/fs/cgroup/cpu")
QUOTA_US, COPY_QUOTA_US, PERIOD_US = 10_000, 3_000, 100_000  # the slow host
PEER_QUOTA_US, PEER_PERIOD_US = 3_000, 10_000


class Probes:
    """One run of the fleet probes with everything they emitted."""

    def __init__(self, bed: TestBed, tmp_path: Path, **extra: Any) -> None:
        self.hosts = hosts_of(bed, **{"bench_startup_timeout_s": 180, "expected_gpu_count": 0, **extra})
        self.out = tmp_path / "out"
        self.checks: list[CheckResult] = []
        self.records: list[dict[str, Any]] = []
        self.connections = {h.name: connect(h) for h in self.hosts}
        self.context = BenchContext(
            self.hosts,
            self.connections,
            {},
            PLAN,
            self.out,
            f"it-fleet-{secrets.token_hex(3)}",
            self.checks.append,
            lambda entry: None,
            emit_record=lambda section, entry: self.records.append({"section": section, **entry}),
        )

    def __call__(self) -> Probes:
        try:
            for connection in self.connections.values():
                connection.open()
            stage = Stage(self.context)
            fleet_probes.run(stage, choose_setup(self.hosts, {}))
        finally:
            for connection in self.connections.values():
                connection.close()
        return self

    def checks_of(self, check_id: str) -> list[CheckResult]:
        return [c for c in self.checks if c.id == check_id]

    def record(self, host: str | None, metric: str) -> dict[str, Any]:
        return next(r for r in self.records if r["host"] == host and r["metric"] == metric)


def cgroup_problem() -> str | None:
    if not (CPU_CGROUP / "cpu.cfs_quota_us").exists():
        return f"no cgroup v1 cpu controller at {CPU_CGROUP}"
    probe = CPU_CGROUP / f"diagnose-probe-{secrets.token_hex(3)}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError as exc:
        return f"cannot make a cpu cgroup: {exc}"
    return None


def progress_file(run: Probes, index: int) -> Path:
    """The copy probe's progress file of the ``index``-th host (test hosts share the machine's /tmp)."""
    return Path(remote_dir(run.context.run_id, f"fleet-{index}-copy", 0)) / "results.jsonl"


def wait_for(path: Path, event: str, limit: float = 240) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if path.exists() and f'"event": "{event}"' in path.read_text():
            return True
        time.sleep(0.01)
    return False


@contextmanager
def throttled(host: TestHost, quota_us: int, period_us: int) -> Iterator[Path]:
    """Every process of ``host`` (its sshd, hence every later session) limited to quota/period of a CPU."""
    group = CPU_CGROUP / f"diagnose-slow-{host.name}-{secrets.token_hex(3)}"
    group.mkdir()
    try:
        (group / "cpu.cfs_period_us").write_text(str(period_us))
        (group / "cpu.cfs_quota_us").write_text(str(quota_us))
        if host.pid_namespace is None:
            raise RuntimeError(f"host {host.name} has no known pid namespace to throttle")
        for pid in pids_in({host.pid_namespace}):
            try:
                (group / "cgroup.procs").write_text(str(pid))
            except ProcessLookupError:
                continue  # a process that ended meanwhile
        yield group
    finally:
        # The host's sshd keeps forking sessions into the group while it is emptied: move and retry until
        # the group is empty and can go.
        root = CPU_CGROUP / "cgroup.procs"
        for _ in range(100):
            for pid in (group / "cgroup.procs").read_text().split():
                try:
                    root.write_text(pid)
                except ProcessLookupError:
                    continue  # the process ended meanwhile
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.05)
        else:
            raise RuntimeError(f"{group} still holds processes")


def once(min_rel_dev_pct: int) -> bool:
    """One run of five hosts, node3 throttled; prints what the fleet verdict saw; whether it named node3 alone."""
    with tempfile.TemporaryDirectory(prefix="fleet-throttle-") as work, TestBed(Path(work) / "bed") as bed:
        bed.add_many([HostSpec(f"node{i}") for i in range(1, 6)])
        run = Probes(bed, Path(work), fleet_min_rel_dev_pct=min_rel_dev_pct)
        progress = progress_file(run, [h.name for h in run.hosts].index("node3"))
        seen: dict[str, bool] = {}
        began = time.monotonic()
        with ExitStack() as cpus:
            for name in ("node1", "node2", "node4", "node5"):
                cpus.enter_context(throttled(bed.hosts[name], PEER_QUOTA_US, PEER_PERIOD_US))
            slow = cpus.enter_context(throttled(bed.hosts["node3"], QUOTA_US, PERIOD_US))

            def slow_down() -> None:
                seen["started"] = wait_for(progress, "start")
                (slow / "cpu.cfs_quota_us").write_text(str(COPY_QUOTA_US))

            neighbour = threading.Thread(target=slow_down)
            neighbour.start()
            run()
            neighbour.join(timeout=60)
        for host in sorted(h.name for h in run.hosts):
            record = run.record(host, "memcpy")
            print(
                f"{host}: {record['value']:.2f} {record.get('unit', '')} deviation "
                f"{record.get('deviation_pct', 0):+.0f} % robust z {record.get('robust_z', 0):+.1f} "
                f"{record['verdict']}"
            )
        named = [(c.host, c.status) for c in run.checks_of("fleet.memcpy") if c.host is not None]
        summary = next(c for c in run.checks_of("fleet.memcpy") if c.host is None)
        print(f"throttle applied at start: {seen.get('started', False)}; {time.monotonic() - began:.0f} s")
        print(f"fleet.memcpy {summary.status}: {summary.message}")
        return seen.get("started", False) and named == [("node3", "FAIL")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--min-rel-dev-pct", type=int, default=30, help="fleet_min_rel_dev_pct for the run")
    args = parser.parse_args(argv)
    problem = cgroup_problem()
    if problem:
        print(f"fleet_throttle: {problem}", file=sys.stderr)
        return 2
    named = [once(args.min_rel_dev_pct) for _ in range(args.repeat)]
    print(f"node3 named alone in {sum(named)} of {len(named)} runs")
    return 0 if all(named) else 1


if __name__ == "__main__":
    sys.exit(main())
