"""``--limit`` patterns taken apart as Ansible reads them: terms, subscripts, slices (pure text).

:meth:`diagnose.targets.model.Inventory.select` matches the terms against groups and hosts.
"""

from __future__ import annotations

import re

_SUBSCRIPT = re.compile(r"^(?P<expr>.+)\[(?:(?P<index>-?\d+)|(?P<start>\d+):(?P<end>\d*))\]$")


def split_subscript(term: str) -> tuple[str, tuple[int, int | None] | None]:
    """``gpu[1:3]`` → ("gpu", (1, 3)); ``gpu[2:]`` → (2, -1); ``gpu[-1]`` → (-1, None). Regexes have none.

    Host names never hold brackets once ranges are expanded, so a trailing ``[...]`` in the shapes Ansible
    accepts is always a subscript (any other bracket stays a glob character class).
    """
    match = None if term.startswith("~") else _SUBSCRIPT.match(term)
    if match is None:
        return term, None
    if match["index"] is not None:
        return match["expr"], (int(match["index"]), None)
    return match["expr"], (int(match["start"]), int(match["end"]) if match["end"] else -1)


def apply_subscript(hosts: list[str], subscript: tuple[int, int | None]) -> list[str]:
    """Ansible's slice: the end is included, ``-1`` as end means the last host; an index past the end
    selects nothing (the caller reports the term). An end of 0 selects the start host alone, as there."""
    start, end = subscript
    if end:
        return hosts[start : (len(hosts) - 1 if end == -1 else end) + 1]
    try:
        return [hosts[start]]
    except IndexError:
        return []


def split_terms(pattern: str) -> list[str]:
    """Split on ``,``; without commas on ``:`` outside brackets (Ansible's older separator)."""
    if "," in pattern:
        raw = pattern.split(",")
    else:
        raw, depth, term = [], 0, ""
        for char in pattern:
            depth += {"[": 1, "]": -1}.get(char, 0)
            if char == ":" and depth <= 0:
                raw.append(term)
                term = ""
            else:
                term += char
        raw.append(term)
    return [t.strip() for t in raw if t.strip() and t.strip() not in ("&", "!")]
