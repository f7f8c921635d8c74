"""``mlxlink -d <dev> -p 1 -m -c -e`` for every ConnectX device: link, module (transceiver) and BER.

mlxlink (in the ``mstflint`` package, and in NVIDIA's MFT) reads the port's registers through the RDMA device,
so it needs root. It prints sections, each a title, a dashed rule and ``Key : Value`` lines: ``Operational
Info`` (state, speed, FEC), ``Troubleshooting Info`` (the firmware's own recommendation), ``Tool
Information`` (HCA firmware), ``Module Info`` (the cable or transceiver: identifier, vendor, part number, its
firmware, temperature with its alarm range as ``54 [-5..75]``), ``Physical Counters and BER Info``
(effective BER after FEC, raw BER before it, link down counter) and, with ``-e``, the eye opening. A passive
copper cable has no sensor: temperature ``N/A`` or ``0 [0..0]``, read as no reading. ``15E-255`` is what
mlxlink prints for a BER with no error counted; it parses as the tiny number it is.

``MLXLINK_SCRIPT`` runs the devices in parallel (each call takes about a second) and frames each output with
``# port <dev> 1`` and ``# rc <exit status>``; a host without mlxlink prints ``# missing mlxlink``.
Errors come as ``-E- …`` lines (a device it cannot open, a missing permission).
"""

from __future__ import annotations

import re
from typing import Any

MLXLINK_SCRIPT = (
    'command -v mlxlink >/dev/null 2>&1 || { echo "# missing mlxlink"; exit 0; }; '
    "t=$(mktemp -d) || exit 1; "
    'for d in /sys/class/infiniband/mlx5_*; do [ -e "$d" ] || continue; n=${d##*/}; '
    '( timeout 20 mlxlink -d "$n" -p 1 -m -c -e >"$t/$n" 2>&1; echo "# rc $?" >>"$t/$n" ) & done; wait; '
    'for f in "$t"/*; do [ -e "$f" ] || continue; echo "# port ${f##*/} 1"; cat "$f"; done; '
    'rm -rf "$t"; exit 0'
)

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_RANGE = re.compile(r"^(?P<value>-?[\d.]+)\s*\[(?P<low>-?[\d.]+)\.\.(?P<high>-?[\d.]+)\]$")

_OPERATIONAL = {
    "State": "state",
    "Physical state": "physical_state",
    "Speed": "speed",
    "Width": "width",
    "FEC": "fec",
    "Recommendation": "recommendation",
    "Firmware Version": "firmware",
}
_MODULE = {
    "Identifier": "identifier",
    "Cable Type": "cable_type",
    "Vendor Name": "vendor",
    "Vendor Part Number": "part_number",
    "Vendor Serial Number": "serial",
    "FW Version": "firmware",
}
_BER = {
    "Effective Physical BER": "effective",
    "Raw Physical BER": "raw",
    "Symbol BER": "symbol",
}
_COUNTS = {
    "Effective Physical Errors": "effective_errors",
    "Symbol Errors": "symbol_errors",
    "Link Down Counter": "link_down",
    "Link Error Recovery Counter": "link_error_recovery",
}


def _text(value: str) -> str | None:
    return None if value in ("", "N/A") else value


def ber(value: str | None) -> float | None:
    """``2E-9`` -> 2e-09; ``N/A`` -> None."""
    try:
        return float(value) if value and value != "N/A" else None
    except ValueError:
        return None


def _integer(value: str) -> int | None:
    return int(value) if value.isdigit() else None


def temperature(value: str) -> dict[str, float] | None:
    """``54 [-5..75]`` -> {value, low, high}; a cable without a sensor (``N/A``, ``0 [0..0]``) -> None."""
    match = _RANGE.match(value)
    if not match:
        return None
    reading = {k: float(v) for k, v in match.groupdict().items()}
    return None if reading["low"] == reading["high"] == 0 else reading


def _new_port(device: str | None, port: int | None) -> dict[str, Any]:
    return {
        "device": device,
        "port": port,
        "rc": None,
        "errors": [],
        **dict.fromkeys(_OPERATIONAL.values()),
        "module": None,
        "ber": {},
        "counts": {},
        "eye_grade": None,
    }


def _store(port: dict[str, Any], section: str, key: str, value: str) -> None:
    if key in _OPERATIONAL and port[_OPERATIONAL[key]] is None:
        port[_OPERATIONAL[key]] = _text(value)
    elif section == "Module Info":
        if port["module"] is None:
            port["module"] = dict.fromkeys([*_MODULE.values(), "temperature"])
        module = port["module"]
        if key in _MODULE:
            module[_MODULE[key]] = _text(value)
        elif key == "Temperature [C]":
            module["temperature"] = temperature(value)
    elif key in _BER:
        port["ber"][_BER[key]] = ber(value)
        port["ber"][f"{_BER[key]}_text"] = _text(value)
    elif key in _COUNTS:
        port["counts"][_COUNTS[key]] = _integer(value)
    elif key == "Time Since Last Clear [Min]":
        port["counts"]["since_clear_min"] = ber(value)
    elif key == "Physical Grade" and port["eye_grade"] is None:
        port["eye_grade"] = _text(value)


def parse_mlxlink(text: str) -> dict[str, Any]:
    """Facts: ``missing`` (mlxlink not installed) and ``ports`` [{device, port, rc, errors, state,
    physical_state, speed, width, fec, recommendation, firmware, module {identifier, cable_type, vendor,
    part_number, serial, firmware, temperature {value, low, high} | None} | None, ber {effective, raw,
    symbol, and each as printed: effective_text …}, counts {effective_errors, link_down, …}, eye_grade}].
    Output without a ``# port`` frame (a pasted capture) is one port of unknown device."""
    facts: dict[str, Any] = {"missing": False, "ports": []}
    port: dict[str, Any] | None = None
    section = ""
    if "\x1b" in text:  # colours are rare: one pass over the whole text, not one per line
        text = _ANSI.sub("", text)
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("# "):
            word, _, rest = line[2:].partition(" ")
            if word == "missing":
                facts["missing"] = True
            elif word == "port":
                device, _, number = rest.partition(" ")
                port = _new_port(device, int(number) if number.isdigit() else None)
                facts["ports"].append(port)
                section = ""
            elif word == "rc" and port is not None:
                port["rc"] = _integer(rest.strip())
            continue
        if not line.strip("-"):  # empty, or a section's dashed rule
            continue
        if port is None:
            port = _new_port(None, None)
            facts["ports"].append(port)
        if line.startswith("-E-") or line.startswith("-W-"):
            port["errors"].append(line)
            continue
        key, colon, value = line.partition(":")
        if not colon or not ("A" <= line[0] <= "Z" or "a" <= line[0] <= "z"):
            section = line
            continue
        # ``Key : Value``: one space after the colon belongs to the layout (partition, not a regex:
        # a ConnectX host prints some 800 of these lines and the regex was half the parser's time)
        _store(port, section, key.rstrip(), value[1:] if value[:1].isspace() else value)
    return facts
