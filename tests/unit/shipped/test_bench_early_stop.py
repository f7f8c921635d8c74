"""The collective sweep's early stop: the pure rule on real sweeps, and the shipped program under torchrun."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from diagnose.benchmarks.early_stop import stopped_sentence
from diagnose.benchmarks.expect import LARGE_BYTES
from diagnose.shipped import collective_bench
from diagnose.shipped.collective_bench import BOUND_BYTES, plateau, stop_after
from tests.support.paths import FIXTURES

RESULTS = FIXTURES / "results"
# Real sweeps on lent H200s with NVLink (P2P/CUMEM) and their judged floors: none may stop early.
HEALTHY = ("h200x4_real_moe", "h200x2_real_health", "h200_local")
# A real 4× H200 sweep whose two halves talked over NET/Socket (5.5 GB/s against the floor 289).
SOCKET = "h200x4_two_halves_socket"


def sweeps(name: str) -> list[tuple[list[tuple[int, float]], float]]:
    """Each benchmark of a results fixture: its (bytes, busbw) rows and the floor it was judged against."""
    benchmarks = json.loads((RESULTS / f"{name}.json").read_text())["benchmarks"]
    return [
        ([(r["bytes"], r["busbw_gbps"]) for r in b["rows"]], b["normal_range_gbps"][0]) for b in benchmarks
    ]


def test_the_controller_and_the_program_read_bandwidth_from_the_same_size() -> None:
    assert BOUND_BYTES == LARGE_BYTES


@pytest.mark.parametrize("name", HEALTHY)
def test_no_healthy_real_sweep_stops_at_any_size(name: str) -> None:
    for points, floor in sweeps(name):
        assert all(stop_after(points[:n], floor) is None for n in range(1, len(points) + 1))


def test_the_real_socket_fallback_stops_after_two_bandwidth_bound_sizes() -> None:
    ((points, floor),) = sweeps(SOCKET)
    bound = [i for i, (size, _) in enumerate(points) if size >= LARGE_BYTES]
    assert stop_after(points[: bound[0] + 1], floor) is None, "one bandwidth-bound size is not enough"
    stop = stop_after(points[: bound[1] + 1], floor)
    assert stop is not None and stop.after_bytes == 256 << 20 and stop.floor_gbps == 289.0
    assert stop.busbw_gbps == 5.768 and stop.plateau_gbps == pytest.approx(5.48, abs=0.01)
    sentence = stopped_sentence({**stop.__dict__, "skipped_bytes": [512 << 20, 1 << 30]})
    assert sentence.startswith("stopped early: 5.77 GB/s at 256 MiB is 2.0% of the floor 289 GB/s")
    assert sentence.endswith("larger sizes (512 MiB–1 GiB) skipped")


def test_without_a_floor_nothing_stops() -> None:
    ((points, _),) = sweeps(SOCKET)
    assert stop_after(points, None) is None and stop_after(points, 0.0) is None


def test_a_latency_bound_curve_below_the_tenth_still_climbs_and_runs_on() -> None:
    """Time = 100 ms + bytes / 300 GB/s: 0.7 and 1.3 GB/s at 64 and 128 MiB, a tenth of the floor 289 is
    28.9, yet the α-β model through them reaches 300 GB/s at large sizes, so the sweep goes on."""
    points = [(s, s / (0.1 + s / 300e9) / 1e9) for s in (64 << 20, 128 << 20)]
    assert all(b < 28.9 for _, b in points)
    assert plateau(points) == pytest.approx(300.0, rel=1e-6)
    assert stop_after(points, 289.0) is None


def test_a_curve_that_did_not_grow_has_no_plateau() -> None:
    assert plateau([(64 << 20, 2.0), (128 << 20, 4.5)]) is None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_sweep(tmp_path: Path, floors: str) -> list[dict]:
    """Two gloo ranks, 256 KiB to 16 MiB, bandwidth read from 1 MiB on; the program's JSON lines."""
    results = tmp_path / f"rows-{bool(floors)}.jsonl"
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node=2",
        f"--master-port={free_port()}",
        str(Path(collective_bench.__file__)),
        "--backend=gloo",
        "--collectives=all_reduce,all_gather",
        f"--min-bytes={256 << 10}",
        f"--max-bytes={16 << 20}",
        "--warmup=3",
        "--iters=5",
        f"--bound-bytes={1 << 20}",
        f"--floors={floors}",
        f"--results={results}",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return [json.loads(line) for line in results.read_text().splitlines()]


def test_the_program_stops_far_below_its_floor_and_runs_everything_without_one(tmp_path: Path) -> None:
    """An absurd floor for all_reduce only (10 TB/s on two CPU ranks): its warm-up and its sweep end after
    two sizes of 1 MiB or more (a third where the shared CPUs made one pair of timings not grow), the last
    row saying why; all_gather, with no floor, runs every size."""
    records = run_sweep(tmp_path, "all_reduce=10000")
    assert records[-1]["event"] == "done"
    rows = {
        c: [r for r in records if r["event"] == "row" and r["collective"] == c]
        for c in ("all_reduce", "all_gather")
    }
    sizes = [256 << 10 << k for k in range(7)]
    stopped = rows["all_reduce"][-1]["stopped"]
    assert stopped["after_bytes"] in (2 << 20, 4 << 20) and stopped["floor_gbps"] == 10000.0
    assert [r["bytes"] for r in rows["all_reduce"]] == [s for s in sizes if s <= stopped["after_bytes"]]
    assert stopped["skipped_bytes"] == [s for s in sizes if s > stopped["after_bytes"]]
    assert stopped["busbw_gbps"] < 1000.0 and stopped["plateau_gbps"] < 1000.0
    warm = {r["collective"]: r["warm_stopped"] for r in records if r["event"] == "warm"}
    assert warm["all_reduce"]["after_bytes"] in (2 << 20, 4 << 20) and warm["all_gather"] is None
    assert len(rows["all_gather"]) == 7 and not any("stopped" in r for r in rows["all_gather"])
    full = run_sweep(tmp_path, "")
    assert [r["bytes"] for r in full if r["event"] == "row" and r["collective"] == "all_reduce"] == sizes
    assert all(r.get("warm_stopped") is None for r in full if r["event"] == "warm")
