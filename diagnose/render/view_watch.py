"""The watch list chapter: each component getting worse night after night, what moved and a small plot.

Built from the ``history.watch`` rows (their ``observed`` carries each watched metric's series) and the
``history.watch`` summary of results.json (how many components were read, which moved, which were
replaced); the plots are drawn by the HTML renderer from :attr:`WatchView.items`, so this module stays free
of matplotlib. Nothing is re-judged: a report rendered elsewhere shows what the run recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from diagnose.catalog.stage_ids import HISTORY_WATCH
from diagnose.core.units import is_number
from diagnose.render.actions import action_text


@dataclass
class WatchMetric:
    metric: str
    words: str
    change: str  # "2 → 110 over 9 nights"
    projection: str
    reason: str
    nights: list[float]
    values: list[float]
    limit: float | None


@dataclass
class WatchItem:
    component: str
    host: str
    slot: str
    model: str
    action: str
    metrics: list[WatchMetric]
    svg: str = ""  # filled in by the HTML renderer


@dataclass
class WatchSteady:
    component: str
    host: str
    metric: str
    rate: str  # "+40 a night"
    nights: int
    peers: str  # "3 of 96 count steadily too"


@dataclass
class WatchView:
    read: int | None
    items: list[WatchItem]
    moved: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    steady: list[WatchSteady] = field(default_factory=list)
    shared: list[str] = field(default_factory=list)


def _projection(entry: dict[str, Any]) -> str:
    to_limit, limit = entry.get("nights_to_limit"), entry.get("limit")
    if not is_number(to_limit) or not is_number(limit):
        return "no limit known" if not is_number(limit) else "not approaching its limit"
    if to_limit <= 0:
        return f"at or past its limit {limit:.4g}"
    return f"about {max(1, round(to_limit))} nights to its limit {limit:.4g}"


def _metric(entry: dict[str, Any]) -> WatchMetric | None:
    series = entry.get("series") if isinstance(entry.get("series"), dict) else {}
    nights = [float(n) for n in series.get("nights") or [] if is_number(n)]
    values = [float(v) for v in series.get("values") or [] if is_number(v)]
    if not is_number(entry.get("first")) or not is_number(entry.get("last")):
        return None
    return WatchMetric(
        metric=str(entry.get("metric") or "?"),
        words=str(entry.get("words") or entry.get("metric") or "?"),
        change=f"{entry['first']:.4g} → {entry['last']:.4g} over {entry.get('nights', '?')} nights",
        projection=_projection(entry),
        reason=str(entry.get("reason") or ""),
        nights=nights[: len(values)],
        values=values[: len(nights)],
        limit=float(entry["limit"]) if is_number(entry.get("limit")) else None,
    )


def build_watch(results: dict[str, Any]) -> WatchView | None:
    """The chapter's data, or None when the run watched nothing and recorded no move or replacement."""
    history = results.get("history") if isinstance(results.get("history"), dict) else {}
    summary = history.get("watch") if isinstance(history.get("watch"), dict) else {}
    items = []
    for row in results.get("checks") or []:
        observed = row.get("observed") if isinstance(row, dict) else None
        if row.get("id") != HISTORY_WATCH or not isinstance(observed, dict):
            continue
        metrics = [m for m in (_metric(e) for e in observed.get("metrics") or [] if isinstance(e, dict)) if m]
        items.append(
            WatchItem(
                component=str(observed.get("component") or "?"),
                host=str(row.get("host") or ""),
                slot=str(observed.get("slot") or ""),
                model=str(observed.get("model") or ""),
                action=action_text(str(observed.get("action") or row.get("action") or "")) or "",
                metrics=metrics,
            )
        )
    moved = [
        f"{m.get('component')} moved from {m.get('from')} to {m.get('to')}: its series goes on"
        for m in summary.get("moved") or []
        if isinstance(m, dict)
    ]
    replaced = [
        f"{r.get('component')} replaced {r.get('replaced')} in {r.get('slot')}: a new series starts"
        for r in summary.get("replaced") or []
        if isinstance(r, dict)
    ]
    steady = [_steady(e) for e in summary.get("steady") or [] if isinstance(e, dict)]
    shared = [
        f"{s.get('identity')} was reported by {' and '.join(map(str, s.get('slots') or []))} the same night: "
        "not one part, so each is read by its host and slot"
        for s in summary.get("shared") or []
        if isinstance(s, dict)
    ]
    if not items and not moved and not replaced and not steady and not shared:
        return None
    read = summary.get("components") if isinstance(summary.get("components"), int) else None
    return WatchView(read, items, moved, replaced, steady, shared)


def _steady(entry: dict[str, Any]) -> WatchSteady:
    rate, fleet, counting = entry.get("rate_per_night"), entry.get("fleet"), entry.get("fleet_steady")
    others = (counting - 1) if isinstance(counting, int) else None
    return WatchSteady(
        component=str(entry.get("component") or "?"),
        host=str(entry.get("host") or ""),
        metric=str(entry.get("metric") or "?"),
        rate=f"{rate:+.3g} a night" if is_number(rate) else "?",
        nights=entry.get("nights") if isinstance(entry.get("nights"), int) else 0,
        peers=f"{others} of its {fleet - 1} peers" if others is not None and isinstance(fleet, int) else "?",
    )
