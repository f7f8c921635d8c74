"""What kind of RDMA fabric a device port belongs to, shared by the ``ibstat`` and ``ibv_devinfo`` parsers.

The raw "link layer" field cannot be taken at its word: AWS EFA devices report ``Unknown`` or
``Unspecified`` through sysfs and ``ibstat``, yet older ``ibv_devinfo`` builds print ``InfiniBand`` for them
(rdma-core pull request 884). A profile must be able to tell "this host has EFA, not InfiniBand" from
"this host has no RDMA at all", so every port is given one of three fabric kinds here, from the evidence
that does not lie: the device name, the PCI vendor and the transport.
"""

from __future__ import annotations

import re
from typing import Any

INFINIBAND = "InfiniBand"
ETHERNET = "Ethernet"  # RoCE: RDMA over a converged Ethernet port
EFA = "efa"
UNKNOWN = "unknown"

# Amazon's PCI vendor id, as ibv_devinfo prints it for every EFA device.
AWS_VENDOR_ID = "0x1d0f"
# rdma-core's persistent naming gives devices with no link layer of their own (EFA) the "rdma" prefix
# (rdmap79s0 on a p5), InfiniBand ports "ib" and RoCE ports "roce"; kernel names keep "efa_N".
_EFA_NAME_PREFIXES = ("efa", "rdmap")
_NO_LINK_LAYER = {"unknown", "unspecified", ""}


def fabric_kind(
    device: str, link_layer: str | None, vendor_id: str | None = None, transport: str | None = None
) -> str:
    """The fabric a port belongs to: InfiniBand, Ethernet (RoCE), efa, or unknown."""
    layer = (link_layer or "").strip().lower()
    if (vendor_id or "").lower() == AWS_VENDOR_ID or device.startswith(_EFA_NAME_PREFIXES):
        return EFA
    if (transport or "").lower().startswith("unspecified") and layer in _NO_LINK_LAYER | {"infiniband"}:
        return EFA
    if layer == "infiniband":
        return INFINIBAND
    if layer == "ethernet":
        return ETHERNET
    return UNKNOWN


def normalise_kind(expected: str | None) -> str | None:
    """A profile's ``expected_link_layer`` spelled the way the parsers spell fabric kinds."""
    if expected is None:
        return None
    text = expected.strip().lower()
    if text in ("infiniband", "ib"):
        return INFINIBAND
    if text in ("ethernet", "roce", "rocev2"):
        return ETHERNET
    if text in ("efa", "aws-efa"):
        return EFA
    return expected.strip()


def describe_kind(kind: str) -> str:
    """How a report names a fabric kind to a reader."""
    return {
        INFINIBAND: "InfiniBand",
        ETHERNET: "Ethernet (RoCE)",
        EFA: "EFA (AWS Elastic Fabric Adapter)",
    }.get(kind, "unknown link layer")


def is_active(port: dict[str, Any]) -> bool:
    """State Active and, where the tool reports it, Physical state LinkUp."""
    return port.get("state") == "Active" and port.get("physical_state", "LinkUp") == "LinkUp"


def fabric_ports(ports: list[dict[str, Any]], kind: str | None) -> list[dict[str, Any]]:
    """The ports of the fabric a profile expects (every port when it names none)."""
    return [p for p in ports if kind is None or p.get("fabric") == kind]


def port_name(port: dict[str, Any]) -> str:
    return f"{port['device']}/{port['port']}"


def natural_key(name: str) -> tuple[Any, ...]:
    """Sort key putting mlx5_2 before mlx5_10, as people count devices."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))
