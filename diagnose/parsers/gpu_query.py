"""One ``nvidia-smi --query-gpu`` call shared by gpu.memory, gpu.clocks, gpu.pcie, gpu.fabricmanager and
gpu.xid (checks naming the same Command key share one run on the host).

One CSV query costs the host about 0.04 s of CPU on the lent 2x H200, where ``nvidia-smi -q`` costs three
times that, so the common path never runs ``-q``. A driver rejects the whole call when one field is unknown
to it (``Field "fabric.state" is not a valid field to query.``), so the command falls back through shorter
field lists: without the memory fields, then without the watch list's fields, then without the SRAM
counters, then without the fabric fields (drivers before the 550 branch), and only on that last branch does
it read the "Fabric" section of ``nvidia-smi -q``. Throttle reasons are asked for by their old name
``clocks_throttle_reasons.*``, which every driver accepts; drivers from 535 on print the header as
``clocks_event_reasons.*``, so the parser keys columns by the header, under the new name.

Values stay strings here; ``number``/``flag`` read them. ``[N/A]``, ``N/A`` and ``[Not Supported]`` mean
"this GPU has no such counter" (retired pages on Hopper, fabric state on a PCIe card) and read as None,
never as zero or as a fault. ``vbios_version`` feeds versions.firmware (one VBIOS per GPU model across the
hosts). ``serial`` (the board's serial, ``[N/A]`` on some boards) and ``uuid`` name the physical GPU for
the watch list (diagnose.history.watch_readings), whichever host or slot it sits in; the corrected ECC
counts are the slow climb that precedes an uncorrectable error. They form a tier of their own, asked first:
a driver that rejected one of them would cost the watch list its identity, never the checks their fields.
``memory.used``/``memory.total`` (every driver knows them; they lead a tier of their own so that a capture
taken before they were asked still answers the next one) let gpu.processes see memory held by a process no
listing shows.
"""

from __future__ import annotations

import re
from typing import Any

from diagnose.core.check import Command, ParseError

_BASE = (
    "index",
    "pci.bus_id",
    "name",
    "utilization.gpu",
    "ecc.mode.current",
    "ecc.errors.uncorrected.volatile.total",
    "ecc.errors.uncorrected.aggregate.total",
    "retired_pages.pending",
    "retired_pages.single_bit_ecc.count",
    "retired_pages.double_bit.count",
    "remapped_rows.correctable",
    "remapped_rows.uncorrectable",
    "remapped_rows.pending",
    "remapped_rows.failure",
    "clocks_throttle_reasons.active",
    "clocks_throttle_reasons.gpu_idle",
    "clocks_throttle_reasons.applications_clocks_setting",
    "clocks_throttle_reasons.sw_power_cap",
    "clocks_throttle_reasons.hw_slowdown",
    "clocks_throttle_reasons.hw_thermal_slowdown",
    "clocks_throttle_reasons.hw_power_brake_slowdown",
    "clocks_throttle_reasons.sw_thermal_slowdown",
    "clocks_throttle_reasons.sync_boost",
    "pcie.link.gen.current",
    "pcie.link.gen.max",
    "pcie.link.width.current",
    "pcie.link.width.max",
    "temperature.gpu",
    "vbios_version",
)
_WATCH = ("serial", "uuid", "ecc.errors.corrected.volatile.total", "ecc.errors.corrected.aggregate.total")
_SRAM = ("ecc.errors.uncorrected.volatile.sram", "ecc.errors.uncorrected.aggregate.sram")
_FABRIC = ("fabric.state", "fabric.status")
_MEMORY = ("memory.used", "memory.total")

FIELD_TIERS: tuple[tuple[str, ...], ...] = (
    _BASE + _MEMORY + _WATCH + _SRAM + _FABRIC,
    _BASE + _WATCH + _SRAM + _FABRIC,
    _BASE + _SRAM + _FABRIC,
    _BASE + _FABRIC,
    _BASE,
)


def _query(fields: tuple[str, ...]) -> str:
    return f"nvidia-smi --query-gpu={','.join(fields)} --format=csv,nounits"


# Fallbacks chain with ||: a rejected field list costs one failed call on old drivers and nothing on new
# ones. The last tier reads the -q Fabric section, the only place older drivers report the fabric state.
GPU_QUERY_SCRIPT = (
    "".join(f"{_query(fields)} 2>/dev/null || " for fields in FIELD_TIERS[:-1])
    + f"{{ {_query(FIELD_TIERS[-1])} && nvidia-smi -q 2>/dev/null | grep -A2 -E '^ +Fabric *$'; }}"
)

GPU_QUERY = Command("gpu_query", GPU_QUERY_SCRIPT, tool="nvidia-smi", timeout=30)

NOT_APPLICABLE = frozenset({"[n/a]", "n/a", "[not supported]", "not supported", ""})
_UNIT = re.compile(r"\s*\[[^\]]*\]$")
_RENAMES = {"clocks.current.sm": "clocks.sm", "gpu_bus_id": "pci.bus_id", "gpu_name": "name"}
_FABRIC_LINE = re.compile(r"^\s+(?P<key>State|Status)\s*:\s*(?P<value>.*?)\s*$")


def canonical(header: str) -> str:
    """The column's field name: units dropped, the old throttle name mapped to the new one."""
    name = _UNIT.sub("", header.strip())
    name = name.replace("clocks_throttle_reasons.", "clocks_event_reasons.")
    return _RENAMES.get(name, name)


def parse_gpu_query(text: str) -> list[dict[str, str]]:
    """One dict per GPU, keyed by canonical field name, values as printed (units stripped).

    A fallback run's ``nvidia-smi -q`` Fabric section fills ``fabric.state``/``fabric.status`` per GPU in
    order. "No devices were found" is an empty list; anything else without a header is a ParseError.
    """
    lines = [line for line in text.splitlines() if line.strip()]
    header_at = next((i for i, line in enumerate(lines) if line.startswith("index")), None)
    if header_at is None:
        if "No devices were found" in text:
            return []
        raise ParseError(f"no CSV header in nvidia-smi --query-gpu output: {text.strip()[:200]!r}")
    columns = [canonical(c) for c in lines[header_at].split(",")]
    rows: list[dict[str, str]] = []
    fabric: list[dict[str, str]] = []
    for line in lines[header_at + 1 :]:
        match = _FABRIC_LINE.match(line)
        if match:
            if match.group("key") == "State":
                fabric.append({"fabric.state": match.group("value")})
            elif fabric:
                fabric[-1]["fabric.status"] = match.group("value")
            continue
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(columns) or not cells[0].isdigit():
            continue  # the "Fabric" title and grep's "--" separators of the fallback branch
        rows.append({c: _UNIT_VALUE.sub("", v) for c, v in zip(columns, cells, strict=True)})
    for row, extra in zip(rows, fabric, strict=False):
        for key, value in extra.items():
            row.setdefault(key, value)
    return rows


_UNIT_VALUE = re.compile(r"\s+(?:MHz|W|%|MiB|C)$")


def number(value: str | None) -> float | None:
    """A numeric cell, None where the GPU has no such counter."""
    if value is None or value.strip().lower() in NOT_APPLICABLE:
        return None
    text = value.strip()
    try:
        return float(int(text, 16)) if text.lower().startswith("0x") else float(text)
    except ValueError:
        return None


def integer(value: str | None) -> int | None:
    found = number(value)
    return None if found is None else int(found)


def flag(value: str | None) -> bool | None:
    """Yes/No and Active/Not Active cells; None where not applicable."""
    if value is None:
        return None
    text = value.strip().lower()
    if text in ("yes", "active", "enabled"):
        return True
    if text in ("no", "not active", "disabled"):
        return False
    return None


def gpu_label(row: dict[str, Any]) -> str:
    """How messages name a GPU: index and nvidia-smi bus id, the two things an operator acts on."""
    return f"GPU {row.get('index', '?')} ({row.get('pci.bus_id', 'bus id unknown')})"
