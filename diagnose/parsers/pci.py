"""``lspci -D -vvv``: every PCI function, the bus range behind each bridge, and each bridge's ACS control.

Access Control Services (ACS) on a PCIe switch's downstream port can redirect peer-to-peer requests and
completions up to the root complex (``ReqRedir+``, ``CmpltRedir+``) or block them (``EgressCtrl+``): the
traffic a NIC would send straight to a GPU behind the same switch then crosses the CPU, and GPUDirect RDMA
and PCIe P2P lose most of their bandwidth or hang. lspci prints the register as
``ACSCtl: SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-``.

The tree comes from the same output: a bridge's ``Bus: primary=16, secondary=17, subordinate=1c`` line says
which buses lie behind it, so the bridges above a device are those whose secondary..subordinate range holds
the device's bus (in its PCI domain). Capabilities beyond the first 64 bytes of config space need root;
without it lspci prints ``Capabilities: <access denied>`` and the ACS state is unknown, which the facts say.
"""

from __future__ import annotations

import re
from typing import Any

from diagnose.core.check import ParseError

_HEADER = re.compile(
    r"^(?:(?P<domain>[0-9a-fA-F]{4,8}):)?(?P<bus>[0-9a-fA-F]{2}):(?P<slot>[0-9a-fA-F]{2})\.(?P<fn>[0-7])"
    r"\s+(?P<cls>[^:]+?)(?: \[[0-9a-fA-F]{4}\])?:\s*(?P<name>.*)$"
)
_BUS = re.compile(
    r"Bus: primary=(?P<p>[0-9a-fA-F]+), secondary=(?P<s>[0-9a-fA-F]+), subordinate=(?P<u>[0-9a-fA-F]+)"
)
_ACSCTL = re.compile(r"ACSCtl:\s*(?P<flags>.*)$")
_FLAG = re.compile(r"(?P<name>[A-Za-z]+)(?P<state>[+-])")

#: ACSCtl bits that send peer traffic anywhere but straight to the peer: request and completion redirect
#: (up to the root complex) and egress control (blocked unless the egress vector allows it).
REDIRECT_FLAGS = ("ReqRedir", "CmpltRedir", "EgressCtrl")


def _device(match: re.Match[str]) -> dict[str, Any]:
    domain = (match.group("domain") or "0000").lower().rjust(4, "0")
    bus, slot, fn = match.group("bus").lower(), match.group("slot").lower(), match.group("fn")
    return {
        "bdf": f"{domain}:{bus}:{slot}.{fn}",
        "class": match.group("cls").strip(),
        "name": match.group("name").strip(),
        "secondary": None,
        "subordinate": None,
        "acs": None,
        "capabilities_denied": False,
    }


def parse_lspci(text: str) -> list[dict[str, Any]]:
    """One dict per function: ``bdf`` (always with its domain), ``class``, ``name``, the bridge's
    ``secondary``/``subordinate`` bus numbers (None for an endpoint), ``acs`` ({flag: bool} from ACSCtl, None
    without the capability or without the right to read it) and ``capabilities_denied``."""
    devices: list[dict[str, Any]] = []
    # Some thousand lines a GPU node, nearly all of them indented detail: a header starts at column 0, and
    # a detail line is searched only once a plain substring test says its pattern can be there.
    for line in text.splitlines():
        if not line[:1].isspace():
            header = _HEADER.match(line)
            if header:
                devices.append(_device(header))
            continue
        if not devices:
            continue
        current = devices[-1]
        bus = _BUS.search(line) if "Bus: " in line else None
        if bus:
            current["secondary"], current["subordinate"] = int(bus.group("s"), 16), int(bus.group("u"), 16)
        elif "Capabilities: <access denied>" in line:
            current["capabilities_denied"] = True
        elif "ACSCtl:" in line:
            acs = _ACSCTL.search(line)
            if acs:
                flags = _FLAG.finditer(acs.group("flags"))
                current["acs"] = {f.group("name"): f.group("state") == "+" for f in flags}
    if not devices and text.strip():
        raise ParseError(f"no PCI device in lspci output: {text.strip()[:160]!r}")
    return devices


def domain_bus(bdf: str) -> tuple[str, int]:
    """The PCI domain and bus number of a ``dddd:bb:ss.f`` address."""
    domain, bus, _ = bdf.split(":")
    return domain, int(bus, 16)


def bridges_above(device: dict[str, Any], devices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The bridges between the root complex and ``device``, outermost first: those of its domain whose
    secondary..subordinate range holds its bus. A deeper bridge always has a higher secondary bus."""
    domain, bus = domain_bus(device["bdf"])
    above = [
        b
        for b in devices
        if b is not device
        and b["secondary"] is not None
        and domain_bus(b["bdf"])[0] == domain
        and b["secondary"] <= bus <= b["subordinate"]
    ]
    return sorted(above, key=lambda b: b["secondary"])


def redirecting(acs: dict[str, bool] | None) -> list[str]:
    """The redirect bits set in an ACSCtl register (empty when ACS is off or absent)."""
    return [flag for flag in REDIRECT_FLAGS if acs and acs.get(flag)]
