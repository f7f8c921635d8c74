"""What kind of RDMA fabric a device port belongs to, shared by the ``ibstat`` and ``ibv_devinfo`` parsers.

The raw "link layer" field cannot be taken at its word: AWS EFA devices report ``Unknown`` or
``Unspecified`` through sysfs and ``ibstat``, yet older ``ibv_devinfo`` builds print ``InfiniBand`` for them
(rdma-core pull request 884). A profile must be able to tell "this host has EFA, not InfiniBand" from
"this host has no RDMA at all", so every port is given one of three fabric kinds here, from the evidence
that does not lie: the device name, the PCI vendor and the transport.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from typing import Any

from diagnose.core.vars import Vars

INFINIBAND = "InfiniBand"
ETHERNET = "Ethernet"  # RoCE: RDMA over a converged Ethernet port
EFA = "efa"
UNKNOWN = "unknown"

# The adapter behind a CA type. mlx5 reports "MT" and the PCI device id in decimal (15b3:1023 is MT4131), in
# ibstat's CA type and, as a bare number, in ibv_devinfo's vendor_part_id.
HCA_MODELS = {
    "MT4123": "ConnectX-6",
    "MT4124": "ConnectX-6 VF",
    "MT4125": "ConnectX-6 Dx",
    "MT4129": "ConnectX-7",
    "MT4131": "ConnectX-8",
    "MT41692": "BlueField-3",
}
MELLANOX_VENDOR_ID = "0x02c9"

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


def hca_model(ca_type: str | None) -> str:
    """``ConnectX-8 (MT4131)``: the adapter a reader knows, with the CA type the tools print."""
    if not ca_type:
        return "unknown CA type"
    model = HCA_MODELS.get(ca_type.upper())
    return f"{model} ({ca_type})" if model else ca_type


def _named(port: dict[str, Any], patterns: Iterable[str]) -> bool:
    """``mlx5_0``, ``mlx5_0:1`` or a glob such as ``mlx5_[0-7]`` names this port."""
    full = f"{port['device']}:{port['port']}"
    return any(fnmatch.fnmatchcase(full, p) or fnmatch.fnmatchcase(port["device"], p) for p in patterns)


def rail_ports(
    ports: list[dict[str, Any]],
    kind: str | None,
    hca_types: Iterable[str] | None = None,
    names: Iterable[str] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the compute rails, the fabric's other ports): the ports of the expected fabric, kept to the compute
    HCAs' CA types and names where the profile gives them.

    An HGX B300 carries, besides its eight ConnectX-8 rails, four ConnectX-7 InfiniBand ports of the NVLink
    switch management, Active at 100 Gb/s: of the same link layer, they would stand in for missing rails and
    fail the rail rate. Their CA type tells them apart; names do where a site wires its own management HCAs.
    """
    types, patterns = rail_rule(hca_types, names)
    rails, others = [], []
    for port in fabric_ports(ports, kind):
        (rails if is_rail(port, types, patterns) else others).append(port)
    return rails, others


def rail_rule(hca_types: Iterable[str] | None, names: Iterable[str] | None) -> tuple[set[str], list[str]]:
    """The profile's compute-rail CA types (upper case) and HCA name patterns, as :func:`is_rail` takes them."""
    return {t.strip().upper() for t in hca_types or () if t.strip()}, list(names or ())


def is_rail(port: dict[str, Any], types: set[str], patterns: list[str]) -> bool:
    """Whether a port is a compute rail: of one of ``types`` and named by ``patterns``, where given. A port
    whose tool gave no CA type (sysfs without ``hca_type``) is judged by its name alone."""
    ca_type = str(port.get("ca_type") or "").upper()
    return (not types or not ca_type or ca_type in types) and (not patterns or _named(port, patterns))


#: What to do when a host has ports of the fabric but none of them is a compute rail.
NO_RAIL_REMEDIATION = (
    "Check that the compute HCAs are seated and their driver loaded (lspci -d 15b3:), or correct "
    "expected_compute_hca_types / expected_compute_hcas if the profile names them wrongly."
)


def profile_rails(
    ports: list[dict[str, Any]], kind: str | None, host_vars: Vars
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """:func:`rail_ports` kept to the profile's ``expected_compute_hca_types`` and ``expected_compute_hcas``."""
    return rail_ports(
        ports, kind, host_vars.list("expected_compute_hca_types"), host_vars.list("expected_compute_hcas")
    )


def set_aside(ports: list[dict[str, Any]]) -> str:
    """``; not compute rails: ConnectX-7 (MT4129) mlx5_2/1, mlx5_3/1``, or nothing."""
    if not ports:
        return ""
    groups: dict[str, list[str]] = {}
    for port in sorted(ports, key=lambda p: (natural_key(p["device"]), p["port"])):
        groups.setdefault(hca_model(port.get("ca_type")), []).append(port_name(port))
    listed = "; ".join(f"{model} {', '.join(names)}" for model, names in groups.items())
    return f"; not compute rails: {listed}"
