"""The benchmark stage across two real sshd test hosts: gloo through torchrun over SSH, a hang, a death.

Each host is a real sshd on loopback in its own mount and pid namespaces (tests/support/testbed.py), so torchrun
really starts on two "nodes" through diagnose's SSH connections, rendezvous over TCP, and the kill logic
only sees each host's own processes, as on a cluster.
"""

from __future__ import annotations

import json
import secrets
import shutil
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from diagnose.benchmarks.stage import BenchContext, run_benchmark_stage
from diagnose.connectors import connect
from diagnose.core.hosts import Host
from diagnose.core.model import CheckResult
from diagnose.core.vars import Vars
from diagnose.shipped.collective_bench import bus_factor
from tests.support.testbed import HostSpec, TestBed, TestHost

pytestmark = pytest.mark.integration

# One process per host keeps two torch imports on the 2-core CI machine; the sweep is small on purpose.
PLAN = SimpleNamespace(
    enabled=True,
    workload="fsdp",
    collectives=("all_reduce", "all_gather"),
    min_bytes=4 << 10,
    max_bytes=256 << 10,
    step_factor=4,
    warmup_iters=1,
    iters=5,
    tool="torch",
    straggler_isolation=True,
    timeout_s=None,
)

# Long enough (15 sizes up to 64 MiB) that a host frozen or killed after the first row catches the sweep
# in the middle, with a 15 s hang budget per row.
LONG_PLAN = SimpleNamespace(
    **{**vars(PLAN), "collectives": ("all_reduce", "all_gather"), "max_bytes": 64 << 20, "step_factor": 2}
)
HANG_PLAN = SimpleNamespace(**{**vars(LONG_PLAN), "timeout_s": 15})


@pytest.fixture
def bed(testbed: TestBed) -> TestBed:
    testbed.add_many([HostSpec("node1"), HostSpec("node2")])
    return testbed


def hosts_of(bed: TestBed, per_host: dict[str, dict[str, Any]] | None = None, **extra: Any) -> list[Host]:
    """The bed's hosts as diagnose sees them: ``extra`` variables on every host, ``per_host`` on some."""
    common = {
        "ansible_user": "root",
        "ansible_ssh_private_key_file": str(bed.client_key),
        "diagnose_known_hosts_file": str(bed.known_hosts),
        "ansible_python_interpreter": sys.executable,
        "bench_startup_timeout_s": 120,
        **extra,
    }
    return [
        Host(
            h.name,
            vars=Vars(
                {
                    **common,
                    "ansible_host": h.address,
                    "ansible_port": h.port,
                    **(per_host or {}).get(h.name, {}),
                },
                h.name,
            ),
        )
        for h in bed.hosts.values()
    ]


class Run:
    """One stage run with everything it emitted."""

    def __init__(self, bed: TestBed, tmp_path: Path, run_id: str, plan: Any = PLAN) -> None:
        self.hosts = hosts_of(bed)
        self.connections = {}
        for host in self.hosts:
            connection = connect(host)
            connection.open()
            self.connections[host.name] = connection
        self.out = tmp_path / "out"
        self.run_id = f"{run_id}-{secrets.token_hex(3)}"
        self.checks: list[CheckResult] = []
        self.benchmarks: list[dict[str, Any]] = []
        self.context = BenchContext(
            self.hosts,
            self.connections,
            {},
            plan,
            self.out,
            self.run_id,
            self.checks.append,
            self.benchmarks.append,
        )

    def __call__(self) -> float:
        began = time.monotonic()
        try:
            run_benchmark_stage(self.context)
        finally:
            for connection in self.connections.values():
                connection.close()
        return time.monotonic() - began

    def check(self, check_id: str) -> CheckResult:
        return next(c for c in self.checks if c.id == check_id)

    def bench(self, collective: str) -> dict[str, Any]:
        return next(b for b in self.benchmarks if b["collective"] == collective)

    def results_file(self) -> Path:
        return Path(f"/tmp/diagnose-{self.run_id}/main/n0/results.jsonl")


def bench_processes(bed: TestBed, host: TestHost) -> list[int]:
    """Pids of torchrun or benchmark processes inside one test host (its own pid namespace)."""
    listing = bed.ssh(host, "ps -eo pid=,args=").stdout
    return [
        int(line.split()[0])
        for line in listing.splitlines()
        if "torch.distributed.run" in line or "program.py" in line
    ]


def wait_for_first_row(run: Run, limit: float = 120) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if run.results_file().exists() and '"row"' in run.results_file().read_text():
            return
        time.sleep(0.2)
    raise AssertionError("the benchmark never produced a row")


def test_gloo_across_two_sshd_hosts(bed: TestBed, tmp_path: Path) -> None:
    run = Run(bed, tmp_path, "it-gloo")
    run()
    transport = run.check("nccl.transport")
    assert transport.status == "SKIP" and "gloo" in transport.message
    for collective in ("all_reduce", "all_gather"):
        entry = run.bench(collective)
        assert entry["status"] == "PASS", entry["message"]
        assert "not representative of a GPU fabric" in entry["message"]
        assert entry["backend"] == "gloo" and entry["nodes"] == 2 and entry["ranks"] == 2
        assert entry["hosts"] == ["node1", "node2"]
        assert [r["bytes"] for r in entry["rows"]] == [4 << 10, 16 << 10, 64 << 10, 256 << 10]
        for row in entry["rows"]:
            assert row["wrong"] == 0
            algbw = row["bytes"] / (row["time_us"] * 1e-6) / 1e9
            assert row["algbw_gbps"] == pytest.approx(algbw, rel=0.01, abs=0.002)
            assert row["busbw_gbps"] == pytest.approx(
                row["algbw_gbps"] * bus_factor(collective, 2), abs=0.002
            )
        assert run.check(f"bench.{collective}").status == "PASS"
    assert (run.out / "raw" / "node1" / "bench.out.txt").exists()
    assert not Path(f"/tmp/diagnose-{run.run_id}").exists(), "the remote run folder is removed"
    for host in bed.hosts.values():
        assert bench_processes(bed, host) == []


def test_a_hung_collective_is_stopped_on_every_host(bed: TestBed, tmp_path: Path) -> None:
    """node2's ranks freeze after the first row: the next collective never completes on node1 either."""
    run = Run(bed, tmp_path, "it-hang", HANG_PLAN)
    runner = threading.Thread(target=run)
    runner.start()
    wait_for_first_row(run)
    node2 = bed.hosts["node2"]
    frozen = bench_processes(bed, node2)
    assert frozen, "the benchmark runs on node2"
    bed.ssh(node2, "kill -STOP " + " ".join(map(str, frozen)))
    runner.join(timeout=180)
    assert not runner.is_alive(), "the stage returned"
    all_reduce = run.bench("all_reduce")
    assert all_reduce["status"] == "ERROR"
    assert "did not finish within 15 s" in all_reduce["message"]
    assert all_reduce["rows"], "rows measured before the hang are kept"
    assert run.bench("all_gather")["status"] == "ERROR"
    for host in bed.hosts.values():
        assert bench_processes(bed, host) == [], f"process left behind on {host.name}"


def test_a_host_dying_mid_run_is_named(bed: TestBed, tmp_path: Path) -> None:
    run = Run(bed, tmp_path, "it-death", LONG_PLAN)
    runner = threading.Thread(target=run)
    runner.start()
    wait_for_first_row(run)
    bed.hosts["node2"].kill()
    runner.join(timeout=180)
    assert not runner.is_alive(), "the stage returned"
    entry = run.bench("all_reduce")
    assert entry["status"] == "ERROR"
    assert "node2" in entry["message"]
    assert entry["rows"], "rows measured before the host died are kept"
    assert bench_processes(bed, bed.hosts["node1"]) == []
    rows = [
        json.loads(line) for line in (run.out / "raw" / "node1" / "bench.out.txt").read_text().splitlines()
    ]
    assert rows[0]["event"] == "start"
    # The dead host could not clean its folder; on the bed it shares this machine's /tmp.
    shutil.rmtree(f"/tmp/diagnose-{run.run_id}", ignore_errors=True)
