"""The NVLink fabric of each GPU (``nvidia-smi -q``'s Fabric block) and the IMEX domain (``nvidia-imex-ctl -N``).

On GB200/GB300 NVL72 racks the GPUs of 18 compute trays share one NVLink domain through the rack's NVSwitch
trays. Each GPU registers with the fabric and reports the outcome in its Fabric block: a state (Not Started,
In Progress, Completed), a status (Success, or the reason it failed, such as ``Insufficient Resources``), the
clique it joined and the cluster UUID of the domain, and from r550 on a health summary. A registration can
complete and still fail (Completed / Insufficient Resources, clique 0, an all-zero UUID), and a GPU can be
registered in the clique while its fabric health reads Unhealthy, so every field is kept and judged by the
checks, not here.

The XML form (``nvidia-smi -q -x``) is read because its tags are stable across driver branches and it carries
each GPU's place in the rack (``platformInfo``: chassis serial, slot, tray index, module id). Tag spelling
differs between fields of one file (``cliqueId`` and ``clusterUuid`` in camelCase, ``tray_index`` in snake
case), and both spellings are accepted for each. The text form is read too, because it is what operators paste
and what tickets carry, often cut by grep (``--`` separators) or shifted left.

A single-node HGX board (B200) also reports Completed/Success, with clique 0 and an all-zero cluster UUID: it
has NVSwitches but no multi-node domain, which is why ``in_domain`` looks at the UUID and not the state.

IMEX (the daemon that lets processes on different trays import each other's GPU memory) prints its node table
with ``nvidia-imex-ctl -N``: one ``Node #i - address - STATE`` line per configured peer, a connectivity matrix
of one-letter cells (the legend it prints: I, N, R, D, A, C, where only C is connected) and ``Domain State``.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

from diagnose.core.check import Command, ParseError

#: The full XML query. Heavy (a few hundred KB on 8 GPUs) but the one output that carries the fabric block
#: and the tray's platform info together on every driver that has either.
SMI_QX = Command("nvidia_smi_qx", "nvidia-smi -q -x", tool="nvidia-smi", timeout=60, required=False)

ZERO_UUID = "00000000-0000-0000-0000-000000000000"
_NOT_SET = ("", "n/a", "none", "not supported", "unknown")
_XML_FIELDS: dict[str, tuple[str, ...]] = {
    "state": ("fabric/state",),
    "status": ("fabric/status",),
    "clique_id": ("fabric/cliqueId", "fabric/clique_id"),
    "cluster_uuid": ("fabric/clusterUuid", "fabric/cluster_uuid"),
    "health": ("fabric/health/summary",),
    "bandwidth": ("fabric/health/bandwidth",),
    "route_unhealthy": ("fabric/health/route_unhealthy",),
    "chassis_serial": ("platformInfo/chassis_serial_number", "platform_info/chassis_serial_number"),
    "slot": ("platformInfo/slot_number", "platform_info/slot_number"),
    "tray_index": ("platformInfo/tray_index", "platform_info/tray_index"),
    "module_id": ("platformInfo/module_id", "platform_info/module_id"),
    "peer_type": ("platformInfo/peer_type", "platform_info/peer_type"),
}
# Text keys of the Fabric block, lower-cased, to the same fact names.
_TEXT_FIELDS = {
    "state": "state",
    "status": "status",
    "cliqueid": "clique_id",
    "clique id": "clique_id",
    "clusteruuid": "cluster_uuid",
    "cluster uuid": "cluster_uuid",
    "health.summary": "health",
    "health.bandwidth": "bandwidth",
    "health.route unhealthy": "route_unhealthy",
}
_GPU_HEADER = re.compile(r"^GPU\s+(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")
_KEY_VALUE = re.compile(r"^(?P<key>[^:]+?)\s*:\s*(?P<value>.*)$")
_IMEX_NODE = re.compile(r"^Node\s+#\s*(?P<index>\d+)\s+-\s+(?P<address>\S+)\s+-\s+(?P<state>[A-Z_]+)")
_IMEX_ROW = re.compile(r"^\s*(?P<row>\d+)\s+(?P<cells>(?:[A-Z]\s*)+)$")
_IMEX_DOMAIN = re.compile(r"^Domain State:\s*(?P<state>\S+)")


def value(text: str | None) -> str | None:
    """None for the placeholders nvidia-smi prints where a field does not apply."""
    if text is None or text.strip().lower() in _NOT_SET:
        return None
    return text.strip()


def clique(text: str | None) -> int | None:
    """The clique id as a number: decimal in nvidia-smi (``32766``), hex in NCCL's log (``0x7ffe``)."""
    text = value(text)
    if text is None:
        return None
    try:
        return int(text, 16) if text.lower().startswith("0x") else int(text)
    except ValueError:
        return None


def in_domain(gpu: dict[str, Any]) -> bool:
    """Whether the GPU was given a multi-node NVLink domain (a non-zero cluster UUID)."""
    uuid = gpu.get("cluster_uuid")
    return uuid is not None and uuid.replace("-", "").strip("0") != ""


def registered(gpu: dict[str, Any]) -> bool:
    """Completed with Success: the GPU joined the fabric."""
    return (gpu.get("state") or "").lower() == "completed" and (gpu.get("status") or "").lower() == "success"


def healthy(gpu: dict[str, Any]) -> bool:
    """The health summary is not Unhealthy (drivers before r550 have none) and the bandwidth is not degraded."""
    summary = (gpu.get("health") or "healthy").lower()
    bandwidth = (gpu.get("bandwidth") or "full").lower()
    return summary == "healthy" and bandwidth == "full"


def _finish(gpu: dict[str, Any]) -> dict[str, Any]:
    gpu["clique_id"] = clique(gpu.get("clique_id"))
    for key in ("tray_index", "slot", "module_id"):
        text = value(gpu.get(key))
        gpu[key] = int(text) if text is not None and text.isdigit() else None
    return gpu


#: NVML's fabric health mask (nvml.h, NVML_GPU_FABRIC_HEALTH_MASK_*): 2-bit fields at these shifts, each
#: 0 not supported, 1 TRUE (the condition holds: bad), 2 FALSE. NCCL prints the mask as ``healthMask 0xaa``:
#: all four FALSE, a healthy GPU, though it reads like a bit pattern of failures.
HEALTH_MASK_FIELDS = (
    (0, "bandwidth degraded"),
    (2, "route recovery in progress"),
    (4, "route unhealthy"),
    (6, "access timeout recovery"),
)


def health_mask_faults(mask: int) -> list[str]:
    """The conditions a fabric health mask reports as TRUE, in NVML's order; empty for a healthy GPU."""
    return [name for shift, name in HEALTH_MASK_FIELDS if (mask >> shift) & 0x3 == 1]


def parse_fabric_xml(text: str) -> list[dict[str, Any]]:
    """One dict per ``<gpu>``: bus_id, name, the fabric fields and the platform info (None where N/A)."""
    try:
        root = ET.fromstring(text.strip().encode())
    except ET.ParseError as error:
        raise ParseError(f"nvidia-smi -q -x is not XML: {error}") from error
    if root.tag != "nvidia_smi_log":
        raise ParseError(f"nvidia-smi -q -x has root <{root.tag}>, not <nvidia_smi_log>")
    gpus = []
    for element in root.findall("gpu"):
        gpu: dict[str, Any] = {"bus_id": element.get("id"), "name": value(element.findtext("product_name"))}
        for field, paths in _XML_FIELDS.items():
            found = next((element.findtext(p) for p in paths if element.find(p) is not None), None)
            gpu[field] = value(found)
        gpus.append(_finish(gpu))
    return gpus


def parse_fabric_text(text: str) -> list[dict[str, Any]]:
    """The Fabric blocks of ``nvidia-smi -q``, in order; bus_id where a ``GPU <id>`` header precedes one.

    A block ends where a line is indented no deeper than its ``Fabric`` header, at grep's ``--`` or at the
    next GPU; ``Health`` sub-fields are read as ``health.<key>``.
    """
    gpus: list[dict[str, Any]] = []
    bus: str | None = None
    block: dict[str, Any] | None = None
    indent = 0
    section = ""
    for line in text.splitlines():
        stripped = line.strip()
        depth = len(line) - len(line.lstrip())
        header = _GPU_HEADER.match(stripped)
        if header or stripped == "--" or (block is not None and stripped and depth <= indent):
            if block is not None:
                gpus.append(_finish(block))
                block = None
            if header:
                bus = header["bus"]
                continue
        if stripped == "Fabric":
            block, indent, section = {"bus_id": bus}, depth, ""
            continue
        if block is None or not stripped:
            continue
        pair = _KEY_VALUE.match(stripped)
        if pair is None:
            section = stripped.lower()
            continue
        key = pair["key"].lower()
        field = _TEXT_FIELDS.get(f"{section}.{key}" if section else key)
        if field is not None:
            block[field] = value(pair["value"])
    if block is not None:
        gpus.append(_finish(block))
    return gpus


def parse_imex_nodes(text: str) -> dict[str, Any]:
    """``nodes``: index, address and state of each configured peer; ``matrix``: {from: {to: cell}};
    ``domain_state``: UP, DOWN, … or None where the output stops before it."""
    nodes: list[dict[str, Any]] = []
    matrix: dict[int, dict[int, str]] = {}
    columns: list[int] = []
    domain_state: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        node = _IMEX_NODE.match(stripped)
        if node:
            nodes.append({"index": int(node["index"]), "address": node["address"], "state": node["state"]})
            continue
        if stripped.startswith("Nodes From\\To"):
            columns = [int(c) for c in stripped.removeprefix("Nodes From\\To").split()]
            continue
        row = _IMEX_ROW.match(line)
        if row and columns:
            cells = row["cells"].split()
            matrix[int(row["row"])] = dict(zip(columns, cells, strict=False))
            continue
        domain = _IMEX_DOMAIN.match(stripped)
        if domain:
            domain_state = domain["state"]
    return {"nodes": nodes, "matrix": matrix, "domain_state": domain_state}


def unconnected(status: dict[str, Any]) -> list[int]:
    """The nodes most of their peers do not see Connected (not a C cell in their column), in index order.

    A lost peer shows in its own row as well (it sees nobody); counting columns over the majority of the
    other rows names it and not the peers it lost, unless the domain is too small to tell (two nodes).
    """
    matrix = status["matrix"]
    lost = []
    for target in sorted({t for cells in matrix.values() for t in cells}):
        others = [cells.get(target) for source, cells in matrix.items() if source != target]
        missing = sum(1 for cell in others if cell != "C")
        if others and missing * 2 >= len(others):
            lost.append(target)
    return lost
