"""The history database: schema and migrations, recording a run, loading it back, and references.

Runs are compared only within their *series* — the same inventory and playbook — so one database can hold
a production nightly, a staging nightly and acceptance runs without one being judged against another.
A run's references are the last good run (verdict PASS) and the pinned baseline of its series.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import platformdirs

from diagnose.core.errors import ConfigError
from diagnose.core.hosts import Host
from diagnose.history.counts import RunCounts, count_rows, run_counts
from diagnose.history.migrations import MIGRATIONS

DEFAULT_DB_NAME = "history.sqlite3"

SCHEMA_VERSION = len(MIGRATIONS)


#: Names the history database once for every command (as ``ANSIBLE_CONFIG`` names Ansible's settings), so a
#: site's ``--history`` is not repeated on each: ``--history`` wins over it, it over the inventory's.
HISTORY_ENV = "DIAGNOSE_HISTORY"
#: The inventory variable (under ``all: vars:``) naming the database of every run over that inventory.
HISTORY_VARIABLE = "diagnose_history"


def default_db_path() -> Path:
    """Where the history lives unless ``--history``, ``DIAGNOSE_HISTORY`` or the inventory's
    ``diagnose_history`` says otherwise (per user, survives upgrades)."""
    return Path(platformdirs.user_data_dir("diagnose", appauthor=False)) / DEFAULT_DB_NAME


def env_db_path(environ: Mapping[str, str]) -> str | None:
    """``DIAGNOSE_HISTORY``, ``~`` expanded (no shell expands a variable's value), or None when unset."""
    value = environ.get(HISTORY_ENV, "").strip()
    return str(Path(value).expanduser()) if value else None


def inventory_db_path(hosts: Sequence[Host]) -> str | None:
    """The database the inventory's ``diagnose_history`` names, or None. A run records into one database,
    so hosts naming two are refused (exit 2) rather than one of them picked."""
    named = {str(h.vars.get(HISTORY_VARIABLE)) for h in hosts if h.vars.get(HISTORY_VARIABLE)}
    if len(named) > 1:
        raise ConfigError(
            f"{HISTORY_VARIABLE}: the hosts name {len(named)} history databases ({', '.join(sorted(named))}); "
            "a run records into one: set it once under all: vars"
        )
    return str(Path(named.pop()).expanduser()) if named else None


# ---------------------------------------------------------------------------------------------------------
# The database


def check_db_path(db_path: str | Path) -> None:
    """Refuse a history path a run could not create its database at (ConfigError: exit 2).

    Only the default path gets its folder made: a ``--history`` whose folder does not exist is a typo far
    more often than a wish, and a database quietly started there would split the series in two.
    """
    path = Path(db_path)
    if path.is_file():
        return
    if path.exists():
        raise ConfigError("--history names something that is not a database file", path)
    if not path.parent.is_dir() and path != default_db_path():
        raise ConfigError(
            f"--history: the folder {path.parent} does not exist; create it first, "
            f"or leave --history out for the default ({default_db_path()})",
            path,
        )


def create_db(db_path: str | Path) -> None:
    """Make the history database if it does not exist yet: a run recording history does, once its path
    passed :func:`check_db_path`; the commands that only read history never do."""
    Path(db_path).parent.mkdir(parents=True, exist_ok=True)
    with open_db(db_path, create=True):
        pass


@contextmanager
def open_db(db_path: str | Path, create: bool = False) -> Iterator[sqlite3.Connection]:
    """The database, migrated to this version's schema. Without ``create`` a missing file is refused
    (ConfigError: exit 2) rather than made: a mistyped ``--history`` must not answer "no runs" from an
    empty database it just left behind."""
    path = Path(db_path)
    if not create and not path.is_file():
        raise ConfigError("no history database here (check --history; a nightly run creates it)", path)
    conn = sqlite3.connect(path, timeout=30.0)
    try:
        conn.execute("PRAGMA foreign_keys = ON")
        _migrate(conn, path)
        yield conn
    finally:
        conn.close()


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    with conn:
        conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
    current = row[0] or 0
    if current > SCHEMA_VERSION:
        raise ConfigError(
            f"history schema {current} is newer than this diagnose understands ({SCHEMA_VERSION}); "
            "upgrade diagnose or point --history elsewhere",
            path,
        )
    for version in range(current + 1, SCHEMA_VERSION + 1):
        # executescript commits first and runs outside the connection's transaction handling, so the
        # version bump is part of the same script: a crash leaves the old version and no half schema.
        conn.executescript(
            f"BEGIN;\n{MIGRATIONS[version - 1]}\nINSERT INTO schema_version VALUES ({version});\nCOMMIT;"
        )


def schema_version(db_path: str | Path) -> int:
    with open_db(db_path) as conn:
        return int(conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0])


def epoch_seconds(text: Any) -> float | None:
    """Seconds since the epoch of an ISO time; ``Z`` accepted (``fromisoformat`` takes it only from 3.11)."""
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, default=str)


def series_key(run: Mapping[str, Any]) -> tuple[str, str]:
    """(inventory, playbook) naming the runs that compare with each other.

    A ``--limit`` is part of the playbook side: a run of one rack is not the whole cluster with the other
    racks gone, and must neither report them as disappeared nor serve as their reference.
    """
    playbook = str(run.get("playbook") or "")
    if run.get("limit"):
        playbook += f" --limit {run['limit']}"
    return str(run.get("inventory") or ""), playbook


def previous_run_started(db_path: str | Path, run: Mapping[str, Any]) -> str | None:
    """When the newest earlier run of this run's series started (ISO time), or None: the start of the
    window in which a nightly run looks for new Xid events, so each is reported once."""
    if not Path(db_path).exists():
        return None
    inventory, playbook = series_key(run)
    with open_db(db_path) as conn:
        row = conn.execute(
            "SELECT started FROM runs WHERE inventory = ? AND playbook = ? AND id != ?"
            " ORDER BY started_ts DESC LIMIT 1",
            (inventory, playbook, str(run.get("id") or "")),
        ).fetchone()
    return str(row[0]) if row else None


def previous_check_observed(
    db_path: str | Path, run: Mapping[str, Any], check_id: str
) -> tuple[str, dict[str, Any]] | None:
    """The newest earlier run of this run's series: when it started (ISO time) and what one check observed
    there, per host (the host's last result of that check: for counters, the snapshot after the
    benchmarks when there was one). None without such a run. The nightly hands ib.flaps the IB counters
    of the previous run this way, to judge their growth per hour."""
    if not Path(db_path).exists():
        return None
    inventory, playbook = series_key(run)
    with open_db(db_path) as conn:
        row = conn.execute(
            "SELECT id, started FROM runs WHERE inventory = ? AND playbook = ? AND id != ?"
            " ORDER BY started_ts DESC LIMIT 1",
            (inventory, playbook, str(run.get("id") or "")),
        ).fetchone()
        if row is None:
            return None
        rows = conn.execute(
            "SELECT host, observed FROM checks WHERE run_id = ? AND check_id = ? ORDER BY rowid",
            (row[0], check_id),
        ).fetchall()
    observed = {str(host): json.loads(text) for host, text in rows if text}
    return str(row[1]), observed


def record_run(db_path: str | Path, results: Mapping[str, Any], run_dir: str | Path | None) -> None:
    """Store one complete results document (schema 1). Recording the same run id again replaces it."""
    run = results["run"]
    run_id = str(run["id"])
    inventory, playbook = series_key(run)
    started_ts = epoch_seconds(run.get("started")) or time.time()
    counts = run_counts(results)
    create_db(db_path)
    with open_db(db_path) as conn, conn:
        for table in ("bench_rows", "benchmarks", "checks", "hosts"):
            conn.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
        conn.execute(
            "INSERT INTO runs (id, started, started_ts, finished, verdict, inventory, playbook, profile,"
            " tool_version, run_dir, counts, regressions, stages) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (id) DO UPDATE SET started = excluded.started, started_ts = excluded.started_ts,"
            " finished = excluded.finished, verdict = excluded.verdict, inventory = excluded.inventory,"
            " playbook = excluded.playbook, profile = excluded.profile,"
            " tool_version = excluded.tool_version, run_dir = excluded.run_dir, counts = excluded.counts,"
            " regressions = excluded.regressions, stages = excluded.stages",
            (
                run_id,
                str(run.get("started") or ""),
                started_ts,
                run.get("finished"),
                str(results.get("verdict") or "ERROR"),
                inventory,
                playbook,
                run.get("profile"),
                run.get("tool_version"),
                str(Path(run_dir).resolve()) if run_dir is not None else None,
                json.dumps(counts.statuses),
                counts.regressions,
                _json(run.get("stages")),
            ),
        )
        conn.executemany(
            "INSERT OR REPLACE INTO hosts VALUES (?, ?, ?, ?, ?, ?)",
            [
                (
                    run_id,
                    h["name"],
                    h.get("address"),
                    int(bool(h.get("reachable"))),
                    h.get("error"),
                    json.dumps(h.get("environment") or {}, default=str),
                )
                for h in results.get("hosts", [])
            ],
        )
        conn.executemany(
            "INSERT INTO checks VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    run_id,
                    c["id"],
                    c.get("host") or "",
                    c.get("checklist"),
                    c["status"],
                    _json(c.get("observed")),
                    _json(c.get("expected")),
                    c.get("message"),
                )
                for c in results.get("checks", [])
            ],
        )
        for seq, bench in enumerate(results.get("benchmarks", [])):
            transport = bench.get("transport") or {}
            conn.execute(
                "INSERT INTO benchmarks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    seq,
                    bench["collective"],
                    bench.get("tool"),
                    bench.get("backend"),
                    bench.get("nodes"),
                    bench.get("ranks"),
                    transport.get("inter_node"),
                    bench.get("status"),
                    bench.get("expected_busbw_gbps"),
                    bench.get("message"),
                ),
            )
            conn.executemany(
                "INSERT INTO bench_rows VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        run_id,
                        seq,
                        int(row["bytes"]),
                        row.get("time_us"),
                        row.get("algbw_gbps"),
                        row.get("busbw_gbps"),
                        row.get("wrong"),
                    )
                    for row in bench.get("rows", [])
                ],
            )


def stored_counts(conn: sqlite3.Connection, run_id: str, counts: str, regressions: int | None) -> RunCounts:
    """A recorded run's counts (``runs.counts`` and ``runs.regressions``); a run recorded before schema 3
    stored other counts, so its rows are counted again by the rule the nightly line follows."""
    if regressions is not None:
        return RunCounts(json.loads(counts), regressions)
    return count_rows(
        conn.execute("SELECT check_id, status FROM checks WHERE run_id = ?", (run_id,)),
        conn.execute("SELECT collective, status FROM benchmarks WHERE run_id = ?", (run_id,)),
    )


def load_results(conn: sqlite3.Connection, run_id: str) -> dict[str, Any]:
    """The stored part of a run, in the shape of results.json, so one code path reads both."""
    hosts = [
        {"name": name, "reachable": bool(reachable), "environment": json.loads(env)}
        for name, reachable, env in conn.execute(
            "SELECT name, reachable, environment FROM hosts WHERE run_id = ?", (run_id,)
        )
    ]
    checks = [
        {"id": check_id, "host": host or None, "status": status, "message": message}
        for check_id, host, status, message in conn.execute(
            "SELECT check_id, host, status, message FROM checks WHERE run_id = ?", (run_id,)
        )
    ]
    benchmarks: dict[int, dict[str, Any]] = {}
    for seq, collective, tool, nodes, ranks, status, expected in conn.execute(
        "SELECT seq, collective, tool, nodes, ranks, status, expected_busbw_gbps FROM benchmarks"
        " WHERE run_id = ? ORDER BY seq",
        (run_id,),
    ):
        benchmarks[seq] = {
            "collective": collective,
            "tool": tool,
            "nodes": nodes,
            "ranks": ranks,
            "status": status,
            "expected_busbw_gbps": expected,
            "rows": [],
        }
    for seq, size, busbw, wrong in conn.execute(
        "SELECT seq, bytes, busbw_gbps, wrong FROM bench_rows WHERE run_id = ?", (run_id,)
    ):
        benchmarks[seq]["rows"].append({"bytes": size, "busbw_gbps": busbw, "wrong": wrong})
    return {"hosts": hosts, "checks": checks, "benchmarks": list(benchmarks.values())}


# ---------------------------------------------------------------------------------------------------------
# References: the last good run and the pinned baseline


@dataclass(frozen=True)
class Reference:
    """A past run this one is compared with; ``role`` is ``last good``, ``baseline`` or both."""

    run_id: str
    started: str
    run_dir: str | None
    role: str


def _resolve_run(conn: sqlite3.Connection, run_id: str, db_path: str | Path) -> str:
    """A run id, an unambiguous prefix of one (ids are long; people type the start), or the run's folder:
    its path, or its name alone (a nightly folder named before folders carried the id)."""
    rows = [r[0] for r in conn.execute("SELECT id FROM runs WHERE id = ?", (run_id,))]
    if not rows:
        pattern = run_id.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        rows = [r[0] for r in conn.execute("SELECT id FROM runs WHERE id LIKE ? ESCAPE '\\'", (pattern,))]
    name = run_id.rstrip("/")
    if not rows and name:
        folder = str(Path(name).expanduser().resolve())
        named = list(conn.execute("SELECT id, run_dir FROM runs WHERE run_dir IS NOT NULL"))
        rows = [i for i, d in named if d == folder] or [i for i, d in named if Path(d).name == name]
    if len(rows) == 1:
        return str(rows[0])
    if not rows:
        raise ConfigError(f"no run {run_id!r} in the history", db_path)
    raise ConfigError(f"run id {run_id!r} is ambiguous: {', '.join(sorted(rows)[:5])}", db_path)


def find_run(db_path: str | Path, run_id: str) -> tuple[str, str | None]:
    """The full id and the recorded folder of the run ``run_id`` names (see :func:`_resolve_run`);
    ConfigError (exit 2) when none or several match."""
    with open_db(db_path) as conn:
        full_id = _resolve_run(conn, run_id, db_path)
        return full_id, conn.execute("SELECT run_dir FROM runs WHERE id = ?", (full_id,)).fetchone()[0]


def set_baseline(db_path: str | Path, run_id: str) -> str:
    """Pin a run as the baseline of its series (inventory + playbook); returns the full run id.

    Later runs of the series are compared with it, and runs older than it stop being references.
    """
    with open_db(db_path) as conn:
        full_id = _resolve_run(conn, run_id, db_path)
        inventory, playbook = conn.execute(
            "SELECT inventory, playbook FROM runs WHERE id = ?", (full_id,)
        ).fetchone()
        with conn:
            conn.execute(
                "INSERT INTO baselines VALUES (?, ?, ?, ?) ON CONFLICT (inventory, playbook)"
                " DO UPDATE SET run_id = excluded.run_id, pinned = excluded.pinned",
                (inventory, playbook, full_id, datetime.now(timezone.utc).isoformat(timespec="seconds")),
            )
    return full_id


def run_references(conn: sqlite3.Connection, run: Mapping[str, Any]) -> list[Reference]:
    """The last good run (newest first) and the baseline of the run's series, without the run itself."""
    inventory, playbook = series_key(run)
    run_id = str(run.get("id"))
    now_ts = epoch_seconds(run.get("started"))
    baseline = conn.execute(
        "SELECT r.id, r.started, r.run_dir, r.started_ts FROM baselines b JOIN runs r ON r.id = b.run_id"
        " WHERE b.inventory = ? AND b.playbook = ? AND r.id != ?",
        (inventory, playbook, run_id),
    ).fetchone()
    query = (
        "SELECT id, started, run_dir FROM runs WHERE inventory = ? AND playbook = ? AND verdict = 'PASS'"
        " AND id != ? AND started_ts >= ? AND started_ts <= ? ORDER BY started_ts DESC LIMIT 1"
    )
    floor = baseline[3] if baseline else float("-inf")
    ceiling = now_ts if now_ts is not None else float("inf")
    good = conn.execute(query, (inventory, playbook, run_id, floor, ceiling)).fetchone()
    if good and baseline and good[0] == baseline[0]:
        return [Reference(good[0], good[1], good[2], "last good and baseline")]
    refs = []
    if good:
        refs.append(Reference(good[0], good[1], good[2], "last good"))
    if baseline:
        refs.append(Reference(baseline[0], baseline[1], baseline[2], "baseline"))
    return refs


def good_run_ids(conn: sqlite3.Connection, run: Mapping[str, Any], limit: int) -> list[str]:
    """The newest ``limit`` good (PASS) runs of the run's series before it, oldest first: the runs whose
    spread is the series' run-to-run noise (diagnose.history.noise). Runs before a pinned baseline count:
    pinning acknowledges a level, and how much the measurement wanders is the same before and after."""
    inventory, playbook = series_key(run)
    now_ts = epoch_seconds(run.get("started"))
    rows = conn.execute(
        "SELECT id FROM runs WHERE inventory = ? AND playbook = ? AND verdict = 'PASS' AND id != ?"
        " AND started_ts <= ? ORDER BY started_ts DESC LIMIT ?",
        (inventory, playbook, str(run.get("id")), now_ts if now_ts is not None else float("inf"), limit),
    ).fetchall()
    return [r[0] for r in reversed(rows)]


def last_good_ids(conn: sqlite3.Connection) -> set[str]:
    """The newest PASS run of every series: what retention must keep to have a reference."""
    rows = conn.execute(
        "SELECT id FROM runs r WHERE verdict = 'PASS' AND started_ts = (SELECT MAX(started_ts) FROM runs s"
        " WHERE s.inventory = r.inventory AND s.playbook = r.playbook AND s.verdict = 'PASS')"
    )
    return {r[0] for r in rows}


def baseline_ids(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT run_id FROM baselines")}
