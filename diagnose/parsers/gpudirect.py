"""The three things that decide whether a NIC can read and write GPU memory directly (GPUDirect RDMA).

Either the ``nvidia_peermem`` module is loaded (or Mellanox's older ``nv_peer_mem``), or the kernel and
driver allow DMA-BUF: NVIDIA's open kernel module exports GPU memory as dma-buf, and the RDMA core can
import dma-buf memory regions from Linux 5.12 on. These parsers only read; the rule decides.
"""

from __future__ import annotations

import re
from typing import Any

PEERMEM_MODULES = ("nvidia_peermem", "nv_peer_mem")
DMABUF_MIN_KERNEL = (5, 12)

_DRIVER_VERSION = re.compile(r"Kernel Module(?: for \S+)?\s+(?P<v>\d+\.\d+(?:\.\d+)?)")


def parse_modules(text: str) -> dict[str, Any]:
    """``lsmod`` or ``/proc/modules``: the module names (first word of each line, lsmod's header dropped)."""
    names = []
    for line in text.splitlines():
        words = line.split()
        if not words or (words[0] == "Module" and "Size" in words):
            continue
        names.append(words[0])
    return {"modules": names, "peermem": [m for m in PEERMEM_MODULES if m in names]}


def parse_driver_version_file(text: str, exit_code: int | None) -> dict[str, Any]:
    """``/proc/driver/nvidia/version``: present at all, open or proprietary module, driver version."""
    first = text.splitlines()[0] if text.strip() else ""
    if exit_code not in (0, None) or not first.startswith("NVRM"):
        return {"nvidia_loaded": False, "open_module": False, "driver": None, "nvrm": None}
    match = _DRIVER_VERSION.search(first)
    return {
        "nvidia_loaded": True,
        "open_module": "Open Kernel Module" in first,
        "driver": match.group("v") if match else None,
        "nvrm": first.strip(),
    }


def parse_kernel_release(text: str) -> dict[str, Any]:
    """``uname -r``: the release string and its (major, minor) as numbers."""
    release = text.strip().splitlines()[0].strip() if text.strip() else ""
    match = re.match(r"^(\d+)\.(\d+)", release)
    return {
        "kernel": release or None,
        "kernel_version": [int(match.group(1)), int(match.group(2))] if match else None,
    }
