"""Healthy nightly results documents (schema 1) for a two-node cluster, and their recording in a history
database: what the history tests change one field of to make a regression or a flapping check.

The host environment is the one captured on the lent 4x H200 machine (/work/captures/h200x4: driver
580.159.04 from drvver.txt, CUDA 13.0 / NCCL 2.28.9 / torch 2.11.0+cu130 from torchver.txt). The busbw rows
are the out-of-place columns of a real nccl-tests all_reduce_perf run on 2 nodes x 8 H100 80GB HBM3
(16 ranks), published in github.com/lessizzmore/create-a3mega-ztan-fork, file ztan-NCCL-test-result,
at the sizes of the nightly sweep (16K .. 1G by x4).
"""

from __future__ import annotations

import copy
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from diagnose import history

# bytes, time_us, algbw_gbps, busbw_gbps (nccl-tests out-of-place, 16 ranks)
A3_ALL_REDUCE = [
    (16384, 138.6, 0.12, 0.22),
    (65536, 159.4, 0.41, 0.77),
    (262144, 167.1, 1.57, 2.94),
    (1048576, 203.2, 5.16, 9.68),
    (4194304, 364.6, 11.50, 21.57),
    (16777216, 977.6, 17.16, 32.18),
    (67108864, 1261.6, 53.20, 99.74),
    (268435456, 2360.9, 113.70, 213.19),
    (1073741824, 6759.0, 158.86, 297.86),
]
ENV = {
    "gpu_model": "NVIDIA H200",
    "gpu_count": 4,
    "driver": "580.159.04",
    "cuda": "13.0",
    "nccl": "2.28.9",
    "torch": "2.11.0+cu130",
    "os": "NixOS",
    "nccl_env": {"NCCL_NVLS_ENABLE": "0"},
}
HOSTS = ("node01", "node02")
PER_HOST = ("host.reachable", "ib.port_state", "gpu.topology", "net.port_range", "nccl.env")


def make_results(run_id: str, started: datetime, playbook: str = "nightly") -> dict[str, Any]:
    """A healthy nightly results document for a two-node cluster."""
    checks = [
        {
            "id": check_id,
            "host": host,
            "checklist": "1",
            "status": "PASS",
            "observed": None,
            "expected": None,
            "message": f"{check_id} as expected",
            "remediation": None,
            "evidence": f"raw/{host}/x.txt",
        }
        for host in HOSTS
        for check_id in PER_HOST
    ]
    checks.append(
        {
            "id": "versions.consistency",
            "host": None,
            "checklist": "3",
            "status": "PASS",
            "observed": "one version everywhere",
            "expected": "one version everywhere",
            "message": "driver, CUDA and torch agree on every host",
            "remediation": None,
            "evidence": None,
        }
    )
    return {
        "schema": 1,
        "run": {
            "id": run_id,
            "started": started.isoformat(timespec="seconds"),
            "finished": (started + timedelta(minutes=6)).isoformat(timespec="seconds"),
            "tool_version": "0.1.0",
            "inventory": "/etc/diagnose/prod.yaml",
            "playbook": playbook,
            "profile": "h200-8x-ndr400",
            "argv": ["diagnose", "run"],
        },
        "hosts": [
            {"name": h, "address": h, "reachable": True, "error": None, "environment": copy.deepcopy(ENV)}
            for h in HOSTS
        ],
        "checks": checks,
        "benchmarks": [
            {
                "collective": "all_reduce",
                "tool": "nccl-tests",
                "backend": "nccl",
                "hosts": list(HOSTS),
                "nodes": 2,
                "ranks": 16,
                "transport": {"inter_node": "NET/IB", "intra_node": ["P2P"], "gdrdma": True},
                "rows": [
                    {"bytes": b, "time_us": t, "algbw_gbps": a, "busbw_gbps": bus, "wrong": 0}
                    for b, t, a, bus in A3_ALL_REDUCE
                ],
                # what diagnose.benchmarks.expect gives the profile's fabric (8 × 400 Gb/s at 2 nodes): a
                # judged figure, as an NCCL sweep on a profile with a fabric is
                "expected_busbw_gbps": 340.0,
                "status": "PASS",
                "message": "",
            }
        ],
        "verdict": "PASS",
    }


T0 = datetime(2026, 11, 18, 2, 0, tzinfo=timezone.utc)


def night(n: int) -> datetime:
    return T0 + timedelta(days=n)


def scale_band(results: dict[str, Any], lo: int, hi: int | None, factor: float) -> None:
    for row in results["benchmarks"][0]["rows"]:
        if row["bytes"] >= lo and (hi is None or row["bytes"] < hi):
            row["busbw_gbps"] = round(row["busbw_gbps"] * factor, 2)


def fail_check(results: dict[str, Any], check_id: str, host: str, message: str) -> None:
    for check in results["checks"]:
        if check["id"] == check_id and check["host"] == host:
            check["status"] = "FAIL"
            check["message"] = message
    results["verdict"] = "FAIL"


def record(db: Path, results: dict[str, Any], tmp_path: Path) -> Path:
    run_dir = tmp_path / "runs" / results["run"]["id"]
    run_dir.mkdir(parents=True, exist_ok=True)
    history.record_run(db, results, run_dir)
    return run_dir


#: Night-to-night factors on the real rows: a quiet NCCL fabric, within about ±2 % (the last one, 1.00, is the
#: run tests name r1 as their reference). Chosen, not measured: the rows are real, the jitter is ours.
QUIET_NIGHTS = (0.98, 1.02, 0.99, 1.01)


def good_nights(db: Path, tmp_path: Path, factors: tuple[float, ...] = QUIET_NIGHTS) -> None:
    """Record healthy nights before night(0), each with every size scaled by its factor: the series' good
    runs, whose spread is its run-to-run noise."""
    for n, factor in enumerate(factors):
        results = make_results(f"g{n + 1}", night(n - len(factors)))
        scale_band(results, 0, None, factor)
        record(db, results, tmp_path)
