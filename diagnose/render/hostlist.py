"""Host lists folded into ranges (``gpu[001-040,042]``), the notation cluster operators read in Slurm.

A checklist item that failed on 300 of 512 hosts must still fit in a table cell; a range expression says
which hosts exactly in a line, where a plain list would take a page.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_NUMBERED = re.compile(r"^(.*?)(\d+)$", re.DOTALL)


def natural_key(name: str) -> tuple[str, int, str]:
    """Sort key that puts node2 before node10."""
    match = _NUMBERED.match(name)
    if match is None:
        return (name, -1, "")
    return (match.group(1), int(match.group(2)), match.group(2))


def _ranges(numbers: list[str]) -> list[str]:
    values = sorted(set(numbers), key=int)
    out: list[str] = []
    start = prev = values[0]
    for value in values[1:]:
        if int(value) == int(prev) + 1:
            prev = value
            continue
        out.append(start if start == prev else f"{start}-{prev}")
        start = prev = value
    out.append(start if start == prev else f"{start}-{prev}")
    return out


def fold(names: Iterable[str]) -> list[str]:
    """Names grouped into range expressions, in natural order.

    Zero-padded numbers only join numbers of the same width (``n001``..``n512``), so every expression
    expands back to exactly the names it came from.
    """
    by_prefix: dict[str, list[str]] = {}
    plain: list[str] = []
    for name in names:
        match = _NUMBERED.match(name)
        if match is None:
            plain.append(name)
        else:
            by_prefix.setdefault(match.group(1), []).append(match.group(2))
    groups: dict[tuple[str, int], list[str]] = {}
    for prefix, numbers in by_prefix.items():
        padded = {len(d) for d in numbers if d.startswith("0") and len(d) > 1}
        for digits in numbers:
            groups.setdefault((prefix, len(digits) if len(digits) in padded else 0), []).append(digits)
    folded: list[tuple[tuple[str, int, str], str]] = [(natural_key(n), n) for n in set(plain)]
    for (prefix, _width), numbers in groups.items():
        parts = _ranges(numbers)
        text = (
            prefix + parts[0] if len(parts) == 1 and "-" not in parts[0] else f"{prefix}[{','.join(parts)}]"
        )
        folded.append(((prefix, int(min(numbers, key=int)), ""), text))
    return [text for _key, text in sorted(folded)]


def summarize(names: Iterable[str], limit: int = 400, part_limit: int = 120) -> str:
    """``fold`` joined for a table cell, stopped near ``limit`` characters with a count of what is left.

    A single name or range longer than ``part_limit`` is cut: a hostile 3000-character host name must not
    fill a page of every table it appears in.
    """
    parts = fold(names)
    shown: list[str] = []
    used = 0
    for part in parts:
        if shown and used + len(part) > limit:
            break
        shown.append(part if len(part) <= part_limit else f"{part[:part_limit]}…")
        used += len(part) + 2
    text = ", ".join(shown)
    if len(shown) < len(parts):
        text += f" … and {len(parts) - len(shown)} more entries"
    return text
