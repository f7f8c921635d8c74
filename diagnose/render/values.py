"""A result's ``observed`` and ``expected`` as a reader writes them, for the report's findings.

results.json keeps them as JSON for scripts: ``{"max_tail_pct": 10.0}``, or per rank
``{"0": {"backward_ms": 13.7098, "comm_bytes": 1879539712.0, ...}, "1": {...}}``. Printed as is, that is
a blob a reader has to decode. Here a flat mapping becomes a line (``max tail 10 %``), a mapping of
mappings or a list of objects (per rank, per GPU, per GPU pair, per process) becomes a small table with
the unit in each column's header, and the unit comes from the key's suffix (``_ms``, ``_pct``, ``_gbps``,
``_bytes``...), the naming every check and probe of diagnose follows. Pure: a value in, text or a table out.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from diagnose.core.units import MISSING, decimal_bytes, human_bytes, is_number

#: Rows and columns a table shows at most; what is left out is counted under it.
MAX_ROWS = 16
MAX_COLUMNS = 9
#: Characters of one value shown inline (a cell, or the whole line of a value that is no table).
INLINE_CHARS = 400
#: Mappings of scalars with more entries than this are a table (one row per GPU), not a line.
INLINE_ENTRIES = 4

#: A key's suffix and the unit its numbers are in (the first that matches is taken: ``rate_gbps`` is a
#: link's signalling rate in Gb/s; every other ``_gbps`` of diagnose is a transfer rate in GB/s).
UNITS: tuple[tuple[str, str], ...] = (
    ("rate_gbps", "Gb/s"),
    ("_gbps", "GB/s"),
    ("_pct", "%"),
    ("_ms", "ms"),
    ("_us", "µs"),
    ("_ns", "ns"),
    ("_s", "s"),
    ("_tflops", "TFLOP/s"),
    ("_gib", "GiB"),
    ("_mib", "MiB"),
    ("_mhz", "MHz"),
    ("_w", "W"),
    ("_c", "°C"),
    ("_bytes", "bytes"),
)
#: A field name of diagnose: lower-case words joined by underscores, each word starting with a letter.
_FIELD = re.compile(r"[a-z][a-z0-9]*(?:_[a-z][a-z0-9]*)*")
#: Keys that are a unit's name by themselves.
UNIT_KEYS = {
    "gbps": ("bandwidth", "GB/s"),
    "bytes": ("size", "bytes"),
    "seconds": ("time", "s"),
    "tflops": ("throughput", "TFLOP/s"),
}
#: The number a check id family states bare (``observed: 240.9``): a collective's busbw.
BARE_UNITS: tuple[tuple[str, str], ...] = (("bench.", "GB/s"),)
#: What the keys of a per-something table are, by check id family.
ROW_KEYS: tuple[tuple[str, str], ...] = (("train.", "rank"), ("gpu.", "GPU"), ("infer.", "GPUs"))


@dataclass
class Table:
    """A mapping of mappings (or a list of objects) laid out: one row per key, one column per field."""

    key_header: str
    columns: list[str]
    rows: list[tuple[str, list[str]]]
    more_rows: int = 0
    more_columns: int = 0


@dataclass
class Shown:
    """A value as the report shows it: a line of text, and a table where the value is one."""

    text: str
    tables: list[tuple[str, Table]] = field(default_factory=list)  # (the key it is under, or "", table)


def split_unit(key: str) -> tuple[str, str]:
    """``("backward", "ms")`` for ``backward_ms``; a key without a known suffix has no unit."""
    lowered = key.lower()
    if lowered in UNIT_KEYS:
        return UNIT_KEYS[lowered]
    for suffix, unit in UNITS:
        if lowered.endswith(suffix) and len(key) > len(suffix):
            bare = key[: -len(suffix)] if suffix.startswith("_") else key[: -len("_gbps")]
            return _words(bare), unit
    return _words(key), ""


def _words(key: str) -> str:
    """A field name as words (``step_cpu`` → ``step cpu``); a name that is data keeps its underscores
    (``NCCL_P2P_DISABLE``, ``mlx5_2``)."""
    return key.replace("_", " ") if _FIELD.fullmatch(key) else key


def scalar(value: Any, unit: str = "") -> str:
    """One value as text: numbers rounded for reading with their unit, yes/no, lists joined."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if is_number(value):
        if unit == "bytes":
            return _size(value)
        text = f"{value:.0f}" if abs(value) >= 10_000 else f"{value:.4g}"
        return f"{text} {unit}" if unit else text
    if isinstance(value, list):
        return ", ".join(scalar(v, unit) for v in value) if value else "none"
    if isinstance(value, dict):
        return _line(value, unit) if value else "none"
    return str(value)


def _size(value: float) -> str:
    """A byte count: exact binary units for whole MiB (sweep sizes), rounded decimal ones otherwise."""
    whole = int(value)
    if whole == value and whole and whole % (1 << 20) == 0:
        return human_bytes(whole)
    return decimal_bytes(whole) if whole >= 1_000_000 else f"{whole} B"


def _cut(text: str) -> str:
    return (
        text
        if len(text) <= INLINE_CHARS
        else f"{text[:INLINE_CHARS]}… [+{len(text) - INLINE_CHARS} characters]"
    )


def _line(mapping: dict[str, Any], inherited: str = "") -> str:
    """``max tail 10 % · min overlap ratio 0.7``: a mapping in one line; a key without a unit of its own
    takes its parent's (``free_gib: {"/": 63.8}`` reads ``free / 63.8 GiB``)."""
    parts = []
    for key, value in mapping.items():
        label, unit = split_unit(str(key))
        unit = unit or inherited
        if not _FIELD.fullmatch(str(key)):  # a device, a variable, an index: ``mlx5_2/1: Down``
            label += ":"
        if isinstance(value, dict) and _is_rows(value):  # deeper than a line can say: JSON, as recorded
            parts.append(f"{label} {json.dumps(value, ensure_ascii=False, default=str)}")
        elif isinstance(value, dict):
            parts.append(f"{label} ({_line(value, unit)})" if value else f"{label} none")
        else:
            parts.append(f"{label} {scalar(value, unit)}")
    return " · ".join(parts)


def _family(check_id: str, table: tuple[tuple[str, str], ...]) -> str:
    return next((word for prefix, word in table if check_id.startswith(prefix)), "")


def _table(entries: list[tuple[str, Any]], key_header: str) -> Table:
    """Rows of mappings (or of scalars: one ``value`` column) under the fields they hold; the rows' header
    (rank, GPU) only where their keys are indices or GPUs (``gemm.bf16`` rows are figures, not GPUs)."""
    if not all(k.isdigit() or k.startswith("GPU") for k, _v in entries):
        key_header = ""
    fields: list[str] = []
    for _key, value in entries:
        for name in value if isinstance(value, dict) else ["value"]:
            if str(name) not in fields:
                fields.append(str(name))
    if len(fields) > INLINE_ENTRIES and len(entries) < len(fields) and len(entries) <= MAX_COLUMNS:
        return _transposed(entries, fields, key_header)
    shown = fields[:MAX_COLUMNS]
    units = {name: split_unit(name) for name in shown}
    columns = [_header(label, unit) for label, unit in units.values()]
    rows = []
    for key, value in entries[:MAX_ROWS]:
        cells = value if isinstance(value, dict) else {"value": value}
        # the unit is in the column's header; only sizes are written out in each cell (1 GiB, 1.88 GB)
        rows.append((key, [_cut(scalar(cells.get(name), _in_cell(units[name][1]))) for name in shown]))
    return Table(key_header, columns, rows, max(0, len(entries) - MAX_ROWS), len(fields) - len(shown))


def _transposed(entries: list[tuple[str, Any]], fields: list[str], key_header: str) -> Table:
    """Few rows of many fields (two ranks, eight GPUs of nine ECC counters) turned on their side: one
    row per field, one column per rank or GPU, so that a page's width holds them."""
    named = [
        f"{key_header} {key}" if key.isdigit() and key_header not in ("", "#") else key for key, _v in entries
    ]
    rows = []
    for name in fields[:MAX_ROWS]:
        label, unit = split_unit(name)
        cells = [v.get(name) if isinstance(v, dict) else v for _key, v in entries]
        rows.append((_header(label, unit), [_cut(scalar(c, _in_cell(unit))) for c in cells]))
    return Table("", named, rows, max(0, len(fields) - MAX_ROWS))


def _header(label: str, unit: str) -> str:
    return f"{label} ({unit})" if unit and unit != "bytes" else label


def _in_cell(unit: str) -> str:
    return unit if unit == "bytes" else ""


def _is_rows(value: Any) -> bool:
    """A mapping whose every value is a mapping, or a list whose every item is one: a table's rows."""
    if isinstance(value, dict):
        items = list(value.values())
    elif isinstance(value, list):
        items = value
    else:
        return False
    return bool(items) and all(isinstance(v, dict) for v in items)


def shown(value: Any, check_id: str = "") -> Shown:
    """``observed`` or ``expected`` of a result with the id ``check_id``, as the report shows it."""
    if is_number(value):
        return Shown(scalar(value, _family(check_id, BARE_UNITS)))
    if not isinstance(value, dict | list) or not value:
        return Shown(_cut(scalar(value)))
    key_header = _family(check_id, ROW_KEYS)
    if isinstance(value, list):
        if _is_rows(value):
            return Shown("", [("", _table(_entries(value), "#"))])
        return Shown(_cut(scalar(value)))
    if _is_rows(value) or (
        len(value) > INLINE_ENTRIES and not any(isinstance(v, dict | list) for v in value.values())
    ):
        return Shown("", [("", _table(_entries(value), key_header))])
    flat = {k: v for k, v in value.items() if not _is_rows(v)}
    tables = [
        (split_unit(str(k))[0], _table(_entries(v), key_header)) for k, v in value.items() if _is_rows(v)
    ]
    return Shown(_cut(_line(flat)) if flat else "", tables)


def _entries(rows: dict[str, Any] | list[Any]) -> list[tuple[str, Any]]:
    if isinstance(rows, dict):
        return [(str(k), v) for k, v in rows.items()]
    return [(str(i), v) for i, v in enumerate(rows, 1)]
