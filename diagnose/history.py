"""Run history: every run's verdict, check results and busbw in an embedded SQLite database.

Nightly runs are only useful against what came before. The database keeps, per run, the hosts and their
versions, every check result and every benchmark row, so a run can be compared with the last good run
(verdict PASS) and with a pinned baseline, and ``diagnose history`` can show a check's or a collective's
trend. The database, not the run folders, is the record: retention may delete folders while the history
of what they measured stays.

Runs are compared only within their *series* — the same inventory and playbook — so one database can hold
a production nightly, a staging nightly and acceptance runs without one being judged against another.

Comparison rules (each finding becomes one ``history.regression`` result):

* a check (per host, or cluster-wide) that was PASS or WARN in the reference and is FAIL now — FAIL;
* a host of the reference run that is absent from this run (an unreachable host is still present: it
  already FAILs ``host.reachable``) — FAIL;
* driver, CUDA, NCCL or torch changed on some hosts — WARN when every host now agrees (an upgrade), FAIL
  when the change left the hosts disagreeing;
* the median busbw of a collective within a size band fell by more than ``busbw_drop_pct`` — FAIL: a
  nightly health check exists to catch a degraded link or a bad upgrade, run-to-run noise of NCCL on a quiet
  cluster is a few percent, and a WARN would not change the exit code a scheduler or monitor acts on.

Pinning a baseline (``diagnose baseline RUN_ID``) also acknowledges change: runs older than the pinned
baseline are never used as references, so after a planned removal of a host or an accepted bandwidth
change, pinning the first run of the new state stops the findings from repeating.
"""

from __future__ import annotations

import json
import sqlite3
import statistics
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import platformdirs

from diagnose.errors import ConfigError
from diagnose.model import SEVERITY, STATUSES, CheckResult

REGRESSION_ID = "history.regression"
DEFAULT_BUSBW_DROP_PCT = 10.0
DEFAULT_DB_NAME = "history.sqlite3"
VERSION_FIELDS = ("driver", "cuda", "nccl", "torch")

_MIGRATIONS: tuple[str, ...] = (
    # 1: the first schema. A later change appends a script here; never edit a shipped one.
    """
    CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        started TEXT NOT NULL,
        started_ts REAL NOT NULL,
        finished TEXT,
        verdict TEXT NOT NULL,
        inventory TEXT NOT NULL,
        playbook TEXT NOT NULL,
        profile TEXT,
        tool_version TEXT,
        run_dir TEXT,
        counts TEXT NOT NULL
    );
    CREATE INDEX runs_series ON runs (inventory, playbook, started_ts);
    CREATE TABLE hosts (
        run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        address TEXT,
        reachable INTEGER NOT NULL,
        error TEXT,
        environment TEXT NOT NULL,
        PRIMARY KEY (run_id, name)
    );
    CREATE TABLE checks (
        run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        check_id TEXT NOT NULL,
        host TEXT NOT NULL,
        checklist TEXT,
        status TEXT NOT NULL,
        observed TEXT,
        expected TEXT,
        message TEXT
    );
    CREATE INDEX checks_run ON checks (run_id);
    CREATE INDEX checks_trend ON checks (check_id, host);
    CREATE TABLE benchmarks (
        run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        collective TEXT NOT NULL,
        tool TEXT,
        backend TEXT,
        nodes INTEGER,
        ranks INTEGER,
        inter_node TEXT,
        status TEXT,
        expected_busbw_gbps REAL,
        message TEXT,
        PRIMARY KEY (run_id, seq)
    );
    CREATE TABLE bench_rows (
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        bytes INTEGER NOT NULL,
        time_us REAL,
        algbw_gbps REAL,
        busbw_gbps REAL,
        wrong INTEGER,
        FOREIGN KEY (run_id, seq) REFERENCES benchmarks (run_id, seq) ON DELETE CASCADE
    );
    CREATE INDEX bench_rows_run ON bench_rows (run_id, seq);
    CREATE TABLE baselines (
        inventory TEXT NOT NULL,
        playbook TEXT NOT NULL,
        run_id TEXT NOT NULL REFERENCES runs (id),
        pinned TEXT NOT NULL,
        PRIMARY KEY (inventory, playbook)
    );
    """,
)
SCHEMA_VERSION = len(_MIGRATIONS)


@dataclass(frozen=True)
class Band:
    """A message-size band: busbw is compared per band because each has its own bottleneck."""

    key: str  # stable, ASCII: JSON keys of the report trend
    label: str  # as people read it
    min_bytes: int
    max_bytes: int | None  # exclusive; None: no upper end

    def holds(self, size: int) -> bool:
        return size >= self.min_bytes and (self.max_bytes is None or size < self.max_bytes)


MIB = 1 << 20
BANDS = (
    Band("<1MiB", "<1MiB", 0, MIB),  # latency-bound
    Band("1-64MiB", "1–64MiB", MIB, 64 * MIB),
    Band(">=64MiB", "≥64MiB", 64 * MIB, None),  # bandwidth-bound
)


def default_db_path() -> Path:
    """Where the history lives unless ``--history`` says otherwise (per user, survives upgrades)."""
    return Path(platformdirs.user_data_dir("diagnose", appauthor=False)) / DEFAULT_DB_NAME


# ---------------------------------------------------------------------------------------------------------
# The database


@contextmanager
def _open(db_path: str | Path) -> Iterator[sqlite3.Connection]:
    path = Path(db_path)
    path.parent.mkdir(parents=True, exist_ok=True)
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
            f"BEGIN;\n{_MIGRATIONS[version - 1]}\nINSERT INTO schema_version VALUES ({version});\nCOMMIT;"
        )


def schema_version(db_path: str | Path) -> int:
    with _open(db_path) as conn:
        return int(conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0])


def _timestamp(text: Any) -> float | None:
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


def _counts(results: Mapping[str, Any]) -> dict[str, int]:
    counts = dict.fromkeys(STATUSES, 0)
    for item in [*results.get("checks", []), *results.get("benchmarks", [])]:
        status = item.get("status")
        if status in counts:
            counts[status] += 1
    return counts


def _series(run: Mapping[str, Any]) -> tuple[str, str]:
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
    inventory, playbook = _series(run)
    with _open(db_path) as conn:
        row = conn.execute(
            "SELECT started FROM runs WHERE inventory = ? AND playbook = ? AND id != ?"
            " ORDER BY started_ts DESC LIMIT 1",
            (inventory, playbook, str(run.get("id") or "")),
        ).fetchone()
    return str(row[0]) if row else None


def record_run(db_path: str | Path, results: Mapping[str, Any], run_dir: str | Path | None) -> None:
    """Store one complete results document (schema 1). Recording the same run id again replaces it."""
    run = results["run"]
    run_id = str(run["id"])
    inventory, playbook = _series(run)
    started_ts = _timestamp(run.get("started")) or time.time()
    with _open(db_path) as conn, conn:
        for table in ("bench_rows", "benchmarks", "checks", "hosts"):
            conn.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
        conn.execute(
            "INSERT INTO runs (id, started, started_ts, finished, verdict, inventory, playbook, profile,"
            " tool_version, run_dir, counts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (id) DO UPDATE SET started = excluded.started, started_ts = excluded.started_ts,"
            " finished = excluded.finished, verdict = excluded.verdict, inventory = excluded.inventory,"
            " playbook = excluded.playbook, profile = excluded.profile,"
            " tool_version = excluded.tool_version, run_dir = excluded.run_dir, counts = excluded.counts",
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
                json.dumps(_counts(results)),
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


def _load_results(conn: sqlite3.Connection, run_id: str) -> dict[str, Any]:
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
    for seq, collective, tool, nodes, ranks, status in conn.execute(
        "SELECT seq, collective, tool, nodes, ranks, status FROM benchmarks WHERE run_id = ? ORDER BY seq",
        (run_id,),
    ):
        benchmarks[seq] = {
            "collective": collective,
            "tool": tool,
            "nodes": nodes,
            "ranks": ranks,
            "status": status,
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
    """A run id, or an unambiguous prefix of one (ids are long; people type the start)."""
    rows = [r[0] for r in conn.execute("SELECT id FROM runs WHERE id = ?", (run_id,))]
    if not rows:
        pattern = run_id.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        rows = [r[0] for r in conn.execute("SELECT id FROM runs WHERE id LIKE ? ESCAPE '\\'", (pattern,))]
    if len(rows) == 1:
        return str(rows[0])
    if not rows:
        raise ConfigError(f"no run {run_id!r} in the history", db_path)
    raise ConfigError(f"run id {run_id!r} is ambiguous: {', '.join(sorted(rows)[:5])}", db_path)


def set_baseline(db_path: str | Path, run_id: str) -> str:
    """Pin a run as the baseline of its series (inventory + playbook); returns the full run id.

    Later runs of the series are compared with it, and runs older than it stop being references.
    """
    with _open(db_path) as conn:
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


def _references(conn: sqlite3.Connection, run: Mapping[str, Any]) -> list[Reference]:
    """The last good run (newest first) and the baseline of the run's series, without the run itself."""
    inventory, playbook = _series(run)
    run_id = str(run.get("id"))
    now_ts = _timestamp(run.get("started"))
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


def _last_good_ids(conn: sqlite3.Connection) -> set[str]:
    """The newest PASS run of every series: what retention must keep to have a reference."""
    rows = conn.execute(
        "SELECT id FROM runs r WHERE verdict = 'PASS' AND started_ts = (SELECT MAX(started_ts) FROM runs s"
        " WHERE s.inventory = r.inventory AND s.playbook = r.playbook AND s.verdict = 'PASS')"
    )
    return {r[0] for r in rows}


def _baseline_ids(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT run_id FROM baselines")}


# ---------------------------------------------------------------------------------------------------------
# Comparison (pure: results-shaped dicts in, regressions out)

BenchKey = tuple[str, str | None, int | None, int | None]  # collective, tool, nodes, ranks


@dataclass
class Snapshot:
    """What a comparison needs from a run: hosts' versions, check statuses, busbw per size."""

    hosts: dict[str, dict[str, Any]] = field(default_factory=dict)
    checks: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    busbw: dict[BenchKey, dict[int, float]] = field(default_factory=dict)


def snapshot(results: Mapping[str, Any]) -> Snapshot:
    """Reduce a results document to what a comparison reads.

    Several results of one check on one host fold into the worst. Benchmarks that could not run (ERROR)
    and rows with wrong results or no busbw carry no bandwidth.
    """
    snap = Snapshot()
    for host in results.get("hosts", []):
        snap.hosts[host["name"]] = dict(host.get("environment") or {})
    for check in results.get("checks", []):
        if check["id"].startswith("history."):
            continue
        key = (check["id"], check.get("host") or "")
        seen = snap.checks.get(key)
        if seen is None or SEVERITY.get(check["status"], 0) > SEVERITY.get(seen[0], 0):
            snap.checks[key] = (check["status"], str(check.get("message") or ""))
    for bench in results.get("benchmarks", []):
        if bench.get("status") != "ERROR":
            key = (bench["collective"], bench.get("tool"), bench.get("nodes"), bench.get("ranks"))
            snap.busbw.setdefault(key, {}).update(_busbw_by_size(bench))
    return snap


def _busbw_by_size(bench: Mapping[str, Any]) -> dict[int, float]:
    """The rows that measured something: a row with wrong results or without busbw carries no bandwidth."""
    sizes = {}
    for row in bench.get("rows", []):
        busbw = row.get("busbw_gbps")
        if isinstance(busbw, (int, float)) and not row.get("wrong"):
            sizes[int(row["bytes"])] = float(busbw)
    return sizes


@dataclass(frozen=True)
class Regression:
    """One finding: ``summary`` is the short form for the cron line, ``result`` the results.json row."""

    kind: str  # check | host | version | busbw
    summary: str
    result: CheckResult


def _since(ref: Reference) -> str:
    return f"run {ref.run_id} ({ref.role}, {ref.started})"


def _evidence_hint(ref: Reference) -> str:
    return f" The reference run's evidence is in {ref.run_dir}." if ref.run_dir else ""


def _check_regressions(ref_snap: Snapshot, ref: Reference, cur: Snapshot) -> list[Regression]:
    found = []
    for (check_id, host), (status, message) in sorted(cur.checks.items()):
        before = ref_snap.checks.get((check_id, host))
        if status != "FAIL" or before is None or before[0] not in ("PASS", "WARN"):
            continue
        where = host or "cluster"
        found.append(
            Regression(
                "check",
                f"{where} {check_id} {before[0]}→FAIL",
                CheckResult(
                    id=REGRESSION_ID,
                    host=host or None,
                    checklist="–",
                    status="FAIL",
                    observed="FAIL",
                    expected=f"{before[0]} (run {ref.run_id})",
                    message=f"{check_id} on {where} went {before[0]}→FAIL since {_since(ref)}: {message}",
                    remediation=f"See the {check_id} result of this run for the cause.{_evidence_hint(ref)}",
                ),
            )
        )
    return found


def _host_regressions(ref_snap: Snapshot, ref: Reference, cur: Snapshot) -> list[Regression]:
    return [
        Regression(
            "host",
            f"{name} disappeared",
            CheckResult(
                id=REGRESSION_ID,
                host=name,
                checklist="–",
                status="FAIL",
                observed="absent from this run",
                expected=f"present (run {ref.run_id})",
                message=f"{name} was checked in {_since(ref)} and is not part of this run",
                remediation=(
                    "Put the host back in the inventory (or drop the --limit that excluded it). If it left "
                    "the cluster on purpose, pin this run as the new baseline: diagnose baseline RUN_ID."
                ),
            ),
        )
        for name in sorted(set(ref_snap.hosts) - set(cur.hosts))
    ]


def _version_regressions(ref_snap: Snapshot, ref: Reference, cur: Snapshot) -> list[Regression]:
    found = []
    for name in VERSION_FIELDS:
        changes: dict[tuple[str, str], list[str]] = {}
        for host, env in sorted(cur.hosts.items()):
            old = ref_snap.hosts.get(host, {}).get(name)
            new = env.get(name)
            if old and new and str(old) != str(new):
                changes.setdefault((str(old), str(new)), []).append(host)
        if not changes:
            continue
        now_values = {str(env[name]) for env in cur.hosts.values() if env.get(name)}
        consistent = len(now_values) == 1
        compared = sum(1 for h in cur.hosts if cur.hosts[h].get(name) and ref_snap.hosts.get(h, {}).get(name))
        for (old, new), hosts in sorted(changes.items()):
            shown = ", ".join(hosts[:5]) + (f", +{len(hosts) - 5} more" if len(hosts) > 5 else "")
            where = hosts[0] if len(hosts) == 1 else f"{len(hosts)} hosts"
            state = (
                "every host now agrees"
                if consistent
                else f"hosts now disagree: {', '.join(sorted(now_values))}"
            )
            found.append(
                Regression(
                    "version",
                    f"{name} {old}→{new} on {where}",
                    CheckResult(
                        id=REGRESSION_ID,
                        host=hosts[0] if len(hosts) == 1 else None,
                        checklist="3",
                        status="WARN" if consistent else "FAIL",
                        observed=new,
                        expected=f"{old} (run {ref.run_id})",
                        message=(
                            f"{name} changed {old} → {new} on {len(hosts)} of {compared} hosts ({shown}) "
                            f"since {_since(ref)}; {state}"
                        ),
                        remediation=(
                            f"If the {name} change was planned, finish it on every host and pin a run of the "
                            "new state as baseline (diagnose baseline RUN_ID); if not, find what changed it."
                        ),
                    ),
                )
            )
    return found


def _band_medians(
    cur: dict[int, float], ref: dict[int, float], band: Band
) -> tuple[float, float, int] | None:
    """Median busbw of both runs over the sizes both measured in the band (busbw rises with size, so
    medians over different size sets would compare sweeps, not the fabric)."""
    sizes = sorted(s for s in cur if s in ref and band.holds(s))
    if not sizes:
        return None
    return statistics.median(cur[s] for s in sizes), statistics.median(ref[s] for s in sizes), len(sizes)


def _busbw_regressions(
    ref_snap: Snapshot, ref: Reference, cur: Snapshot, drop_pct: float
) -> dict[tuple[BenchKey, str], Regression]:
    found = {}
    factor = 1.0 - drop_pct / 100.0
    for key, sizes in sorted(cur.busbw.items(), key=lambda item: str(item[0])):
        ref_sizes = ref_snap.busbw.get(key)
        if not ref_sizes:
            continue  # another node or rank count: a lost host is reported as such, not as a slowdown
        collective, tool, nodes, ranks = key
        for band in BANDS:
            medians = _band_medians(sizes, ref_sizes, band)
            if medians is None:
                continue
            now, before, count = medians
            if before <= 0 or now >= factor * before:
                continue
            change = (now / before - 1.0) * 100.0
            found[(key, band.key)] = Regression(
                "busbw",
                f"{collective} {band.label} busbw {change:+.0f}%",
                CheckResult(
                    id=REGRESSION_ID,
                    host=None,
                    checklist="3",
                    status="FAIL",
                    observed=f"{now:.1f} GB/s",
                    expected=f"≥ {factor:g} × {before:.1f} GB/s (run {ref.run_id})",
                    message=(
                        f"{collective} busbw in the {band.label} band (median of {count} sizes, {nodes} nodes, "
                        f"{ranks} ranks, {tool}) is {now:.1f} GB/s, {change:+.0f}% against {before:.1f} GB/s "
                        f"in {_since(ref)}"
                    ),
                    remediation=(
                        "Compare the transport NCCL chose with the reference run (nccl.transport), look for "
                        "version changes, and run the acceptance playbook with straggler isolation to find "
                        "the slow host or link."
                    ),
                ),
            )
    return found


def compare(
    references: list[tuple[Reference, Snapshot]], current: Snapshot, drop_pct: float
) -> list[Regression]:
    """All regressions of ``current`` against the references (newest first), worst first.

    State changes (checks, hosts, versions) are judged against the newest reference only: an older one
    would report the same change again every night. Bandwidth is judged against each, so the baseline
    catches a slow drift that no single night-to-night step shows; one finding per collective and band.
    """
    if not references:
        return []
    ref, ref_snap = references[0]
    found = _check_regressions(ref_snap, ref, current)
    found += _host_regressions(ref_snap, ref, current)
    found += _version_regressions(ref_snap, ref, current)
    busbw: dict[tuple[BenchKey, str], Regression] = {}
    for ref, ref_snap in references:
        for key, regression in _busbw_regressions(ref_snap, ref, current, drop_pct).items():
            busbw.setdefault(key, regression)
    found += list(busbw.values())
    return sorted(found, key=lambda r: -SEVERITY[r.result.status])


def regressions(
    db_path: str | Path, results: Mapping[str, Any], busbw_drop_pct: float = DEFAULT_BUSBW_DROP_PCT
) -> list[Regression]:
    """The run's regressions against the last good run and the pinned baseline of its series.

    Call with the complete results document, before ``record_run`` or after (the run itself is never its
    own reference). Empty when the series has no reference yet.
    """
    with _open(db_path) as conn:
        refs = [(ref, snapshot(_load_results(conn, ref.run_id))) for ref in _references(conn, results["run"])]
    return compare(refs, snapshot(results), busbw_drop_pct)


# ---------------------------------------------------------------------------------------------------------
# Retention


@dataclass(frozen=True)
class PrunedRun:
    run_id: str
    run_dir: str | None


def prune(
    db_path: str | Path,
    results: Mapping[str, Any],
    keep_runs: int | None,
    keep_days: float | None,
    now: datetime | None = None,
) -> list[PrunedRun]:
    """Forget old runs of this run's series: beyond the newest ``keep_runs``, or older than ``keep_days``.

    Each limit applies on its own (None: no limit). The current run, the pinned baseline and the last good
    run are always kept: without them the next night has nothing to compare with. Other series are left
    alone — their retention is their own playbook's business.
    """
    run = results["run"]
    inventory, playbook = _series(run)
    cutoff = (
        ((now or datetime.now(timezone.utc)) - timedelta(days=keep_days)).timestamp() if keep_days else None
    )
    with _open(db_path) as conn:
        keep = _baseline_ids(conn) | _last_good_ids(conn) | {str(run["id"])}
        rows = conn.execute(
            "SELECT id, run_dir, started_ts FROM runs WHERE inventory = ? AND playbook = ?"
            " ORDER BY started_ts DESC",
            (inventory, playbook),
        ).fetchall()
        doomed = [
            PrunedRun(run_id, run_dir)
            for index, (run_id, run_dir, started_ts) in enumerate(rows)
            if run_id not in keep
            and (
                (keep_runs is not None and index >= keep_runs) or (cutoff is not None and started_ts < cutoff)
            )
        ]
        with conn:
            conn.executemany("DELETE FROM runs WHERE id = ?", [(p.run_id,) for p in doomed])
    return doomed


def protected_run_dirs(db_path: str | Path) -> set[Path]:
    """Folders of pinned baselines and last good runs: folder retention must never delete them."""
    with _open(db_path) as conn:
        ids = sorted(_baseline_ids(conn) | _last_good_ids(conn))
        rows = conn.execute(
            f"SELECT run_dir FROM runs WHERE run_dir IS NOT NULL AND id IN ({','.join('?' * len(ids))})", ids
        ).fetchall()
    return {Path(r[0]) for r in rows}


# ---------------------------------------------------------------------------------------------------------
# Trends: terminal tables and the report's data


def _table(headers: list[str], rows: Iterable[list[str]]) -> str:
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
    """The newest runs, newest first, with verdict, counts and which run is a reference."""
    with _open(db_path) as conn:
        baselines, last_good = _baseline_ids(conn), _last_good_ids(conn)
        rows = conn.execute(
            "SELECT id, started, verdict, counts, playbook, inventory,"
            " (SELECT COUNT(*) FROM hosts h WHERE h.run_id = r.id) FROM runs r"
            " ORDER BY started_ts DESC LIMIT ?",
            (limit,),
        ).fetchall()
    if not rows:
        return f"no runs recorded in {db_path}"
    table = []
    for run_id, started, verdict, counts_json, playbook, inventory, hosts in rows:
        counts = json.loads(counts_json)
        marks = [m for m, ids in (("baseline", baselines), ("last good", last_good)) if run_id in ids]
        table.append(
            [
                run_id,
                started,
                verdict,
                str(counts.get("FAIL", 0)),
                str(counts.get("ERROR", 0)),
                str(counts.get("WARN", 0)),
                str(hosts),
                playbook,
                inventory,
                ", ".join(marks),
            ]
        )
    headers = ["run", "started", "verdict", "FAIL", "ERROR", "WARN", "hosts", "playbook", "inventory", "note"]
    return _table(headers, table)


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
        return f"{check_id} on {host}\n" + _table(["started", "run", "status", "observed", "message"], table)
    return f"{check_id}\n" + _table(["started", "run", *STATUSES, "not passing"], table)


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
                f"{nodes}×{ranks}" if ranks else "",
                *("" if m is None else f"{m:.1f}" for m in medians),
                "" if peak is None else f"{peak:.1f}",
                str(status or ""),
            ]
        )
    headers = ["started", "run", "tool", "nodes×ranks", *(b.label for b in BANDS), "peak", "status"]
    return f"{collective} busbw (GB/s, median per size band)\n" + _table(headers, table)


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
    with _open(db_path) as conn:
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
    inventory, playbook = _series(run)
    with _open(db_path) as conn:
        refs = _references(conn, run)
        past = conn.execute(
            "SELECT id, started, verdict, counts FROM runs WHERE inventory = ? AND playbook = ? AND id != ?"
            " ORDER BY started_ts DESC LIMIT ?",
            (inventory, playbook, run_id, max(limit - 1, 0)),
        ).fetchall()[::-1]
        collectives = sorted({b["collective"] for b in results.get("benchmarks", [])})
        if past:
            marks = ",".join("?" * len(past))
            collectives = sorted(
                set(collectives)
                | {
                    r[0]
                    for r in conn.execute(
                        f"SELECT DISTINCT collective FROM benchmarks WHERE run_id IN ({marks})",
                        [p[0] for p in past],
                    )
                }
            )
        past_busbw = {(p[0], c): _run_busbw(conn, p[0], c)[1] for p in past for c in collectives}
    current_busbw: dict[str, dict[int, float]] = {}
    for collective in collectives:
        benches = [b for b in results.get("benchmarks", []) if b["collective"] == collective]
        if benches:
            widest = max(benches, key=lambda b: b.get("ranks") or 0)
            current_busbw[collective] = _busbw_by_size(widest)
    runs = [{"id": p[0], "started": p[1], "verdict": p[2], "counts": json.loads(p[3])} for p in past]
    runs.append(
        {
            "id": run_id,
            "started": run.get("started"),
            "verdict": results.get("verdict"),
            "counts": _counts(results),
        }
    )
    busbw: dict[str, dict[str, list[float | None]]] = {}
    for collective in collectives:
        series_sizes = [past_busbw[(p[0], collective)] for p in past] + [current_busbw.get(collective, {})]
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
