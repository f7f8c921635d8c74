"""One benchmark stage run over the bed's hosts, called directly (no ``diagnose run`` process), with every
check and benchmark entry it emitted kept for the test to read.
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from diagnose.benchmarks.stage import BenchContext, run_benchmark_stage
from diagnose.connectors import connect
from diagnose.core.model import CheckResult
from diagnose.launchers.remote import remote_dir
from tests.support.bedhosts import hosts_of
from tests.support.testbed import TestBed

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


class StageRun:
    """One stage run with everything it emitted; calling it runs the stage and returns the seconds it took."""

    def __init__(self, bed: TestBed, tmp_path: Path, run_id: str, plan: Any = PLAN, **host_vars: Any) -> None:
        self.hosts = hosts_of(bed, **host_vars)
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
        """Rank 0's results stream on the (shared) /tmp of the test hosts."""
        return Path(remote_dir(self.run_id, "main", 0)) / "results.jsonl"
