"""``diagnose checks``: every check id a report can hold, with its checklist section, what it needs and what
it judges — the catalog's checks first, then the ids the stages emit (:mod:`diagnose.catalog.stage_ids`)."""

from __future__ import annotations

from diagnose.catalog.loading import load_catalog
from diagnose.catalog.stage_ids import STAGE_IDS

Row = tuple[str, str, str, str]


def check_rows() -> list[Row]:
    """(id, checklist section, needs, what it judges) for the catalog, then for the stages' ids."""
    rows = [(e.id, e.checklist, e.needs, e.summary) for e in load_catalog()]
    return rows + [(s.id, s.checklist, s.needs, s.judges) for s in STAGE_IDS]


def table_lines(rows: list[Row]) -> list[str]:
    """The rows as aligned columns under a header line."""
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [f"{'id':<{widths[0]}}  {'list':<{widths[1]}}  {'needs':<{widths[2]}}  what it judges"]
    lines += [f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}" for r in rows]
    return lines
