"""The shipped benchmark program: nccl-tests' byte counts and formulas, and real runs under torchrun (gloo)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from diagnose.core import units
from diagnose.shipped import collective_bench
from diagnose.shipped.collective_bench import bandwidths, bus_factor, counts, sweep

PROGRAM = Path(collective_bench.__file__)


def test_sweep_walks_like_nccl_tests() -> None:
    assert sweep(1 << 20, 4 << 30, 2) == [1 << s for s in range(20, 33)]
    assert sweep(1 << 20, 1 << 20, 2) == [1 << 20]
    assert sweep(1000, 100000, 10) == [1000, 10000, 100000]


@pytest.mark.parametrize(
    ("collective", "ranks", "factor"),
    [
        ("all_reduce", 4, 1.5),
        ("all_reduce", 16, 2 * 15 / 16),
        ("reduce_scatter", 8, 7 / 8),
        ("all_gather", 8, 7 / 8),
        ("all_to_all", 4, 0.75),
        ("broadcast", 8, 1.0),
        ("sendrecv", 8, 1.0),
    ],
)
def test_bus_factors_are_nccl_tests(collective: str, ranks: int, factor: float) -> None:
    """nccl-tests' doc/PERFORMANCE.md: 2(n-1)/n for all_reduce, (n-1)/n for the split collectives, 1 for
    broadcast and sendrecv; the shipped program and the controller (core.units) keep one copy each."""
    assert bus_factor(collective, ranks) == pytest.approx(factor)
    assert units.bus_factor(collective, ranks) == pytest.approx(factor)


def test_bandwidth_in_decimal_gigabytes() -> None:
    # nccl-tests' 4 GiB all_reduce on 4 ranks in 17.7 ms: algbw 242.6, busbw 363.9 GB/s (1e9 B/s).
    algbw, busbw = bandwidths(4 << 30, 17.7e-3, "all_reduce", 4)
    assert algbw == pytest.approx(242.66, abs=0.01)
    assert busbw == pytest.approx(algbw * 1.5)


def test_split_collectives_count_the_whole_buffer_divisible_by_ranks() -> None:
    assert counts("all_gather", 1000, 4, 3) == (83, 249, 996)  # per-rank input, gathered output, bytes
    assert counts("reduce_scatter", 1000, 4, 3) == (249, 83, 996)
    assert counts("all_to_all", 1 << 20, 4, 8) == (262144, 262144, 1 << 20)
    assert counts("all_reduce", 1 << 20, 4, 8) == (262144, 262144, 1 << 20)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_program_under_torchrun_with_gloo(tmp_path: Path) -> None:
    """Three ranks (odd, so no pattern lines up by luck), every collective, rows as nccl-tests counts them."""
    results = tmp_path / "rows.jsonl"
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node=3",
        f"--master-port={free_port()}",
        str(PROGRAM),
        "--backend=gloo",
        "--collectives=" + ",".join(collective_bench.COLLECTIVES),
        "--min-bytes=1000",
        "--max-bytes=100000",
        "--step-factor=10",
        "--warmup=1",
        "--iters=3",
        "--root=2",
        f"--results={results}",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    records = [json.loads(line) for line in results.read_text().splitlines()]
    assert records[0]["event"] == "start" and records[0]["ranks"] == 3
    assert records[-1]["event"] == "done"
    rows = [r for r in records if r["event"] == "row"]
    assert len(rows) == 3 * len(collective_bench.COLLECTIVES)
    for row in rows:
        assert row["wrong"] == 0, row
        assert row["bytes"] == counts(row["collective"], row["bytes"], 4, 3)[2]
        algbw = row["bytes"] / (row["time_us"] * 1e-6) / 1e9
        assert row["algbw_gbps"] == pytest.approx(algbw, rel=0.01, abs=0.002)
        factor = bus_factor(row["collective"], 3)
        assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * factor, abs=0.002)
        assert row["time_us_max"] >= row["time_us"]


CORRUPTION = """
import sys
from diagnose.shipped.collective_bench import Bench, parse_args
bench = Bench(parse_args(["--backend=gloo"]))
buf = bench.torch.empty(1000)
bench.fill_pattern(buf, 0)
clean = bench.count_wrong(buf, [1, 2, 3, 4, 5], 0)
buf[[3, 500, 999]] = 0.5
print(clean, bench.count_wrong(buf, [1, 2, 3, 4, 5], 0), bench.count_wrong(buf, [1, 2, 3, 4, 5], 1))
bench.dist.destroy_process_group()
"""


def test_validation_counts_every_wrong_element() -> None:
    """A real one-rank gloo group: the checker sees 3 corrupted elements, and a shifted pattern as all wrong."""
    env = {
        **os.environ,
        "RANK": "0",
        "WORLD_SIZE": "1",
        "LOCAL_RANK": "0",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
    }
    done = subprocess.run(
        [sys.executable, "-c", CORRUPTION], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["0", "3", "1000"]
