"""A sweep far below its floor stops early, across two real sshd test hosts (gloo through torchrun over SSH).

The operator's expected busbw (``expected_busbw_all_reduce_gbps``, absurdly high for two CPU ranks) is the
floor the program is handed; 64 MiB and 128 MiB are read for bandwidth (the verdict's sizes), so the sweep
stops after them and 256 MiB is never moved. Without the variable the same plan runs every size.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.support.bedhosts import bench_processes
from tests.support.stagerun import PLAN, StageRun
from tests.support.testbed import HostSpec, TestBed

pytestmark = pytest.mark.integration

LARGE_PLAN = SimpleNamespace(
    **{
        **vars(PLAN),
        "collectives": ("all_reduce",),
        "min_bytes": 64 << 20,
        "max_bytes": 256 << 20,
        "step_factor": 2,
        "warmup_iters": 2,
        "iters": 2,
    }
)


def test_a_sweep_far_below_its_floor_stops_with_the_reason(testbed: TestBed, tmp_path: Path) -> None:
    testbed.add_many([HostSpec("node1"), HostSpec("node2")])
    sick = StageRun(testbed, tmp_path / "sick", "it-stop", LARGE_PLAN, expected_busbw_all_reduce_gbps=10000)
    sick_s = sick()
    entry = sick.bench("all_reduce")
    assert entry["status"] == "FAIL", entry["message"]
    assert [r["bytes"] for r in entry["rows"]] == [64 << 20, 128 << 20]
    stopped = entry["stopped_early"]
    assert stopped["after_bytes"] == 128 << 20 and stopped["skipped_bytes"] == [256 << 20]
    assert stopped["floor_gbps"] == 8500.0  # the bottom of the normal range, ± bench_tolerance 15 %
    assert "stopped early: " in entry["message"] and "of the floor 8500 GB/s" in entry["message"]
    assert entry["message"].endswith("larger sizes (256 MiB) skipped")
    check = sick.check("bench.all_reduce")
    assert check.status == "FAIL" and check.message == entry["message"]

    healthy = StageRun(testbed, tmp_path / "healthy", "it-full", LARGE_PLAN)
    healthy_s = healthy()
    entry = healthy.bench("all_reduce")
    assert entry["status"] == "PASS", entry["message"]
    assert [r["bytes"] for r in entry["rows"]] == [64 << 20, 128 << 20, 256 << 20]
    assert "stopped_early" not in entry and "stopped" not in entry["message"]
    # 256 MiB is more than the two smaller sizes together: skipping it saves a good part of the sweep.
    assert sick_s < healthy_s, (sick_s, healthy_s)
    for host in testbed.hosts.values():
        assert bench_processes(testbed, host) == []
