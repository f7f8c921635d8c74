"""The benchmark stage across two real sshd test hosts: gloo through torchrun over SSH, a hang, a death.

Each host is a real sshd on loopback in its own mount and pid namespaces (tests/support/testbed.py), so torchrun
really starts on two "nodes" through diagnose's SSH connections, rendezvous over TCP, and the kill logic
only sees each host's own processes, as on a cluster.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest

from diagnose.engine.run_ids import new_run_id
from diagnose.launchers.leftovers import MIN_AGE_S
from diagnose.launchers.remote import remote_dir
from diagnose.shipped.collective_bench import bus_factor
from tests.support.bedhosts import bench_processes
from tests.support.stagerun import PLAN, StageRun
from tests.support.testbed import HostSpec, TestBed

pytestmark = pytest.mark.integration

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


def wait_for_first_row(run: StageRun, limit: float = 120) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if run.results_file().exists() and '"row"' in run.results_file().read_text():
            return
        time.sleep(0.2)
    raise AssertionError("the benchmark never produced a row")


def test_gloo_across_two_sshd_hosts(bed: TestBed, tmp_path: Path) -> None:
    run = StageRun(bed, tmp_path, "it-gloo")
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
    assert not list(Path("/tmp").glob(f"diagnose-{run.run_id}-*")), "the remote folders are removed"
    for host in bed.hosts.values():
        assert bench_processes(bed, host) == []


def test_a_hung_collective_is_stopped_on_every_host(bed: TestBed, tmp_path: Path) -> None:
    """node2's ranks freeze after the first row: the next collective never completes on node1 either."""
    run = StageRun(bed, tmp_path, "it-hang", HANG_PLAN)
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
    run = StageRun(bed, tmp_path, "it-death", LONG_PLAN)
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
    for folder in Path("/tmp").glob(f"diagnose-{run.run_id}-*"):
        shutil.rmtree(folder, ignore_errors=True)


def test_nothing_is_left_in_tmp_and_a_lost_hosts_folders_go_with_the_next_run(
    bed: TestBed, tmp_path: Path
) -> None:
    """torchrun's torchelastic_* folders land inside the launch folder, which the run removes; node2 frozen
    mid-sweep keeps its folder (nobody could reach it), which the next run on it removes and reports."""
    first = StageRun(bed, tmp_path / "first", new_run_id(datetime.now(timezone.utc)), HANG_PLAN)
    runner = threading.Thread(target=first)
    runner.start()
    wait_for_first_row(first)
    inside = list(Path("/tmp").glob(f"diagnose-{first.run_id}-*/tmp/torchelastic_*"))
    assert inside, "torch's elastic agent makes its folders in the launch folder's TMPDIR"
    node2 = bed.hosts["node2"]
    node2.freeze()
    runner.join(timeout=240)
    node2.thaw()
    assert not runner.is_alive(), "the stage returned"
    node1_folder = remote_dir(first.run_id, "main", 0)
    assert not any(p.exists() for p in inside if str(p).startswith(node1_folder + "/"))
    deadline = time.monotonic() + 120
    while bench_processes(bed, node2) and time.monotonic() < deadline:
        time.sleep(1)
    left = sorted(str(p) for p in Path("/tmp").glob(f"diagnose-{first.run_id}-*"))
    node2_folder = remote_dir(first.run_id, "main", 1)
    # The bed's hosts share this machine's /tmp, as containers on one machine do: once node2's job has
    # ended (its rc written), node1's sweep at the stage's end may already take node2's folder, and says so.
    # Otherwise node2's folder is left, and the next run must take it.
    assert left in ([node2_folder], []), "node1's folder is removed; node2's could not be, or was by node1"
    first_said = [c.message for c in first.checks if c.id == "bench.cleanup" and c.status == "PASS"]
    assert left or any(node2_folder in m and "this run" in m for m in first_said), first_said
    time.sleep(MIN_AGE_S + 1)  # the job's rc is that old before a sweep takes the folder

    second = StageRun(bed, tmp_path / "second", new_run_id(datetime.now(timezone.utc)))
    second()
    assert not list(Path("/tmp").glob(f"diagnose-{first.run_id}-*")), "the next run removed node2's folder"
    assert not list(Path("/tmp").glob(f"diagnose-{second.run_id}-*"))
    assert not any(p.exists() for p in inside), "no torchelastic_* folder of either run is left"
    said = [c.message for c in second.checks if c.id == "bench.cleanup" and c.status == "PASS"]
    assert not left or any(node2_folder in m and "earlier runs" in m for m in said), said
