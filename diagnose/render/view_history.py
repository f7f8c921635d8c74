"""The nightly trend chapter: the runs of the series and busbw per message-size band across them.

The trend block is written by :func:`diagnose.history.trend_for_report` into results.json; the report reads
only that block, so a report rendered elsewhere needs no history database, and a block of an older or
newer shape is still shown, as key/value rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from diagnose.core.units import MISSING, counted, is_number
from diagnose.render.text import format_time, show


@dataclass
class TrendRun:
    run_id: str
    started: str
    verdict: str
    counts: str
    role: str


@dataclass
class History:
    """The nightly trend (diagnose.history.trend_for_report), or its raw keys when its shape is unknown."""

    series: str
    runs: list[TrendRun]
    # collective -> band label -> busbw per run (None where the run had no such value), aligned with runs
    busbw: dict[str, dict[str, list[float | None]]]
    other: list[tuple[str, str]]
    plots: dict[str, str] = field(default_factory=dict)  # filled in by the HTML renderer


def _floats(values: Any) -> list[float | None] | None:
    if not isinstance(values, list):
        return None
    return [float(v) if is_number(v) else None for v in values]


def build_history(history: Any) -> History | None:
    """The trend block a nightly run adds; tolerant of older or newer shapes (shown as key/value rows)."""
    trend = history.get("trend") if isinstance(history, dict) else None
    if not isinstance(trend, dict):
        return None
    known = {"series", "runs", "busbw", "references", "bands"}
    series = trend.get("series") if isinstance(trend.get("series"), dict) else {}
    refs = trend.get("references") if isinstance(trend.get("references"), dict) else {}
    labels = {
        str(b.get("key")): str(b.get("label") or b.get("key"))
        for b in trend.get("bands") or []
        if isinstance(b, dict)
    }
    runs = []
    for run in trend.get("runs") or []:
        if not isinstance(run, dict):
            continue
        counts = run.get("counts") if isinstance(run.get("counts"), dict) else {}
        tally = [f"{n} {s}" for s, n in counts.items() if n]
        if is_number(run.get("regressions")) and run["regressions"]:  # apart from the FAILs, as in the mail
            tally.append(counted(int(run["regressions"]), "regression"))
        roles = [
            name
            for key, name in (("last_good", "last good"), ("baseline", "baseline"))
            if refs.get(key) == run.get("id")
        ]
        runs.append(
            TrendRun(
                str(run.get("id") or MISSING),
                format_time(run.get("started")),
                str(run.get("verdict") or MISSING),
                ", ".join(tally),
                ", ".join(roles),
            )
        )
    busbw: dict[str, dict[str, list[float | None]]] = {}
    raw_busbw = trend.get("busbw") if isinstance(trend.get("busbw"), dict) else {}
    for collective, bands in raw_busbw.items():
        if isinstance(bands, dict):
            lines = {labels.get(str(k), str(k)): _floats(v) for k, v in bands.items()}
            busbw[str(collective)] = {k: v for k, v in lines.items() if v is not None and len(v) == len(runs)}
    return History(
        series=" · ".join(str(v) for v in series.values()) or MISSING,
        runs=runs,
        busbw={c: b for c, b in busbw.items() if b},
        other=[(str(k), show(v)) for k, v in trend.items() if k not in known],
    )
