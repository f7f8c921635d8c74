"""The training probe across two real sshd test hosts: DDP over gloo through torchrun, traces fetched home.

The benchmark stage runs as the engine runs it (collective sweep, then the extras the plan switches on),
so the probe launches exactly as the collectives do, profiles a real CPU job and judges it. What a CPU
trace cannot answer (host-device syncs) must be said, never passed.
"""

from __future__ import annotations

import gzip
import json
import re
import secrets
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from diagnose.benchmarks.stage import BenchContext, run_benchmark_stage
from diagnose.connectors import connect
from diagnose.core.model import CheckResult
from diagnose.launchers.remote import remote_dir
from diagnose.probes.training import CHECKS, CPU_NOT_JUDGED
from tests.support.bedhosts import hosts_of
from tests.support.testbed import HostSpec, TestBed, TestHost

pytestmark = pytest.mark.integration

PLAN = SimpleNamespace(
    enabled=True,
    workload="dense",
    collectives=("all_reduce",),
    min_bytes=64 << 10,
    max_bytes=256 << 10,
    step_factor=4,
    warmup_iters=1,
    iters=3,
    tool="torch",
    straggler_isolation=False,
    timeout_s=None,
    training_probe=True,
    kv_transfer=False,
    fleet_probes=False,
)


@pytest.fixture
def bed(testbed: TestBed) -> TestBed:
    testbed.add_many([HostSpec("node1"), HostSpec("node2")])
    return testbed


class Run:
    """One benchmark stage with the probe on, and everything it emitted."""

    def __init__(
        self,
        bed: TestBed,
        tmp_path: Path,
        plan: Any = PLAN,
        per_host: dict[str, dict[str, Any]] | None = None,
        **extra: Any,
    ) -> None:
        self.hosts = hosts_of(bed, per_host, **extra)
        self.connections = {}
        for host in self.hosts:
            connection = connect(host)
            connection.open()
            self.connections[host.name] = connection
        self.out = tmp_path / "out"
        self.run_id = f"it-train-{secrets.token_hex(3)}"
        self.checks: list[CheckResult] = []
        self.records: list[tuple[str, dict[str, Any]]] = []
        self.context = BenchContext(
            self.hosts,
            self.connections,
            {},
            plan,
            self.out,
            self.run_id,
            self.checks.append,
            lambda entry: None,
            emit_record=lambda section, entry: self.records.append((section, entry)),
        )

    def __call__(self) -> None:
        try:
            run_benchmark_stage(self.context)
        finally:
            for connection in self.connections.values():
                connection.close()

    def check(self, check_id: str) -> CheckResult:
        found = [c for c in self.checks if c.id == check_id]
        assert len(found) == 1, f"{check_id}: {found}"
        return found[0]

    def training(self) -> list[dict[str, Any]]:
        return sorted((e for s, e in self.records if s == "training"), key=lambda e: e["rank"])

    def profiled(self) -> bool:
        """Whether rank 0 has reported its first profiled phase."""
        progress = Path(remote_dir(self.run_id, "train", 0)) / "results.jsonl"
        lines = progress.read_text().splitlines() if progress.exists() else []
        return any('"row"' in line and '"train_profile"' in line for line in lines)


def probe_processes(bed: TestBed, host: TestHost) -> list[int]:
    listing = bed.ssh(host, "ps -eo pid=,args=").stdout
    return [
        int(line.split()[0])
        for line in listing.splitlines()
        if "torch.distributed.run" in line or "program.py" in line
    ]


def test_probe_profiles_ddp_across_two_hosts(bed: TestBed, tmp_path: Path) -> None:
    run = Run(bed, tmp_path, train_probe_bucket_caps="1")
    run()
    assert run.check("bench.all_reduce").status == "PASS"
    records = run.training()
    assert [(r["rank"], r["host"]) for r in records] == [(0, "node1"), (1, "node2")]
    for record in records:
        trace = run.out / record["trace"]
        assert trace.parent == run.out / "raw" / record["host"] / "train"
        with gzip.open(trace, "rt") as handle:
            document = json.load(handle)
        info = document["distributedInfo"]
        assert (info["backend"], info["rank"], info["world_size"]) == ("gloo", record["rank"], 2)
        names = {e.get("name", "") for e in document["traceEvents"]}
        assert {"ProfilerStep#1", "ProfilerStep#3"} <= names
        assert any(n.startswith("gloo:all_reduce") for n in names), "DDP's all-reduces are in the trace"
        assert any(n.startswith("enumerate(DataLoader)#") for n in names), "the DataLoader is in the trace"
        assert record["device"] == "cpu" and record["backend"] == "gloo"
        assert record["bucket_cap_mb"] == 25.0
        assert len(record["steps"]) == 3
        summary = record["summary"]
        assert summary["comm_ms"] > 0 and summary["step_ms"] > summary["comm_ms"] * 0.1
        assert summary["syncs_per_step"] is None
        assert any("host sync" in line for line in record["not_judged"])
        assert record["probe"]["gradient_bytes"] == 4 * record["probe"]["parameters"]
        assert record["fabric"]["busbw_gbps"] > 0, "judged against the all_reduce the sweep measured"
        assert [row["bucket_cap_mb"] for row in record["bucket_sweep"]] == [25.0, 1.0]
        assert record["best_bucket_cap_mb"] in (25.0, 1.0)
    sync = run.check("train.sync")
    assert sync.status == "SKIP" and "CPU-only trace" in sync.message
    for check_id in ("train.overlap", "train.tail", "train.input"):
        result = run.check(check_id)
        assert result.status == "SKIP", "a CPU job's overlap is measured, never judged"
        assert result.message.startswith(f"training probe: {CPU_NOT_JUDGED}; measured: ")
        assert re.search(r"rank [01]: [^;]*\d+\.\d+ ms", result.message), "the numbers are in the message"
        assert result.observed.keys() == {"0", "1"}
        assert result.evidence == records[0]["trace"]
    overlap = run.check("train.overlap")
    assert "overlap ratio" in overlap.message
    assert "bucket_cap_mb sweep: 25 MB" in overlap.message and "best " in overlap.message
    assert (run.out / "raw" / "node1" / "bench.train.out.txt").exists(), "the probe's output is evidence"
    assert not list(Path("/tmp").glob(f"diagnose-{run.run_id}-*")), "the remote folders are removed"
    for host in bed.hosts.values():
        assert probe_processes(bed, host) == []


def test_a_probe_that_cannot_start_is_an_error_naming_why(bed: TestBed, tmp_path: Path) -> None:
    """node2's Python has no torch: the sweep and the probe both fail, and the probe says why."""
    run = Run(bed, tmp_path, per_host={"node2": {"bench_python": "/usr/bin/python3"}})
    run()
    for check_id in CHECKS:
        result = run.check(check_id)
        assert result.status == "ERROR"
        assert "did not finish (failed)" in result.message and "node2" in result.message
        assert "No module named 'torch'" in result.message
    assert run.training() == []


def test_a_hung_probe_keeps_the_traces_measured_before(bed: TestBed, tmp_path: Path) -> None:
    """node2's ranks freeze once the default bucket size is profiled: the sweep's second size hangs."""
    # A phase may take 45 s before it counts as hung: enough on a loaded 2-core CI machine.
    plan = SimpleNamespace(**{**vars(PLAN), "timeout_s": 45})
    run = Run(bed, tmp_path, plan, train_probe_bucket_caps="1")
    runner = threading.Thread(target=run)
    runner.start()
    deadline = time.monotonic() + 400
    while time.monotonic() < deadline:
        if run.profiled():
            break
        time.sleep(0.2)
    else:
        raise AssertionError("the probe never profiled its first bucket size")
    node2 = bed.hosts["node2"]
    bed.ssh(node2, "kill -STOP " + " ".join(map(str, probe_processes(bed, node2))))
    runner.join(timeout=300)
    assert not runner.is_alive(), "the stage returned"
    for check_id in CHECKS:
        result = run.check(check_id)
        assert result.status == "ERROR"
        assert "did not finish (hung)" in result.message and "within 45 s" in result.message
        assert "2 rank traces measured are kept" in result.message
    assert [r["rank"] for r in run.training()] == [0, 1]
    for host in bed.hosts.values():
        assert probe_processes(bed, host) == [], f"process left behind on {host.name}"


def test_one_host_without_gpu_skips_the_probe(testbed: TestBed, tmp_path: Path) -> None:
    testbed.add_many([HostSpec("solo")])
    run = Run(testbed, tmp_path, expected_gpu_count=0)
    run()
    for check_id in CHECKS:
        result = run.check(check_id)
        assert result.status == "SKIP"
        assert "one host without GPU" in result.message and "expected_gpu_count 0" in result.message
    assert run.training() == []
