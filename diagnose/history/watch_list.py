"""The watch list: ``history.watch`` (WARN) for each component getting worse night after night.

Regressions judge a night against the last good one and catch steps; a GPU whose corrected ECC climbs a
little every night, a port whose symbol errors accelerate or a transceiver warming toward its alarm stays
inside every limit until the night it stops a job. Here each run's readings (diagnose.history.watch_readings)
are put after the component's stored ones (diagnose.history.watch_store) and the whole fleet is judged by
diagnose.history.watch_trend (robust slope and acceleration, against the part's own past and against its
peers of the same model, nights until a known limit). One result per watched component, naming what moved,
from what to what over how many nights, the projection, and the action; a component that moved to another
host keeps its series and says so, a new part in a slot another held starts afresh and the run records the
replacement (``history.watch`` in results.json's ``history``).

The run's readings are stored only once the run is recorded (:func:`record_watch`), so a run that is not
recorded leaves the store as it was.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from diagnose.catalog.stage_ids import HISTORY_WATCH
from diagnose.core.model import CheckResult, strongest
from diagnose.core.units import counted
from diagnose.history.storage import open_db
from diagnose.history.trends import text_table
from diagnose.history.watch_readings import Reading, metric_of, readings
from diagnose.history.watch_store import Identity, identity, load_past, next_night, record_readings
from diagnose.history.watch_trend import WINDOW, Series, Steady, Watch, judge_groups

WATCH_ID = HISTORY_WATCH
#: Nights each watched metric's series carries in the result, for the report's plot.
PLOT_NIGHTS = 30

_REMEDIATION = {
    "drain_at_next_window": "Plan it out: drain the node at the next maintenance window and have the part "
    "replaced (a GPU whose ECC or remapped rows climb: the field diagnostic and an RMA if it confirms).",
    "reseat_or_replace_cable": "Reseat the cable or transceiver of the named port at the next window, replace "
    "it if the errors keep growing; look at the switch side of the link too.",
    "check_cooling": "Check the node's or rack's airflow, fans and inlet temperature before the part reaches "
    "its alarm or throttles.",
}


@dataclass
class WatchFindings:
    """What the watch list says about one run, and the readings to store once the run is recorded."""

    results: list[CheckResult] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    readings: list[Reading] = field(default_factory=list)


def _series(now: Sequence[Reading], past: Mapping[tuple[str, str], Any], night: int) -> list[Series]:
    out = []
    for reading in now:
        metric = metric_of(reading.metric)
        if metric is None:
            continue
        before = past.get((reading.component, reading.metric))
        nights = (*(float(n) for n in before.nights), float(night)) if before else (float(night),)
        values = (*before.values, reading.value) if before else (reading.value,)
        out.append(
            Series(
                reading.component,
                reading.metric,
                reading.model,
                nights,
                values,
                metric.shape,
                metric.worse,
                reading.limit,
            )
        )
    return out


def _entry(watch: Watch, series: Series) -> dict[str, Any]:
    metric = metric_of(watch.metric)
    keep = min(len(series.nights), PLOT_NIGHTS)
    return {
        "metric": watch.metric,
        "words": metric.words if metric else watch.metric,
        "first": watch.first,
        "last": watch.last,
        "nights": watch.nights,
        "slope_per_night": watch.slope_per_night,
        "acceleration": watch.acceleration,
        "nights_to_limit": watch.nights_to_limit,
        "limit": series.limit,
        "versus_fleet": watch.versus_fleet,
        "reason": watch.reason,
        "action": metric.action if metric else "drain_at_next_window",
        "series": {"nights": list(series.nights[-keep:]), "values": list(series.values[-keep:])},
    }


def _result(reading: Reading, entries: list[dict[str, Any]], notes: list[str]) -> CheckResult:
    action = strongest([e["action"] for e in entries])
    said = "; ".join(e["reason"] for e in entries)
    where = f"{reading.slot} ({reading.model})"
    note = f" ({'; '.join(notes)})" if notes else ""
    return CheckResult(
        id=WATCH_ID,
        host=reading.host,
        checklist="–",
        status="WARN",
        observed={
            "component": reading.component,
            "slot": reading.slot,
            "model": reading.model,
            "action": action,
            "metrics": entries,
        },
        expected="no metric of the component getting worse night after night",
        message=f"{reading.component} at {where} is getting worse{note}: {said}",
        remediation=_REMEDIATION.get(action),
        action=action,
    )


def _notes(known: Identity, now: Sequence[Reading]) -> dict[str, list[str]]:
    notes: dict[str, list[str]] = {}
    for component, before, after in known.moved:
        notes.setdefault(component, []).append(f"moved from {before} to {after}; its series goes on")
    for component, old, slot in known.replaced:
        notes.setdefault(component, []).append(f"replaced {old} in {slot}; a new series")
    for component, shared in sorted({(r.component, r.shared) for r in now if r.shared}):
        notes.setdefault(component, []).append(f"{shared} is reported by another slot too; read by its slot")
    return notes


def _shared(now: Sequence[Reading]) -> list[dict[str, Any]]:
    """Identities two slots reported tonight, each with the slots now standing in for it."""
    slots: dict[str, dict[str, str]] = {}
    for r in now:
        if r.shared:
            slots.setdefault(r.shared, {})[r.component] = r.slot
    return [
        {"identity": shared, "components": sorted(found), "slots": [found[c] for c in sorted(found)]}
        for shared, found in sorted(slots.items())
    ]


def _steady_entry(steady: Steady, reading: Reading) -> dict[str, Any]:
    return {
        "component": steady.component,
        "host": reading.host,
        "slot": reading.slot,
        "model": reading.model,
        "metric": steady.metric,
        "first": steady.first,
        "last": steady.last,
        "nights": steady.nights,
        "rate_per_night": steady.rate_per_night,
        "fleet_steady": steady.fleet_steady,
        "fleet": steady.fleet,
        "words": steady.words,
    }


def watch(
    db_path: str | Path | None, results: Mapping[str, Any], facts_by_host: Mapping[str, Mapping[str, Any]]
) -> WatchFindings:
    """The watch list of this run: its readings judged after the stored ones of the same components."""
    now = readings(facts_by_host, results.get("checks") or [])
    if db_path is None or not now:
        return WatchFindings(summary={"components": 0, "watched": 0}, readings=now)
    run_id = str(results["run"]["id"])
    night = next_night(db_path, run_id)
    past = {(p.component, p.metric): p for p in load_past(db_path, now, run_id, max(PLOT_NIGHTS, WINDOW))}
    known = identity(db_path, now)
    series = _series(now, past, night)
    by_key = {(s.component, s.metric): s for s in series}
    at = {r.component: r for r in now}
    grouped: dict[str, list[dict[str, Any]]] = {}
    verdicts = judge_groups(series)
    for found in verdicts.watched:
        grouped.setdefault(found.component, []).append(_entry(found, by_key[(found.component, found.metric)]))
    notes = _notes(known, now)
    checks = [_result(at[c], grouped[c], notes.get(c, [])) for c in sorted(grouped, key=lambda c: at[c].slot)]
    steady = sorted(verdicts.steady, key=lambda s: (at[s.component].slot, s.metric))
    summary = {
        "night": night,
        "components": len(at),
        "watched": len(checks),
        "moved": [{"component": c, "from": a, "to": b} for c, a, b in known.moved],
        "replaced": [{"component": c, "replaced": old, "slot": s} for c, old, s in known.replaced],
        "steady": [_steady_entry(s, at[s.component]) for s in steady],
        "shared": _shared(now),
    }
    return WatchFindings(checks, summary, now)


def record_watch(db_path: str | Path, results: Mapping[str, Any], found: WatchFindings) -> None:
    """Store the run's readings; call after ``record_run`` (the run must be in the history)."""
    if found.readings:
        record_readings(db_path, str(results["run"]["id"]), found.readings)


def _projection(entry: Mapping[str, Any]) -> str:
    to_limit, limit = entry.get("nights_to_limit"), entry.get("limit")
    if to_limit is None or limit is None:
        return "–"
    return f"at limit {limit:.4g}" if to_limit <= 0 else f"~{max(1, round(to_limit))} nights to {limit:.4g}"


def _stored_steady(conn: sqlite3.Connection, night: int) -> list[tuple[Steady, str]]:
    """The counters of ``night``'s components counting steadily, judged again from the stored readings (the
    judgement is pure, so it says what the run said), each with the host it was last read on."""
    found: dict[tuple[str, str], tuple[str, str, list[float], list[float]]] = {}
    for component, model, host, metric, at, value in conn.execute(
        "SELECT c.component, c.model, c.host, m.name, r.night, r.value FROM watch_readings r"
        " JOIN watch_components c ON c.id = r.component JOIN watch_metrics m ON m.id = r.metric"
        " WHERE c.last_night = ? AND r.night > ? ORDER BY r.night",
        (night, night - WINDOW),
    ):
        kind = metric_of(metric)
        if kind is not None and kind.shape == "counter":
            entry = found.setdefault((component, metric), (model, host, [], []))
            entry[2].append(float(at))
            entry[3].append(float(value))
    hosts = {component: host for (component, _), (_, host, _, _) in found.items()}
    series = []
    for (component, metric), (model, _, nights, values) in sorted(found.items()):
        kind = metric_of(metric)
        if kind is not None:
            series.append(
                Series(component, metric, model, tuple(nights), tuple(values), kind.shape, kind.worse)
            )
    return [(s, hosts[s.component]) for s in judge_groups(series).steady]


def watch_table(db_path: str | Path) -> str:
    """``diagnose history --watch``: the newest night's watched components, one line per metric that moved,
    then the counters counting steadily that are not watched (a steady rate is no trend, but it is a rate an
    operator wants to see)."""
    with open_db(db_path) as conn:
        newest = conn.execute(
            "SELECT w.run_id, r.started, w.night FROM watch_runs w JOIN runs r ON r.id = w.run_id"
            " ORDER BY w.night DESC LIMIT 1"
        ).fetchone()
        if newest is None:
            runs = conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
            if runs:  # recorded, but nothing the watch list follows was read (CPU hosts, a run without GPUs)
                return (
                    f"no watch list readings in {db_path}: the {counted(runs, 'run')} recorded read no GPU, "
                    "InfiniBand port or cable (what the watch list follows, by serial number or GUID)"
                )
            return f"no watch list readings in {db_path} (each run recorded with --history adds a night)"
        run_id, started, night = newest
        read = conn.execute(
            "SELECT COUNT(*) FROM watch_components WHERE last_night = ?", (night,)
        ).fetchone()[0]
        rows = conn.execute(
            "SELECT host, observed FROM checks WHERE run_id = ? AND check_id = ? ORDER BY host",
            (run_id, WATCH_ID),
        ).fetchall()
        steady = _stored_steady(conn, night)
    head = f"watch list of run {run_id} ({started}): {counted(len(rows), 'component')} watched of {read} read"
    table = []
    for host, observed in rows:
        found = json.loads(observed) if observed else {}
        for entry in found.get("metrics") or []:
            table.append(
                [
                    str(found.get("component")),
                    host,
                    str(entry["metric"]),
                    f"{entry['first']:.4g} → {entry['last']:.4g}",
                    str(entry["nights"]),
                    _projection(entry),
                    str(entry["action"]),
                ]
            )
    out = head
    if table:
        headers = ["component", "host", "metric", "from → to", "nights", "projection", "action"]
        out += "\n" + text_table(headers, table)
    if steady:
        out += f"\n\ncounting steadily, not watched: {counted(len(steady), 'counter')}\n" + text_table(
            ["component", "host", "metric", "per night", "nights", "counting, of its model"],
            [
                [
                    s.component,
                    host,
                    s.metric,
                    f"{s.rate_per_night:+.3g}",
                    str(s.nights),
                    f"{s.fleet_steady} of {s.fleet}",
                ]
                for s, host in steady
            ],
        )
    return out
