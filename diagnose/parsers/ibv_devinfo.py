"""``ibv_devinfo`` (verbs view of each RDMA device) and the ``/dev/infiniband`` listing.

``ibv_devinfo`` is what NCCL itself sees through libibverbs, so the MTU and the device list are read here
rather than from ``ibstat`` (which goes through umad and, for EFA, reports no MTU at all).
"""

from __future__ import annotations

import re
from typing import Any

from diagnose.core.check import ParseError
from diagnose.parsers.rdma import MELLANOX_VENDOR_ID, fabric_kind, natural_key

_HCA = re.compile(r"^hca_id:\s*(?P<name>\S+)")
_PORT = re.compile(r"^port:\s*(?P<port>\d+)")
_FIELD = re.compile(r"^(?P<key>[a-z_]+):\s*(?P<value>.*)$")
# "PORT_ACTIVE (4)" / "4096 (5)": the value before the enum number in brackets.
_ENUM = re.compile(r"^(?P<text>.*?)\s*\((?P<code>\d+)\)$")

_DEVICE_FIELDS = ("transport", "fw_ver", "node_guid", "vendor_id", "vendor_part_id", "hw_ver", "board_id")
_PORT_FIELDS = ("state", "max_mtu", "active_mtu", "sm_lid", "port_lid", "link_layer")
_PORT_STATES = {
    "PORT_NOP": "NOP",
    "PORT_DOWN": "Down",
    "PORT_INIT": "Initializing",
    "PORT_ARMED": "Armed",
    "PORT_ACTIVE": "Active",
    "PORT_ACTIVE_DEFER": "ActiveDefer",
}


def _enum_text(value: str) -> str:
    match = _ENUM.match(value)
    return match.group("text") if match else value


def _ca_type(device: dict[str, Any]) -> str | None:
    """ibstat's CA type for a Mellanox device (``vendor_part_id: 4131`` is ``MT4131``), so a profile's
    compute HCA types select the same ports in both tools."""
    part = str(device.get("vendor_part_id") or "")
    if str(device.get("vendor_id") or "").lower() == MELLANOX_VENDOR_ID and part.isdigit():
        return f"MT{part}"
    return None


def parse_ibv_devinfo(text: str) -> dict[str, Any]:
    """Facts: ``devices`` (attributes and ``fabric``) and ``ports`` (each naming its ``device``; MTUs as int)."""
    devices: list[dict[str, Any]] = []
    device: dict[str, Any] | None = None
    port: dict[str, Any] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        match = _HCA.match(line)
        if match:
            device = {"name": match.group("name"), "ports": []}
            devices.append(device)
            port = None
            continue
        match = _PORT.match(line)
        if match and device is not None:
            port = {"device": device["name"], "port": int(match.group("port"))}
            device["ports"].append(port)
            continue
        match = _FIELD.match(line)
        if match is None or device is None:
            continue
        key, value = match.group("key"), match.group("value").strip()
        if port is not None and key in _PORT_FIELDS:
            port[key] = _enum_text(value)
        elif port is None and key in _DEVICE_FIELDS:
            device[key] = value
    if not devices:
        if "No IB devices found" in text or not text.strip():
            return {"devices": [], "ports": []}
        raise ParseError(f"no hca_id block in ibv_devinfo output: {text.strip()[:120]!r}")
    ports = []
    for entry in devices:
        entry["fabric"] = fabric_kind(entry["name"], None, entry.get("vendor_id"), entry.get("transport"))
        for item in entry.pop("ports"):
            item["state"] = _PORT_STATES.get(item.get("state", ""), item.get("state"))
            for key in ("max_mtu", "active_mtu"):
                if str(item.get(key, "")).isdigit():
                    item[key] = int(item[key])
            item["fabric"] = fabric_kind(
                entry["name"], item.get("link_layer"), entry.get("vendor_id"), entry.get("transport")
            )
            entry["fabric"] = item["fabric"]
            item["ca_type"] = _ca_type(entry)
            ports.append(item)
    return {"devices": devices, "ports": ports}


def parse_dev_infiniband(text: str, exit_code: int | None) -> dict[str, Any]:
    """``ls -1 /dev/infiniband``: None when the directory is absent, else its entries split by role.

    ``uverbsN`` are the verbs devices NCCL opens (one per HCA); ``rdma_cm`` alone means the RDMA core is
    loaded but no HCA driver registered a device, which is what a GPU cloud VM without a fabric shows.
    """
    if exit_code not in (0, None):
        return {"present": False, "entries": [], "uverbs": [], "umad": []}
    entries = [line.strip() for line in text.splitlines() if line.strip()]
    return {
        "present": True,
        "entries": entries,
        "uverbs": sorted((e for e in entries if e.startswith("uverbs")), key=natural_key),
        "umad": sorted((e for e in entries if e.startswith("umad")), key=natural_key),
    }
