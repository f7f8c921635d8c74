"""Localization on real hosts: four sshd test hosts, gloo through torchrun, one host slowed for real.

The slowed host's rank shares one CPU with a competing process, the commonest straggler there is: that
host's Python (``bench_python``) is a wrapper which, when it starts torchrun, waits for the rank to have
imported torch, then pins it to one CPU and starts busy loops there. The loops carry the launch's token,
so diagnose's own cleanup stops them with the launch. Nothing is faked below the stage: the search launches
real pair runs over SSH, disjoint pairs at once, and must name that host from their busbw alone.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from diagnose.benchmarks.setup import BenchContext, choose_setup
from diagnose.benchmarks.stage import Stage
from diagnose.connectors import connect
from diagnose.core.hosts import Host
from diagnose.core.model import CheckResult
from tests.support.bedhosts import hosts_of
from tests.support.testbed import HostSpec, TestBed

pytestmark = pytest.mark.integration

PLAN = SimpleNamespace(
    enabled=True,
    workload="dense",
    collectives=("all_reduce",),
    min_bytes=32 << 20,
    max_bytes=32 << 20,
    step_factor=2,
    warmup_iters=5,
    iters=10,
    tool="torch",
    straggler_isolation=True,
    timeout_s=None,
)
SLOW = "node3"
HOGS = 16


def busy_cpu() -> int:
    """The CPU the competing process and the slowed host's ranks share: the last one this test may use."""
    return max(os.sched_getaffinity(0))


def slowed_python(path: Path, cpu: int) -> Path:
    """A Python that, for torchrun, lets its rank start at full speed, then starves it.

    Once the rank (a child of torchrun) has a socket open, it has imported torch and is joining the
    others: from then on it is pinned to ``cpu`` and busy loops take that CPU, each loop in a session of
    its own (the kernel shares a CPU between sessions, its autogroups, before it shares it between
    processes, and torchrun starts its ranks in sessions of their own too), so sixteen loops leave
    the rank about a seventeenth of the CPU for the collective itself."""
    hog = f"setsid taskset -c {cpu} sh -c 'while :; do :; done' &"
    watch = (
        "  ( while :; do\n"
        "      pid=$(pgrep -P $$ -f -- '-u .*/program[.]py' | head -n 1)\n"
        '      [ -n "$pid" ] && ls -l "/proc/$pid/fd" 2>/dev/null | grep -q socket && break\n'
        "      sleep 0.1\n"
        "    done\n"
        f'    taskset -a -p -c {cpu} "$pid"\n'
        + "".join(f"    {hog}\n" for _ in range(HOGS))
        + "  ) </dev/null >/dev/null 2>&1 &\n"
    )
    path.write_text(
        "#!/bin/sh\n"
        f'case " $* " in *" torch.distributed.run "*)\n{watch};;\nesac\n'
        f'exec {sys.executable} "$@"\n'
    )
    path.chmod(0o755)
    return path


def hosts_of_slowed(bed: TestBed, pinned_python: Path) -> list[Host]:
    """Gloo hosts with a short localization; the slow host's ranks start under the pinned Python."""
    return hosts_of(
        bed,
        {SLOW: {"bench_python": str(pinned_python)}},
        bench_backend="gloo",
        localize_concurrency=2,
        localize_repeats=2,
        localize_max_repeats=2,
        localize_budget_s=600,
    )


def test_a_host_slowed_by_a_competing_process_is_named(testbed: TestBed, tmp_path: Path) -> None:
    testbed.add_many([HostSpec(f"node{i}") for i in range(1, 5)])
    pinned = slowed_python(tmp_path / "slowed-python", busy_cpu())
    hosts = hosts_of_slowed(testbed, pinned)
    connections = {}
    for host in hosts:
        connections[host.name] = connect(host)
        connections[host.name].open()
    checks: list[CheckResult] = []
    records: list[tuple[str, dict[str, Any]]] = []
    ctx = BenchContext(
        hosts,
        connections,
        {},
        PLAN,
        tmp_path / "out",
        f"it-localize-{secrets.token_hex(3)}",
        checks.append,
        lambda entry: None,
        emit_record=lambda section, entry: records.append((section, entry)),
    )
    try:
        Stage(ctx).isolate(choose_setup(hosts, {}), "all_reduce")
    finally:
        for connection in connections.values():
            connection.close()
    (section, record), *_ = records
    (tmp_path / "localization.json").write_text(json.dumps(record, indent=1))
    assert section == "localization"
    straggler = [c for c in checks if c.id == "bench.straggler" and c.status == "FAIL"]
    assert [c.host for c in straggler] == [SLOW], [c.message for c in checks]
    assert not [c for c in checks if c.id == "bench.link"]
    (accused,) = record["finding"]["accused"]
    assert accused["name"] == SLOW and accused["deficit_pct"] > 20
    assert SLOW not in record["finding"]["unresolved"]
    partners = {h for m in accused["measurements"] for h in m["hosts"]} - {SLOW}
    assert len(partners) >= 2, "slow with distinct partners before it is accused"
    # Disjoint pairs ran at once, and every launch is in the record with its value.
    tags = [launch["tag"] for launch in record["launches"]]
    assert any(sum(t.startswith(f"loc{n:03d}-") for t in tags) == 2 for n in range(1, 4))
    assert all(launch["status"] == "done" and launch["busbw_gbps"] for launch in record["launches"])
    assert record["steps"][0]["groups"] == [["node1", "node2"], ["node3", "node4"]]
    assert record["real_seconds"] <= 600
    for host in testbed.hosts.values():
        left = testbed.ssh(host, "ps -eo args=").stdout
        assert "program.py" not in left and "while :" not in left, f"left running on {host.name}: {left}"
