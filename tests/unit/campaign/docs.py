"""Small results documents (schema 1) for the campaign's tests: the shape `diagnose run` writes, built by
hand so that each test states the one fact it turns on."""

from __future__ import annotations

from typing import Any


def identity(
    serial: str = "S0", guid: str = "0xa", fw: str = "28.39.1002", driver: str = "580.1"
) -> dict[str, Any]:
    return {
        "gpus": {"00000000:18:00.0": serial},
        "hcas": {"mlx5_0/1": guid},
        "cables": {"mlx5_0/1": "MT01"},
        "firmware": {"HCA mlx5_0": fw},
        "driver": driver,
        "nccl": "2.28.9",
    }


def document(
    run_id: str,
    started: str,
    hosts: dict[str, dict[str, Any]],
    checks: list[dict[str, Any]] | None = None,
    benchmarks: list[dict[str, Any]] | None = None,
    stress: list[dict[str, Any]] | None = None,
    verdict: str | None = None,
) -> dict[str, Any]:
    """``hosts``: name -> identity; every host gets a passing host.reachable and gpu.topology unless
    ``checks`` has its own rows for them."""
    rows = list(checks or [])
    for name in hosts:
        rows.append({"id": "host.reachable", "host": name, "status": "PASS", "message": "ok"})
    failing = any(r["status"] in ("FAIL", "ERROR") for r in rows) or any(
        b["status"] == "FAIL" for b in benchmarks or []
    )
    return {
        "schema": 1,
        "run": {"id": run_id, "started": started, "playbook": "acceptance", "inventory": "inv.yaml"},
        "hosts": [{"name": n, "reachable": True, "environment": {}, "identity": i} for n, i in hosts.items()],
        "checks": rows,
        "benchmarks": benchmarks or [],
        "stress": stress or [],
        "verdict": verdict or ("FAIL" if failing else "PASS"),
    }


def row(
    check: str, host: str | None, status: str = "PASS", message: str = "", action: str | None = None
) -> dict[str, Any]:
    return {
        "id": check,
        "host": host,
        "status": status,
        "message": message or f"{check} {status}",
        "action": action,
    }


def allreduce(hosts: list[str], status: str = "PASS", busbw: float = 40.0) -> dict[str, Any]:
    return {
        "collective": "all_reduce",
        "hosts": hosts,
        "nodes": len(hosts),
        "status": status,
        "message": f"all_reduce {status}",
        "rows": [{"bytes": 1 << 30, "busbw_gbps": busbw}],
    }


def gemm(host: str, value: float, name: str = "NVIDIA H200") -> dict[str, Any]:
    return {
        "host": host,
        "bus_id": "00000000:18:00.0",
        "name": name,
        "check": "gpu.gemm",
        "metric": "gemm.bf16",
        "value": value,
        "verdict": "PASS",
    }


def burnin(host: str, minutes: float) -> dict[str, Any]:
    return {
        "host": host,
        "bus_id": "00000000:18:00.0",
        "check": "gpu.burnin",
        "minutes": minutes,
        "verdict": "PASS",
    }
