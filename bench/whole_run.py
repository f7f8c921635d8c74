"""The whole `diagnose run` at 1,024 / 4,096 / 16,384 hosts, simulated: where time and memory go per stage.

The engine is the real one (``prepare`` and ``Run.execute`` of diagnose/engine/run.py): inventory, limits,
host stage with its batch scripts, framing, evidence files, parsers and rules, cluster rules, the benchmark
sweep and the localization of a planted slow host, the second snapshot, results.json and the HTML + PDF
report. Only the hosts and the fabric are stood in for (tests/support/simhost.py): every simulated host
answers each command with the output a real loopback sshd host of the test bed (tests/support/hostkit.py, a
healthy 8x H100 node printing captured outputs) gave, after a login and a batch time drawn from those
measured on that bed at the start of this script; a sweep is answered at the profile's expected busbw, the
group holding a planted slow host at that host's pace.

Each stage's wall and CPU seconds (this process, every thread) and its peak resident memory (the
process's ``VmHWM``, reset at the stage's start through /proc/self/clear_refs) are printed per size. The
baseline in the same table is the first size: a stage whose time per host grows with the hosts is what
the last column points at.

    python3 bench/whole_run.py [--hosts 1024 4096 16384] [--forks 1024] [--slow 2] [--capture 8]
                               [--formats json,html,pdf]
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from diagnose.config.playbook import load_playbook  # noqa: E402
from diagnose.connectors import connect  # noqa: E402
from diagnose.engine import run as engine_run  # noqa: E402
from diagnose.engine import stages  # noqa: E402
from diagnose.engine.results import ResultsStore  # noqa: E402
from diagnose.targets.loading import InventoryFiles  # noqa: E402
from diagnose.targets.resolve import resolve_hosts  # noqa: E402
from diagnose.targets.sources import HostContext  # noqa: E402
from tests.support.hostkit import captured, healthy_h100  # noqa: E402
from tests.support.nshost import memlock_ceiling_kib  # noqa: E402
from tests.support.simhost import Fabric, Replies, simulated_fabric, simulated_hosts  # noqa: E402
from tests.support.testbed import HostSpec, Reply, TestBed  # noqa: E402

PROBE_PYTHON = "bench-python"
# The sweep of the acceptance playbook, without the extras after it (each launches a program of its own
# that the simulated fabric does not answer).
PLAYBOOK = {
    "name": "whole-run-simulated",
    "checks": ["*"],
    "benchmarks": {
        "enabled": True,
        "workload": "dense",
        "min_bytes": "1M",
        "max_bytes": "1G",
        "step_factor": 2,
        "warmup_iters": 5,
        "iters": 20,
        "tool": "torch",
        "straggler_isolation": True,
    },
}
STAGES = (
    ("host stage", stages, "run_host_stage"),
    ("cluster rules", stages, "run_cluster_stage"),
    ("benchmarks + localization", stages, "run_benchmark_stage"),
    ("second snapshot", stages, "run_after_snapshot_stage"),
    ("results.json (final)", ResultsStore, "finish"),
    ("report html + pdf", engine_run, "render"),
)


def bench_host(name: str) -> HostSpec:
    """A healthy node of the bed whose torch probe prints the output captured on a lent H200 machine."""
    spec = healthy_h100(name)
    probe = Reply(stdout=captured("nccl_version/torch_h200x4.txt"))
    return replace(spec, tools={**spec.tools, PROBE_PYTHON: probe})


def common_vars() -> dict[str, Any]:
    return {
        "diagnose_profile": "h100-8x-ndr400",
        "ansible_python_interpreter": PROBE_PYTHON,
        # Where the machine cannot raise `ulimit -l`, healthy hosts have its limit (tests/support/hostkit.py).
        **({"min_memlock_kib": memlock_ceiling_kib()} if memlock_ceiling_kib() else {}),
    }


def measure_replies(count: int, workdir: Path) -> Replies:
    """Log in to ``count`` real loopback sshd hosts one at a time and run their batch: the seconds each
    login and batch took, and the outputs of the first host (what every simulated host answers)."""
    with TestBed(workdir / "bed") as bed:
        bed.add_many([bench_host(f"real{i:02d}") for i in range(count)])
        inventory = bed.write_inventory(workdir / "real.yaml", extra_vars=common_vars())
        playbook = load_playbook(str(write_playbook(workdir)))
        hosts = resolve_hosts([InventoryFiles(inventory)], HostContext(playbook))
        checks, _ = stages.selected_catalog(playbook.checks)
        outputs, logins, batches = {}, [], []
        for host in hosts:
            started = time.perf_counter()
            connection = connect(host)
            connection.open()
            logins.append(time.perf_counter() - started)
            started = time.perf_counter()
            got = connection.run_batch(stages.commands_of(checks, host.vars))
            batches.append(time.perf_counter() - started)
            outputs = outputs or got
            connection.close()
    return Replies(outputs, connect_s=logins, batch_s=batches)


def write_playbook(workdir: Path) -> Path:
    path = workdir / "whole-run.yaml"
    path.write_text(yaml.safe_dump(PLAYBOOK))
    return path


def write_inventory(workdir: Path, count: int) -> Path:
    """``count`` hosts in racks of 32, addressed in 10.0.0.0/8 (never reached: the hosts are simulated)."""
    path = workdir / f"sim-{count}.yaml"
    key = workdir / "sim-key"  # the run checks every SSH host has a way to log in before it starts
    if not key.exists():
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    racks: dict[str, Any] = {}
    for i in range(count):
        rack = racks.setdefault(f"rack{i // 32:03d}", {"hosts": {}})
        rack["hosts"][f"node{i:05d}"] = {"ansible_host": f"10.{i >> 16}.{(i >> 8) & 255}.{i & 255}"}
    all_vars = {**common_vars(), "ansible_ssh_private_key_file": str(key)}
    path.write_text(yaml.safe_dump({"all": {"vars": all_vars, "children": racks}}))
    return path


def _peak_reset() -> None:
    with open("/proc/self/clear_refs", "w") as handle:  # "5": reset the peak resident set (VmHWM)
        handle.write("5")


def _status_mib(field: str) -> float:
    with open("/proc/self/status") as handle:
        line = next(line for line in handle if line.startswith(field + ":"))
    return int(line.split()[1]) / 1024


@dataclass
class Measured:
    wall: float = 0.0
    cpu: float = 0.0
    peak_mib: float = 0.0
    calls: int = 0


def instrument(table: dict[str, Measured]) -> Callable[[], None]:
    """Wrap each stage function to time it and take its peak memory; returns the undo."""
    undo = []
    for name, owner, attribute in STAGES:
        original = getattr(owner, attribute)

        def timed(*args: Any, _original: Any = original, _name: str = name, **kwargs: Any) -> Any:
            _peak_reset()
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                return _original(*args, **kwargs)
            finally:
                entry = table.setdefault(_name, Measured())
                entry.wall += time.perf_counter() - wall
                entry.cpu += time.process_time() - cpu
                entry.peak_mib = max(entry.peak_mib, _status_mib("VmHWM"))
                entry.calls += 1

        setattr(owner, attribute, timed)
        undo.append((owner, attribute, original))

    def restore() -> None:
        for owner, attribute, original in undo:
            setattr(owner, attribute, original)

    return restore


def simulate(
    count: int, forks: int, slow: int, replies: Replies, workdir: Path, formats: str = "json,html,pdf"
) -> dict[str, Any]:
    inventory = write_inventory(workdir, count)
    names = [f"node{i:05d}" for i in range(count)]
    planted = sorted(random.Random(count).sample(names, slow))
    fabric = Fabric(slow={name: 0.6 for name in planted})
    options = engine_run.RunOptions(
        inventories=[str(inventory)],
        playbook=str(write_playbook(workdir)),
        forks=forks,
        runs_dir=str(workdir / f"runs-{count}"),
        formats=formats,
        accept_unknown_host_keys=True,
    )
    table: dict[str, Measured] = {}
    wall, cpu = time.perf_counter(), time.process_time()
    with simulated_hosts(replies), simulated_fabric(fabric):
        request = engine_run.prepare(options)
        prepared = time.perf_counter() - wall
        restore = instrument(table)
        try:
            outcome = engine_run.Run(request).execute()
        finally:
            restore()
    if outcome.status not in ("done",):
        raise SystemExit(f"the simulated run of {count} hosts ended {outcome.status}: {outcome.message}")
    document = outcome.document or {}
    named = sorted(
        {c["host"] for c in document.get("checks", []) if c["id"] == "bench.straggler" and c["host"]}
    )
    return {
        "table": table,
        "prepare": prepared,
        "wall": time.perf_counter() - wall,
        "cpu": time.process_time() - cpu,
        "forks": request.options.forks,
        "warnings": request.warnings,
        "status": outcome.status,
        "verdict": document.get("verdict"),
        "launches": len(fabric.launches),
        "planted": planted,
        "named": named,
        "rows": len(document.get("checks", [])),
        "size_mb": (outcome.out_dir / "results.json").stat().st_size / 1e6 if outcome.out_dir else 0.0,
    }


def one_size(args: argparse.Namespace) -> int:
    """``--one N``: one simulated run in this fresh process (its memory its own); the figures as JSON."""
    outputs, logins, batches = pickle.loads(Path(args.replies).read_bytes())
    replies = Replies(outputs, connect_s=logins, batch_s=batches)
    done = simulate(args.one, args.forks, args.slow, replies, Path(args.replies).parent, args.formats)
    done["table"] = {name: asdict(entry) for name, entry in done["table"].items()}
    print(json.dumps(done))
    return 0


def run_size(count: int, args: argparse.Namespace, replies_file: Path) -> dict[str, Any]:
    argv = [sys.executable, __file__, "--one", str(count), "--replies", str(replies_file)]
    argv += ["--forks", str(args.forks), "--slow", str(args.slow), "--formats", args.formats]
    child = subprocess.run(argv, stdout=subprocess.PIPE, text=True, check=False)
    if child.returncode != 0:
        raise SystemExit(f"the simulated run of {count} hosts failed ({child.returncode})")
    done = json.loads(child.stdout.strip().splitlines()[-1])
    done["table"] = {name: Measured(**entry) for name, entry in done["table"].items()}
    return done


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hosts", type=int, nargs="+", default=[1024, 4096, 16384])
    parser.add_argument("--forks", type=int, default=1024, help="--forks of the simulated runs")
    parser.add_argument("--slow", type=int, default=2, help="hosts planted at 60 %% of the expected busbw")
    parser.add_argument("--capture", type=int, default=8, help="real sshd hosts the replies are measured on")
    parser.add_argument(
        "--formats", default="json,html,pdf", help="what the runs write (json alone leaves the report out)"
    )
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--replies", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        return one_size(args)
    with tempfile.TemporaryDirectory(prefix="whole-run-") as tmp:
        workdir = Path(tmp)
        replies = measure_replies(args.capture, workdir)
        replies_file = workdir / "replies.pickle"
        replies_file.write_bytes(pickle.dumps((replies.outputs, replies.connect_s, replies.batch_s)))
        print(
            f"replies: {len(replies.outputs)} commands per host from a real bed host; login "
            f"{statistics.median(replies.connect_s) * 1000:.0f} ms, batch "
            f"{statistics.median(replies.batch_s) * 1000:.0f} ms (medians of {args.capture} real hosts)"
        )
        results = {}
        for count in sorted(args.hosts):
            results[count] = done = run_size(count, args, replies_file)
            print(
                f"{count} hosts: {done['wall']:.1f} s wall, {done['cpu']:.1f} s CPU, forks {done['forks']}, "
                f"verdict {done['verdict']} ({done['status']}), {done['rows']} check rows, "
                f"results.json {done['size_mb']:.1f} MB, {done['launches']} launches; planted slow "
                f"{', '.join(done['planted'])}, named {', '.join(done['named']) or 'none'}",
                flush=True,
            )
            for warning in done["warnings"]:
                print(f"  warning: {warning}")
    base = min(results)
    print(
        f"\n{'hosts':>6} {'stage':<28} {'wall s':>8} {'CPU s':>8} {'CPU ms/host':>12} {'peak MiB':>9} {'x base':>7}"
    )
    for count, done in results.items():
        rows = [("prepare (inventory, limits)", Measured(done["prepare"], 0.0, 0.0, 1))]
        rows += [(name, done["table"].get(name, Measured())) for name, _owner, _attr in STAGES]
        for name, entry in rows:
            per_host = 1000 * entry.cpu / count
            base_entry = results[base]["table"].get(name)
            ratio = (
                per_host / (1000 * base_entry.cpu / base) if base_entry and base_entry.cpu else float("nan")
            )
            print(
                f"{count:>6} {name:<28} {entry.wall:>8.2f} {entry.cpu:>8.2f} {per_host:>12.2f} "
                f"{entry.peak_mib:>9.0f} {ratio:>7.2f}"
            )
    load = os.getloadavg()[0]
    print(
        f"\n'x base': CPU per host against {base} hosts (1.00: linear); each size runs in a process of its own."
    )
    print(f"Load average (1 min) at the end {load:.1f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
