"""``ibstat``: every CA, every port, with state, physical state, rate and link layer.

``ibstat`` keeps printing the CAs it could read and then dies with an ``ibpanic:`` line when one device
vanishes under it (an HCA falling off the bus does this); those lines are kept as ``errors`` so a rule can
say so rather than judging a partial list as if it were whole.
"""

from __future__ import annotations

import re
from typing import Any

from diagnose.core.check import ParseError
from diagnose.parsers.rdma import fabric_kind

_CA = re.compile(r"^CA '(?P<name>[^']+)'")
_PORT = re.compile(r"^Port (?P<port>\d+):$")
_FIELD = re.compile(r"^(?P<key>[A-Za-z][A-Za-z ]*?):\s*(?P<value>.*)$")

_CA_FIELDS = {
    "CA type": "ca_type",
    "Number of ports": "port_count",
    "Firmware version": "firmware",
    "Hardware version": "hardware",
    "Node GUID": "node_guid",
    "System image GUID": "system_guid",
}
_PORT_FIELDS = {
    "State": "state",
    "Physical state": "physical_state",
    "Rate": "rate",
    "Base lid": "base_lid",
    "LMC": "lmc",
    "SM lid": "sm_lid",
    "Capability mask": "capability_mask",
    "Port GUID": "port_guid",
    "Link layer": "link_layer",
}


def _number(text: str) -> float | int | None:
    """``Rate: 400`` (Gb/s); some builds print ``Rate: 400 Gb/sec`` and HDR100 breakouts a fraction."""
    match = re.match(r"\s*(\d+(?:\.\d+)?)", text)
    if not match:
        return None
    value = float(match.group(1))
    return int(value) if value.is_integer() else value


def parse_ibstat(text: str) -> dict[str, Any]:
    """Facts: ``cas`` (CA attributes), ``ports`` (every port, naming its ``device`` and that device's
    ``ca_type``, which tells a compute rail from a management HCA of the same link layer), ``errors``
    (ibpanic lines)."""
    cas: list[dict[str, Any]] = []
    errors: list[str] = []
    ca: dict[str, Any] | None = None
    port: dict[str, Any] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("ibpanic:") or line.startswith("ibwarn:"):
            errors.append(line)
            continue
        match = _CA.match(line)
        if match:
            ca = {"name": match.group("name"), "ports": []}
            cas.append(ca)
            port = None
            continue
        match = _PORT.match(line)
        if match and ca is not None:
            port = {"device": ca["name"], "port": int(match.group("port"))}
            ca["ports"].append(port)
            continue
        match = _FIELD.match(line)
        if match is None or ca is None:
            continue
        key, value = match.group("key"), match.group("value").strip()
        if port is not None and key in _PORT_FIELDS:
            port[_PORT_FIELDS[key]] = _number(value) if key == "Rate" else value
        elif key in _CA_FIELDS:
            ca[_CA_FIELDS[key]] = value
    if not cas and not errors and text.strip():
        raise ParseError(f"no CA block in ibstat output: {text.strip()[:120]!r}")
    ports = []
    for entry in cas:
        for item in entry.pop("ports"):
            item["fabric"] = fabric_kind(entry["name"], item.get("link_layer"))
            item["ca_type"] = entry.get("ca_type")
            ports.append(item)
    return {"cas": cas, "ports": ports, "errors": errors}
