"""``nvidia-smi`` (the summary table) and ``nvidia-smi topo -m`` (the connection matrix).

The summary table gives the driver, the CUDA version the driver supports and one row per GPU; it is read
instead of ``--query-gpu`` because it is the one output that carries the CUDA version on every driver
branch, and the one an operator pastes into a ticket. Drivers from the 610 branch on label the versions
``KMD Version`` and ``CUDA UMD Version``; both spellings are read.

``topo -m`` is a tab-separated matrix whose header is underlined with ANSI escapes when stdout is a
terminal (and, on some drivers, even when it is not). NIC columns are named ``NIC0``… with a
``NIC Legend`` mapping them to devices on current drivers, and named after the device (``mlx5_0``) on
older ones.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from diagnose.core.check import Command, ParseError

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_DRIVER = re.compile(r"(?:Driver|KMD) Version:\s*(?P<v>[0-9][0-9.]*)")
_CUDA = re.compile(r"CUDA (?:UMD )?Version:\s*(?P<v>[0-9][0-9.]*|N/A)")
_SMI = re.compile(r"NVIDIA-SMI\s+(?P<v>[0-9][0-9.]*)")
# "|   0  NVIDIA H100 80GB HBM3          On  |   00000000:18:00.0 Off |" (also "Off" persistence, and
# the older narrower layout "|   0  Tesla P100-SXM2...  On   | 00000000:04:00.0 Off |").
_GPU_ROW = re.compile(
    r"^\|\s+(?P<index>\d+)\s+(?P<name>.+?)\s+(?P<persistence>On|Off)\s*\|\s*(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:"
    r"[0-9A-Fa-f]{2}\.[0-9A-Fa-f])"
)
_NIC_LEGEND = re.compile(r"^\s*(?P<column>NIC\d+):\s*(?P<device>\S+)")
_NV = re.compile(r"^NV(?P<links>\d+)$")

#: The summary table, shared by gpu.topology (driver, CUDA, GPU list) and gpu.persistence (Persistence-M).
SMI_SUMMARY = Command("nvidia_smi", "nvidia-smi", tool="nvidia-smi", timeout=30)
#: One line per GPU with its UUID (and its MIG instances), shared by gpu.topology (which GPUs CUDA sees) and
#: k8s.resources (the GPUs a pod was given); auxiliary to both, whose verdicts stand without it.
SMI_LIST = Command("gpu_list", "nvidia-smi -L", tool="nvidia-smi", timeout=20, required=False, auxiliary=True)

# Best first: how far a GPU is from a NIC over PCIe (nvidia-smi's legend).
PCIE_RANK = {"X": 0, "PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SYS": 5}


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def parse_smi_summary(text: str) -> dict[str, Any]:
    """Facts: ``driver``, ``cuda``, ``smi_version``, ``gpus`` [{index, name, bus_id}], ``gpu_count``,
    ``gpu_model`` (the most common name)."""
    text = strip_ansi(text)
    driver = _DRIVER.search(text)
    cuda = _CUDA.search(text)
    smi = _SMI.search(text)
    gpus = [
        {"index": int(m.group("index")), "name": m.group("name").strip(), "bus_id": m.group("bus")}
        for m in (_GPU_ROW.match(line) for line in text.splitlines())
        if m
    ]
    if driver is None and not gpus:
        if "No devices were found" in text:
            return {
                "driver": None,
                "cuda": None,
                "smi_version": None,
                "gpus": [],
                "gpu_count": 0,
                "gpu_model": None,
            }
        raise ParseError(f"no driver version and no GPU row in nvidia-smi output: {text.strip()[:160]!r}")
    names = Counter(g["name"] for g in gpus)
    cuda_version = cuda.group("v") if cuda else None
    return {
        "driver": driver.group("v") if driver else None,
        "cuda": None if cuda_version == "N/A" else cuda_version,
        "smi_version": smi.group("v") if smi else None,
        "gpus": gpus,
        "gpu_count": len(gpus),
        "gpu_model": names.most_common(1)[0][0] if names else None,
    }


def parse_persistence(text: str) -> list[dict[str, Any]]:
    """Each GPU row's Persistence-M column (``On``/``Off``) with the GPU's index and bus id; "No devices
    were found" is an empty list."""
    rows = (_GPU_ROW.match(line) for line in strip_ansi(text).splitlines())
    gpus = [
        {"index": int(m.group("index")), "bus_id": m.group("bus"), "persistence": m.group("persistence")}
        for m in rows
        if m
    ]
    if not gpus and "No devices were found" not in text and not _DRIVER.search(text):
        raise ParseError(f"no GPU row in nvidia-smi output: {text.strip()[:160]!r}")
    return gpus


def parse_topo(text: str) -> dict[str, Any]:
    """Facts of ``nvidia-smi topo -m``.

    ``gpus`` (GPU0…), ``nics`` [{column, device}], ``links`` {row: {column: relation}} for GPU rows,
    ``affinity`` {GPU: {cpu, numa, gpu_numa}}.
    """
    lines = strip_ansi(text).splitlines()
    header_at = next((i for i, line in enumerate(lines) if re.search(r"\tGPU0\b|^\s+GPU0\b", line)), None)
    if header_at is None:
        if "No devices were found" in text or not text.strip():
            return {"gpus": [], "nics": [], "links": {}, "affinity": {}}
        raise ParseError(f"no GPU0 header in nvidia-smi topo -m output: {text.strip()[:160]!r}")
    header = lines[header_at]
    columns = (
        [c.strip() for c in header.split("\t") if c.strip()] if "\t" in header else _split_spaced(header)
    )
    device_columns = [c for c in columns if c not in ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")]
    extra_columns = [c for c in columns if c in ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")]
    gpus = [c for c in device_columns if re.fullmatch(r"GPU\d+", c)]
    nic_columns = [c for c in device_columns if c not in gpus]

    legend: dict[str, str] = {}
    in_legend = False
    for line in lines[header_at + 1 :]:
        if line.startswith("NIC Legend"):
            in_legend = True
            continue
        match = _NIC_LEGEND.match(line) if in_legend else None
        if match:
            legend[match.group("column")] = match.group("device")

    links: dict[str, dict[str, str]] = {}
    affinity: dict[str, dict[str, str | None]] = {}
    for line in lines[header_at + 1 :]:
        if not line.strip() or line.startswith("Legend"):
            if links:
                break
            continue
        cells = line.split()
        row = cells[0]
        if row not in gpus:
            continue
        values = cells[1:]
        if len(values) < len(device_columns):
            raise ParseError(f"row {row} has {len(values)} cells for {len(device_columns)} columns")
        links[row] = dict(zip(device_columns, values[: len(device_columns)], strict=True))
        rest = values[len(device_columns) :]
        info = dict(zip(extra_columns, rest, strict=False))
        affinity[row] = {
            "cpu": info.get("CPU Affinity"),
            "numa": info.get("NUMA Affinity"),
            "gpu_numa": info.get("GPU NUMA ID"),
        }
    nics = [{"column": c, "device": legend.get(c, c)} for c in nic_columns]
    return {"gpus": gpus, "nics": nics, "links": links, "affinity": affinity}


def _split_spaced(header: str) -> list[str]:
    """A header pasted with spaces for tabs: the multi-word names are the known affinity columns."""
    text = header
    for name in ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID"):
        text = text.replace(name, name.replace(" ", "\0"))
    return [c.replace("\0", " ") for c in text.split()]


def nvlink_links(relation: str) -> int | None:
    """Number of bonded NVLinks for an ``NV#`` cell, None for a PCIe relation."""
    match = _NV.match(relation)
    return int(match.group("links")) if match else None


def model_matches(expected: str, name: str) -> bool:
    """Whether a GPU's name is of the expected model: the model as a whole word of the name, case aside.

    A plain substring test takes an ``NVIDIA GB200`` for a ``B200`` and an ``NVIDIA GH200 480GB`` for an
    ``H200``: a Grace tray would pass an 8-GPU HGX profile's model check. The model must stand between
    non-alphanumeric characters (``NVIDIA A100-SXM4-80GB`` is an A100, ``NVIDIA B300 SXM6 AC`` a B300).
    """
    pattern = rf"(?<![0-9a-z]){re.escape(expected.strip().lower())}(?![0-9a-z])"
    return re.search(pattern, name.lower()) is not None
