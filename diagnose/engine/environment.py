"""A host's software and hardware identity for results.json ``hosts[].environment``.

Assembled from the facts the checks already gathered (no command of its own), so the environment a report
shows is exactly the one the checks judged. A value no check could read is None, never a guess.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def environment_from_facts(facts_by_check: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """``{gpu_model, gpu_count, driver, cuda, nccl, torch, os, nccl_env}`` from gpu.topology, nccl.version,
    host.os and nccl.env facts (whichever of them ran)."""
    gpu = facts_by_check.get("gpu.topology") or {}
    nccl = facts_by_check.get("nccl.version") or {}
    host_os = facts_by_check.get("host.os") or {}
    nccl_env = facts_by_check.get("nccl.env") or {}
    os_text = host_os.get("pretty_name")
    if host_os.get("kernel"):
        os_text = f"{os_text or 'Linux'} (kernel {host_os['kernel']})"
    return {
        "gpu_model": gpu.get("gpu_model"),
        "gpu_count": gpu.get("gpu_count"),
        "driver": gpu.get("driver"),
        "cuda": gpu.get("cuda"),
        "nccl": nccl.get("version"),
        "torch": nccl.get("torch"),
        "os": os_text,
        "nccl_env": dict(nccl_env.get("effective") or {}),
    }
