"""The watch list's part of the history database: components, their readings night by night, and identity.

A *night* is a recorded run that carried readings, numbered in the order they were recorded (the nightly runs
once a night; a manual run with ``--history`` counts as one more night for the parts it read). Readings are
global, not per series: a GPU's ECC count is the GPU's whichever playbook read it.

What keeps the tables bounded:

* a pruned run (``keep_runs`` / ``keep_days``, diagnose.history.retention) takes its night's readings with it
  (schema 4's cascade and trigger);
* whatever the retention, no reading older than :data:`KEEP_NIGHTS` nights stays (a hard cap of that many
  readings per component and metric), and a component none of whose readings is left is forgotten;
* one row is four integers and a float or two (WITHOUT ROWID, keyed by component, metric and night).

Identity: a component seen on another host than before keeps its series and is reported as moved; a new
component in a slot that another one held is reported as its replacement, and its series starts afresh.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from diagnose.history.storage import open_db
from diagnose.history.watch_readings import Reading

#: Nights of readings kept at most, whatever the run retention: the plots' reach and the hard cap.
KEEP_NIGHTS = 90


@dataclass(frozen=True)
class Past:
    """A component's stored readings of one metric, oldest first, and where it was last seen."""

    component: str
    metric: str
    host: str
    nights: tuple[int, ...]
    values: tuple[float, ...]


@dataclass(frozen=True)
class Identity:
    """What the store knew about this run's components: ``moved`` (component, from host, to host) and
    ``replaced`` (new component, the one it replaced, the slot)."""

    moved: tuple[tuple[str, str, str], ...]
    replaced: tuple[tuple[str, str, str], ...]


def _night_of(conn: sqlite3.Connection, run_id: str) -> int:
    """This run's night: its own if it was recorded before, else one after the newest."""
    row = conn.execute("SELECT night FROM watch_runs WHERE run_id = ?", (run_id,)).fetchone()
    if row:
        return int(row[0])
    newest = conn.execute("SELECT MAX(night) FROM watch_runs").fetchone()[0]
    return int(newest or 0) + 1


def next_night(db_path: str | Path, run_id: str) -> int:
    """The night number this run gets (the first is 1; a missing database is a first night)."""
    if not Path(db_path).is_file():
        return 1
    with open_db(db_path) as conn:
        return _night_of(conn, run_id)


def load_past(db_path: str | Path, readings: Sequence[Reading], run_id: str, nights: int) -> list[Past]:
    """The stored readings of the newest ``nights`` nights (before this run's) of the components and
    metrics in ``readings``."""
    if not readings or not Path(db_path).is_file():
        return []
    wanted = {(r.component, r.metric) for r in readings}
    components = sorted({r.component for r in readings})
    with open_db(db_path) as conn:
        night = _night_of(conn, run_id)
        found: dict[tuple[str, str], tuple[str, list[int], list[float]]] = {}
        for start in range(0, len(components), 500):
            chunk = components[start : start + 500]
            rows = conn.execute(
                "SELECT c.component, c.host, m.name, r.night, r.value FROM watch_readings r"
                " JOIN watch_components c ON c.id = r.component JOIN watch_metrics m ON m.id = r.metric"
                f" WHERE c.component IN ({','.join('?' * len(chunk))}) AND r.night < ? AND r.night >= ?"
                " ORDER BY r.night",
                (*chunk, night, night - nights),
            )
            for component, host, metric, at, value in rows:
                if (component, metric) in wanted:
                    entry = found.setdefault((component, metric), (host, [], []))
                    entry[1].append(int(at))
                    entry[2].append(float(value))
    return [Past(c, m, h, tuple(n), tuple(v)) for (c, m), (h, n, v) in sorted(found.items())]


def identity(db_path: str | Path, readings: Sequence[Reading]) -> Identity:
    """Which of this run's components moved to another host, and which are new in a slot another held."""
    if not readings or not Path(db_path).is_file():
        return Identity((), ())
    here = {r.component: r for r in readings}
    moved, replaced = [], []
    with open_db(db_path) as conn:
        known = {}
        names = sorted(here)
        for start in range(0, len(names), 500):
            chunk = names[start : start + 500]
            known.update(
                {
                    c: (h, s)
                    for c, h, s in conn.execute(
                        "SELECT component, host, slot FROM watch_components"
                        f" WHERE component IN ({','.join('?' * len(chunk))})",
                        chunk,
                    )
                }
            )
        for component, reading in sorted(here.items()):
            if component in known:
                if known[component][0] != reading.host:
                    moved.append((component, known[component][0], reading.host))
                continue
            if component.startswith("slot:"):
                continue  # no identity of its own: a swap cannot be told apart
            before = conn.execute(
                "SELECT component FROM watch_components WHERE slot = ? AND component != ?"
                " ORDER BY last_night DESC LIMIT 1",
                (reading.slot, component),
            ).fetchone()
            if before and before[0] not in here:
                replaced.append((component, str(before[0]), reading.slot))
    return Identity(tuple(moved), tuple(replaced))


def _ids(conn: sqlite3.Connection, table: str, column: str, names: Iterable[str]) -> dict[str, int]:
    conn.executemany(f"INSERT OR IGNORE INTO {table} ({column}) VALUES (?)", [(n,) for n in names])
    return {name: int(i) for i, name in conn.execute(f"SELECT id, {column} FROM {table}")}


def record_readings(db_path: str | Path, run_id: str, readings: Sequence[Reading]) -> int:
    """Store one recorded run's readings (the run is in ``runs`` already); recording the run again replaces
    them. Returns the run's night. Then the hard cap: nights older than :data:`KEEP_NIGHTS` are forgotten."""
    with open_db(db_path) as conn, conn:
        night = _night_of(conn, run_id)
        conn.execute("INSERT OR IGNORE INTO watch_runs (run_id, night) VALUES (?, ?)", (run_id, night))
        conn.execute("DELETE FROM watch_readings WHERE night = ?", (night,))
        metrics = _ids(conn, "watch_metrics", "name", sorted({r.metric for r in readings}))
        latest: dict[str, Reading] = {r.component: r for r in readings}
        conn.executemany(
            "INSERT INTO watch_components (component, model, host, slot, first_night, last_night)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (component) DO UPDATE SET model = excluded.model,"
            " host = excluded.host, slot = excluded.slot, last_night = excluded.last_night",
            [(c, r.model, r.host, r.slot, night, night) for c, r in sorted(latest.items())],
        )
        components = {
            c: int(i)
            for i, c in conn.execute(
                "SELECT id, component FROM watch_components WHERE last_night = ?", (night,)
            )
        }
        conn.executemany(
            "INSERT OR REPLACE INTO watch_readings VALUES (?, ?, ?, ?, ?)",
            [(components[r.component], metrics[r.metric], night, r.value, r.limit) for r in readings],
        )
        _cap(conn, night)
    return night


def _cap(conn: sqlite3.Connection, night: int) -> None:
    """Forget nights older than :data:`KEEP_NIGHTS` and the components nothing is left of."""
    conn.execute("DELETE FROM watch_runs WHERE night <= ?", (night - KEEP_NIGHTS,))
    forget_orphans(conn)


def forget_orphans(conn: sqlite3.Connection) -> None:
    """Forget the components no reading refers to any more (after pruning or the cap)."""
    conn.execute(
        "DELETE FROM watch_components WHERE NOT EXISTS"
        " (SELECT 1 FROM watch_readings r WHERE r.component = watch_components.id)"
    )
