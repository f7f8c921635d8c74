"""Trends: the terminal tables of ``diagnose history`` and the data of the report's trend plot."""

from __future__ import annotations

import json
import sqlite3
import statistics
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from diagnose.core.errors import ConfigError
from diagnose.core.model import STATUSES
from diagnose.history.bands import BANDS, Band, busbw_by_size
from diagnose.history.counts import RunCounts, run_counts
from diagnose.history.storage import (
    Reference,
    baseline_ids,
    last_good_ids,
    open_db,
    run_references,
    series_key,
    stored_counts,
)


def text_table(headers: list[str], rows: Iterable[list[str]]) -> str:
    """A plain aligned table: cron mail, pipes and grep read it as well as a terminal does."""
    rows = [headers, *rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(headers))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _clip(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def history_list(db_path: str | Path, limit: int = 20) -> str:
    """The newest ``limit`` runs, one table per series (inventory and playbook, ``--limit`` included),
    newest first, with verdict, counts, regressions and which run is a reference.

    "last good" is the newest good (PASS) run of the row's own series, the run the series' next runs are
    compared with. A plain run given ``--history``, a ``--limit`` run and the nightly are three series with
    three last good runs: one table would show several "last good" rows and no reason why. The counts are
    the nightly line's (:mod:`diagnose.history.counts`), the regressions beside them, not among the FAILs.
    """
    with open_db(db_path) as conn:
        baselines, last_good = baseline_ids(conn), last_good_ids(conn)
        rows = conn.execute(
            "SELECT id, started, verdict, counts, regressions, playbook, inventory,"
            " (SELECT COUNT(*) FROM hosts h WHERE h.run_id = r.id) FROM runs r"
            " ORDER BY started_ts DESC LIMIT ?",
            (limit,),
        ).fetchall()
        series: dict[tuple[str, str], list[list[str]]] = {}
        for run_id, started, verdict, counts_json, found, playbook, inventory, hosts in rows:
            counts = stored_counts(conn, run_id, counts_json, found)
            marks = [m for m, ids in (("baseline", baselines), ("last good", last_good)) if run_id in ids]
            series.setdefault((playbook, inventory), []).append(
                [
                    run_id,
                    started,
                    verdict,
                    *(str(counts.statuses.get(s, 0)) for s in ("FAIL", "ERROR", "WARN")),
                    str(counts.regressions),
                    str(hosts),
                    ", ".join(marks),
                ]
            )
    if not rows:
        return f"no runs recorded in {db_path}"
    headers = ["run", "started", "verdict", "FAIL", "ERROR", "WARN", "regressions", "hosts", "note"]
    parts = [
        f"{playbook or '?'} on {inventory or '?'}\n" + text_table(headers, table)
        for (playbook, inventory), table in series.items()
    ]
    if len(series) > 1:
        parts.insert(
            0,
            f"{len(series)} series (playbook on inventory): each is compared only with itself, and its "
            "last good run is the newest PASS of that series",
        )
    return "\n\n".join(parts)


def _check_trend(conn: sqlite3.Connection, check_id: str, host: str | None, limit: int) -> str:
    host_clause = " AND c.host = ?" if host is not None else ""
    params: list[Any] = [check_id] + ([host] if host is not None else [])
    runs = conn.execute(
        "SELECT r.id, r.started FROM runs r WHERE EXISTS (SELECT 1 FROM checks c WHERE c.run_id = r.id"
        f" AND c.check_id = ?{host_clause}) ORDER BY r.started_ts DESC LIMIT ?",
        (*params, limit),
    ).fetchall()
    if not runs:
        where = f" on {host}" if host else ""
        return f"no recorded run has {check_id}{where}"
    table = []
    for run_id, started in reversed(runs):
        results = conn.execute(
            f"SELECT c.host, c.status, c.observed, c.message FROM checks c WHERE c.run_id = ? AND c.check_id = ?"
            f"{host_clause} ORDER BY c.host",
            (run_id, *params),
        ).fetchall()
        if host is not None:
            for _, status, observed, message in results:
                shown = "" if observed is None else _clip(json.loads(observed), 30)
                table.append([started, run_id, status, shown, _clip(message or "", 70)])
            continue
        tally = {s: sum(1 for r in results if r[1] == s) for s in STATUSES}
        odd = [f"{h or 'cluster'} {s}" for h, s, _, _ in results if s not in ("PASS", "SKIP")]
        shown = ", ".join(odd[:5]) + (f", +{len(odd) - 5} more" if len(odd) > 5 else "")
        table.append([started, run_id, *(str(tally[s]) for s in STATUSES), shown])
    if host is not None:
        return f"{check_id} on {host}\n" + text_table(
            ["started", "run", "status", "observed", "message"], table
        )
    return f"{check_id}\n" + text_table(["started", "run", *STATUSES, "not passing"], table)


def _band_median(sizes: Mapping[int, float], band: Band) -> float | None:
    values = [v for s, v in sizes.items() if band.holds(s)]
    return statistics.median(values) if values else None


def _run_busbw(
    conn: sqlite3.Connection, run_id: str, collective: str
) -> tuple[tuple[Any, ...], dict[int, float]]:
    """The run's widest benchmark of the collective (most ranks: the whole cluster) and its busbw by size."""
    bench = conn.execute(
        "SELECT seq, tool, nodes, ranks, status FROM benchmarks WHERE run_id = ? AND collective = ?"
        " ORDER BY COALESCE(ranks, 0) DESC, seq LIMIT 1",
        (run_id, collective),
    ).fetchone()
    if bench is None:
        return (), {}
    rows = conn.execute(
        "SELECT bytes, busbw_gbps FROM bench_rows WHERE run_id = ? AND seq = ? AND busbw_gbps IS NOT NULL"
        " AND COALESCE(wrong, 0) = 0",
        (run_id, bench[0]),
    ).fetchall()
    return tuple(bench[1:]), {int(size): float(busbw) for size, busbw in rows}


def _shape(nodes: int | None, ranks: int | None) -> str:
    """``2×8`` for 16 ranks on 2 nodes: nodes times ranks per node, as "2×8 GPUs" is read (2 ranks on 2
    nodes is 2×1, not 2×2); the total alone where the ranks do not split evenly."""
    if not ranks:
        return ""
    if nodes and ranks % nodes == 0:
        return f"{nodes}×{ranks // nodes}"
    return f"{ranks} ranks"


def _collective_trend(conn: sqlite3.Connection, collective: str, limit: int) -> str:
    runs = conn.execute(
        "SELECT r.id, r.started FROM runs r WHERE EXISTS (SELECT 1 FROM benchmarks b WHERE b.run_id = r.id"
        " AND b.collective = ?) ORDER BY r.started_ts DESC LIMIT ?",
        (collective, limit),
    ).fetchall()
    if not runs:
        return f"no recorded run has a {collective} benchmark"
    table = []
    for run_id, started in reversed(runs):
        (tool, nodes, ranks, status), sizes = _run_busbw(conn, run_id, collective)
        medians = [_band_median(sizes, band) for band in BANDS]
        peak = max(sizes.values(), default=None)
        table.append(
            [
                started,
                run_id,
                str(tool or ""),
                _shape(nodes, ranks),
                *("" if m is None else f"{m:.1f}" for m in medians),
                "" if peak is None else f"{peak:.1f}",
                str(status or ""),
            ]
        )
    headers = ["started", "run", "tool", "nodes×ranks/node", *(b.label for b in BANDS), "peak", "status"]
    return f"{collective} busbw (GB/s, median per size band)\n" + text_table(headers, table)


def history_trend(
    db_path: str | Path,
    check_id: str | None = None,
    collective: str | None = None,
    host: str | None = None,
    limit: int = 30,
) -> str:
    """A check's results (on one host, or tallied over all) and/or a collective's busbw, oldest first."""
    if check_id is None and collective is None:
        raise ConfigError("diagnose history: name a check (--check ID) or a collective (--collective NAME)")
    if host is not None and check_id is None:
        raise ConfigError("diagnose history: --host applies to a check's trend (--check ID)")
    with open_db(db_path) as conn:
        parts = []
        if check_id is not None:
            parts.append(_check_trend(conn, check_id, host, limit))
        if collective is not None:
            parts.append(_collective_trend(conn, collective, limit))
    return "\n\n".join(parts)


def trend_for_report(db_path: str | Path, results: Mapping[str, Any], limit: int = 30) -> dict[str, Any]:
    """Data for the report's trend plot: the series' last ``limit`` runs, the current one last.

    Works before or after ``record_run``: the current run is taken from ``results`` either way. Lists in
    ``busbw`` are aligned with ``runs`` (None where a run has no such benchmark or no size in the band).
    """
    run = results["run"]
    run_id = str(run["id"])
    inventory, playbook = series_key(run)
    collectives = sorted({b["collective"] for b in results.get("benchmarks", [])})
    refs: list[Reference] = []
    past: list[dict[str, Any]] = []
    past_busbw: dict[tuple[str, str], dict[int, float]] = {}
    if not Path(db_path).is_file():  # the series' first run, before it is recorded
        return _report_trend(results, inventory, playbook, refs, past, past_busbw, collectives)
    with open_db(db_path) as conn:
        refs = run_references(conn, run)
        rows = conn.execute(
            "SELECT id, started, verdict, counts, regressions FROM runs"
            " WHERE inventory = ? AND playbook = ? AND id != ? ORDER BY started_ts DESC LIMIT ?",
            (inventory, playbook, run_id, max(limit - 1, 0)),
        ).fetchall()[::-1]
        for past_id, started, verdict, counts_json, found in rows:
            counts = stored_counts(conn, past_id, counts_json, found)
            past.append(_trend_run(past_id, started, verdict, counts))
        if past:
            marks = ",".join("?" * len(past))
            collectives = sorted(
                set(collectives)
                | {
                    r[0]
                    for r in conn.execute(
                        f"SELECT DISTINCT collective FROM benchmarks WHERE run_id IN ({marks})",
                        [p["id"] for p in past],
                    )
                }
            )
        past_busbw = {(p["id"], c): _run_busbw(conn, p["id"], c)[1] for p in past for c in collectives}
    return _report_trend(results, inventory, playbook, refs, past, past_busbw, collectives)


def _trend_run(run_id: str, started: Any, verdict: Any, counts: RunCounts) -> dict[str, Any]:
    """One run of the report's trend, counted as the nightly line and ``diagnose history`` count it."""
    return {
        "id": run_id,
        "started": started,
        "verdict": verdict,
        "counts": counts.statuses,
        "regressions": counts.regressions,
    }


def _report_trend(
    results: Mapping[str, Any],
    inventory: str,
    playbook: str,
    refs: list[Reference],
    past: list[dict[str, Any]],
    past_busbw: dict[tuple[str, str], dict[int, float]],
    collectives: list[str],
) -> dict[str, Any]:
    """The trend data of :func:`trend_for_report` from what the database gave (nothing for a first run)."""
    run = results["run"]
    current_busbw: dict[str, dict[int, float]] = {}
    for collective in collectives:
        benches = [b for b in results.get("benchmarks", []) if b["collective"] == collective]
        if benches:
            widest = max(benches, key=lambda b: b.get("ranks") or 0)
            current_busbw[collective] = busbw_by_size(widest)
    runs = [
        *past,
        _trend_run(str(run["id"]), run.get("started"), results.get("verdict"), run_counts(results)),
    ]
    busbw: dict[str, dict[str, list[float | None]]] = {}
    for collective in collectives:
        series_sizes = [past_busbw[(p["id"], collective)] for p in past] + [current_busbw.get(collective, {})]
        busbw[collective] = {band.key: [_band_median(s, band) for s in series_sizes] for band in BANDS}
    by_role = {ref.role: ref.run_id for ref in refs}
    both = by_role.get("last good and baseline")
    return {
        "series": {"inventory": inventory, "playbook": playbook},
        "bands": [
            {"key": b.key, "label": b.label, "min_bytes": b.min_bytes, "max_bytes": b.max_bytes}
            for b in BANDS
        ],
        "runs": runs,
        "busbw": busbw,
        "references": {
            "last_good": both or by_role.get("last good"),
            "baseline": both or by_role.get("baseline"),
        },
    }
