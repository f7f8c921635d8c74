"""``diagnose checks``: every check id a report can hold, with its checklist section, the action a FAIL of it
carries (docs/actions.md), what it needs and what it judges — the catalog's checks first, then the ids the
stages emit (:mod:`diagnose.catalog.stage_ids`).

What a check judges runs to a few hundred characters, so each check is a block that fits the terminal: a
line of id, section, action and needs (wrapped under the needs column), then what it judges, indented. A
pipe has no width of its own; it gets ``COLUMNS`` or 80, so ``| less`` reads as the terminal does and a
``grep`` for an id still finds the check's first line.
"""

from __future__ import annotations

import shutil
import textwrap

from diagnose.catalog.loading import load_catalog
from diagnose.catalog.stage_ids import STAGE_IDS

Row = tuple[str, str, str, str, str]

#: What it judges is indented this much under its check's first line.
JUDGES_INDENT = "    "
#: The needs column beside the others keeps at least this many characters, else it goes beneath.
MIN_NEEDS = 16


def check_rows() -> list[Row]:
    """(id, checklist section, action on FAIL, needs, what it judges) for the catalog, then the stages' ids."""
    rows = [(e.id, e.checklist, e.action, e.needs, e.summary) for e in load_catalog()]
    return rows + [(s.id, s.checklist, s.action, s.needs, s.judges) for s in STAGE_IDS]


def table_lines(rows: list[Row], width: int | None = None) -> list[str]:
    """The rows as blocks no wider than ``width`` (the terminal's when None): the first three columns
    aligned, needs wrapped in its own column (beneath, when the terminal leaves it no room), what it judges
    wrapped beneath."""
    width = width or shutil.get_terminal_size().columns
    header = ("id", "list", "action", "needs", "what it judges")
    widths = [max(len(header[i]), *(len(r[i]) for r in rows)) for i in range(3)]
    lead = sum(widths) + 2 * len(widths)
    beside = width - lead >= MIN_NEEDS  # too narrow: needs goes beneath, as what it judges does
    lines = []
    for row in [header, *rows]:
        first = "  ".join(f"{cell:<{w}}" for cell, w in zip(row[:3], widths, strict=True))
        if beside:
            needs = textwrap.wrap(row[3], width - lead, break_on_hyphens=False) or [""]
            lines.append(f"{first}  {needs[0]}".rstrip())
            lines += [" " * lead + part for part in needs[1:]]
        else:
            lines.append(first.rstrip())
            lines += _indented(f"{header[3]}: {row[3]}" if row is not header else header[3], width)
        lines += _indented(row[4], width)
    return lines


def _indented(text: str, width: int) -> list[str]:
    return textwrap.wrap(
        text, width, initial_indent=JUDGES_INDENT, subsequent_indent=JUDGES_INDENT, break_on_hyphens=False
    )
