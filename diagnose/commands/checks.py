"""``diagnose checks``: every check id a report can hold, with its checklist section, the action a FAIL of it
carries (docs/actions.md), what it needs and what it judges — the catalog's checks first, then the ids the
stages emit (:mod:`diagnose.catalog.stage_ids`)."""

from __future__ import annotations

from diagnose.catalog.loading import load_catalog
from diagnose.catalog.stage_ids import STAGE_IDS

Row = tuple[str, str, str, str, str]


def check_rows() -> list[Row]:
    """(id, checklist section, action on FAIL, needs, what it judges) for the catalog, then the stages' ids."""
    rows = [(e.id, e.checklist, e.action, e.needs, e.summary) for e in load_catalog()]
    return rows + [(s.id, s.checklist, s.action, s.needs, s.judges) for s in STAGE_IDS]


def table_lines(rows: list[Row]) -> list[str]:
    """The rows as aligned columns under a header line."""
    header = ("id", "list", "action", "needs")
    widths = [max(len(header[i]), *(len(r[i]) for r in rows)) for i in range(4)]
    return [
        "  ".join(f"{cell:<{width}}" for cell, width in zip(row[:4], widths, strict=True)) + f"  {row[4]}"
        for row in [(*header, "what it judges"), *rows]
    ]
