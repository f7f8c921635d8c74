"""The campaign ledger in the history database: what each run proved about each host, and what undid it.

For every host and phase the ledger keeps the latest evidence (run id, time, verdict, the words that explain
it) and the hardware identity it was measured on. Recording a run (:func:`record_run`) first compares the
host's identity with the one known before: a replaced GPU, HCA or cable, new firmware, driver or NCCL voids
the earlier evidence of the phases that change touches (diagnose.campaign.phases.VOIDS), and so does a part
the watch list named. Then the run's own evidence replaces the host's older evidence phase by phase; a failure
also voids the passes its part's kind touched. Every such change is an event, and a voided row keeps the
event's id, so the ledger says which event voided which evidence.

Identities are stored once per distinct content (a cluster of identical nodes still has one per host, but a
host re-tested forty times keeps one). The tables are created by the history database's schema 5.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from diagnose.campaign import identity as ident
from diagnose.campaign import phases as ph
from diagnose.campaign.evidence import RunEvidence, run_evidence
from diagnose.core.errors import ConfigError
from diagnose.history.storage import create_db, open_db

_PASSED = ("PASS", "WARN", "SKIP")
#: Hosts (or collectives) that must have passed a figure before it becomes the cluster's reference.
REFERENCE_HOSTS = 8


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Event:
    id: int
    at: str
    host: str | None
    kind: str  # failed, retested, replaced, changed, watch, voided, repaired, excluded, included, reference
    run_id: str | None
    text: str


@dataclass(frozen=True)
class Row:
    """The latest evidence of one host in one phase."""

    host: str
    phase: str
    run_id: str
    at: str
    verdict: str
    detail_json: str  # decoded on demand: a status of 16,384 hosts reads the words of its failures only
    voided: int | None  # the id of the event that voided it

    @property
    def passed(self) -> bool:
        return self.verdict in _PASSED

    @property
    def detail(self) -> dict[str, Any]:
        value = json.loads(self.detail_json)
        return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class ClusterRow:
    phase: str
    run_id: str
    at: str
    verdict: str
    hosts: tuple[str, ...]
    detail: str
    voided: int | None


@dataclass
class Ledger:
    """One campaign as stored: enough for its status; the certificate asks for more (:func:`load_full`)."""

    name: str
    created: str
    playbook: str | None
    inventory: str | None
    needs: ph.Needs
    settings: dict[str, Any]
    hosts: dict[str, dict[str, Any]]  # host -> {"excluded": {...} | None, "repaired": {...} | None}
    rows: dict[str, dict[str, Row]]  # host -> phase -> row
    cluster: dict[str, ClusterRow]
    voiding: dict[int, str]  # event id -> its words, for the events that voided a row
    runs: int
    first_run: str | None
    last_run: str | None
    identities: dict[str, dict[str, Any]] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    burnin: dict[str, dict[str, float]] = field(default_factory=dict)
    reference: list[dict[str, Any]] = field(default_factory=list)
    run_list: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Recorded:
    """What recording one run changed, for the run's closing lines."""

    campaign: str
    run_id: str
    events: list[Event] = field(default_factory=list)


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


class Writer:
    """One recording, inside one transaction."""

    def __init__(self, conn: sqlite3.Connection, name: str, run_id: str | None, at: str) -> None:
        self.conn, self.name, self.run_id, self.at = conn, name, run_id, at
        self.events: list[Event] = []

    def event(self, host: str | None, kind: str, text: str, phases: Iterable[str] = ()) -> int:
        listed = ph.ordered(phases)
        cursor = self.conn.execute(
            "INSERT INTO campaign_events (campaign, at, host, kind, run_id, text, phases) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (self.name, self.at, host, kind, self.run_id, text, dumps(listed) if listed else None),
        )
        event_id = int(cursor.lastrowid or 0)
        self.events.append(Event(event_id, self.at, host, kind, self.run_id, text))
        return event_id

    def void(self, host: str, phases: Iterable[str], event_id: int, cluster: Iterable[str] = ()) -> list[str]:
        """Void the host's standing passes of ``phases`` (older than this run) and the cluster phases it
        took part in; returns the phases voided."""
        wanted = list(phases)
        voided = []
        for phase in wanted:
            cursor = self.conn.execute(
                "UPDATE campaign_evidence SET voided = ? WHERE campaign = ? AND host = ? AND phase = ?"
                " AND voided IS NULL AND verdict IN ('PASS', 'WARN', 'SKIP') AND run_id != ?",
                (event_id, self.name, host, phase, self.run_id or ""),
            )
            if cursor.rowcount:
                voided.append(phase)
        for phase in cluster:
            row = self.conn.execute(
                "SELECT hosts FROM campaign_cluster WHERE campaign = ? AND phase = ? AND voided IS NULL"
                " AND run_id != ?",
                (self.name, phase, self.run_id or ""),
            ).fetchone()
            if row and host in json.loads(row[0]):
                self.conn.execute(
                    "UPDATE campaign_cluster SET voided = ? WHERE campaign = ? AND phase = ?",
                    (event_id, self.name, phase),
                )
                voided.append(phase)
        if voided:
            self.conn.execute(
                "UPDATE campaign_events SET phases = ? WHERE id = ?", (dumps(ph.ordered(voided)), event_id)
            )
        return voided

    def identity_id(self, identity: Mapping[str, Any]) -> int:
        text = dumps(identity)
        digest = hashlib.sha256(text.encode()).hexdigest()
        self.conn.execute(
            "INSERT OR IGNORE INTO campaign_identities (campaign, digest, identity) VALUES (?, ?, ?)",
            (self.name, digest, text),
        )
        return int(
            self.conn.execute(
                "SELECT id FROM campaign_identities WHERE campaign = ? AND digest = ?", (self.name, digest)
            ).fetchone()[0]
        )


def _campaign_row(conn: sqlite3.Connection, name: str) -> tuple[Any, ...] | None:
    return conn.execute(
        "SELECT name, created, playbook, inventory, needs, settings FROM campaigns WHERE name = ?", (name,)
    ).fetchone()


def ensure_campaign(
    conn: sqlite3.Connection, name: str, needs: ph.Needs, playbook: str | None, inventory: str | None
) -> None:
    """Create the campaign on first use; a later run keeps what the first one set."""
    if _campaign_row(conn, name) is None:
        conn.execute(
            "INSERT INTO campaigns (name, created, playbook, inventory, needs, settings) VALUES (?, ?, ?, ?, ?, ?)",
            (name, now_iso(), playbook, inventory, dumps(needs.to_dict()), "{}"),
        )


def check_name(name: str) -> str:
    """A campaign name is what an operator types: letters, digits and ``-_.``, up to 64 characters."""
    if not name or len(name) > 64 or not all(c.isalnum() or c in "-_." for c in name):
        raise ConfigError(f"--campaign {name!r}: use letters, digits, '-', '_' and '.' (at most 64)")
    return name


def _host_identity(conn: sqlite3.Connection, name: str, host: str) -> tuple[dict[str, Any] | None, bool]:
    """The identity known for ``host`` and whether the host is in the campaign yet."""
    row = conn.execute(
        "SELECT i.identity FROM campaign_hosts h LEFT JOIN campaign_identities i ON i.id = h.identity"
        " WHERE h.campaign = ? AND h.host = ?",
        (name, host),
    ).fetchone()
    if row is None:
        return None, False
    return (json.loads(row[0]) if row[0] else None), True


def _failed_phases(conn: sqlite3.Connection, name: str, host: str) -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT phase FROM campaign_evidence WHERE campaign = ? AND host = ? AND verdict IN ('FAIL', 'ERROR')",
            (name, host),
        )
    ]


def _component_kind(component: str) -> str:
    if component.startswith("gpu:"):
        return "gpu"
    return "cable" if component.startswith("cable:") else "hca"


def _record_host(writer: Writer, ev: RunEvidence, host: str) -> None:
    conn, name = writer.conn, writer.name
    before, known = _host_identity(conn, name, host)
    now = ev.identities.get(host) or {}
    if not known:
        conn.execute("INSERT INTO campaign_hosts (campaign, host) VALUES (?, ?)", (name, host))
    failed_before = _failed_phases(conn, name, host)
    for change in ident.changes(before, now):
        kind = "replaced" if change.kind in ("gpu", "hca", "cable") else "changed"
        event = writer.event(host, kind, change.text())
        writer.void(host, ph.VOIDS[change.kind], event, ph.CLUSTER_VOIDS[change.kind])
        if failed_before and kind == "replaced":
            conn.execute(
                "UPDATE campaign_hosts SET repaired = ? WHERE campaign = ? AND host = ?",
                (dumps({"at": writer.at, "by": "part replaced", "note": change.text()}), name, host),
            )
    for component in ev.watched.get(host, []):
        kind = _component_kind(component)
        event = writer.event(host, "watch", f"the watch list names {component} as getting worse")
        writer.void(host, ph.VOIDS[kind], event, ph.CLUSTER_VOIDS[kind])
    identity_id = writer.identity_id(ident.merged(before, now)) if (before or now) else None
    if identity_id is not None:
        conn.execute(
            "UPDATE campaign_hosts SET identity = ? WHERE campaign = ? AND host = ?",
            (identity_id, name, host),
        )
    for phase in ph.HOST_PHASES:
        found = ev.evidence.get(host, {}).get(phase)
        if found is None:
            continue
        if not found.passed:
            words = f"{ph.WORDS[phase]} {found.verdict}: {found.message}"
            event = writer.event(host, "failed", words, [phase])
            kind = ph.failure_kind(found.check or "")
            if kind is not None:
                others = [p for p in ph.VOIDS[kind] if p != phase]
                writer.void(host, others, event)
        elif phase in failed_before:
            writer.event(host, "retested", f"{ph.WORDS[phase]} passed after its failure", [phase])
        conn.execute(
            "INSERT OR REPLACE INTO campaign_evidence VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL)",
            (name, host, phase, ev.run_id, ev.started, found.verdict, dumps(found.to_dict()), identity_id),
        )


def _record_cluster(writer: Writer, ev: RunEvidence) -> None:
    """The largest collective stands as the full-scale one (a batch's smaller one does not replace it,
    a voided or failed one is replaced by any), the training probe's latest result as the reference run."""
    for run in ev.cluster:
        if run.phase == ph.FULL_SCALE and len(run.hosts) < 2:
            continue
        old = writer.conn.execute(
            "SELECT hosts, verdict, voided, run_id FROM campaign_cluster WHERE campaign = ? AND phase = ?",
            (writer.name, run.phase),
        ).fetchone()
        if run.phase == ph.FULL_SCALE and old is not None:
            old_hosts, old_verdict, old_voided, old_run = json.loads(old[0]), old[1], old[2], old[3]
            standing = old_voided is None and old_verdict in _PASSED
            if old_run == ev.run_id and run.verdict in _PASSED and old_verdict not in _PASSED:
                continue  # one run's failed collective is not undone by its next collective's pass
            if standing and len(run.hosts) < len(old_hosts):
                continue
        writer.conn.execute(
            "INSERT OR REPLACE INTO campaign_cluster VALUES (?, ?, ?, ?, ?, ?, ?, NULL)",
            (writer.name, run.phase, ev.run_id, ev.started, run.verdict, dumps(list(run.hosts)), run.detail),
        )


def _record_burnin(writer: Writer, ev: RunEvidence) -> None:
    """Burn-in hours add up per GPU slot; a GPU with another serial in the slot starts from zero."""
    for host, gpus in ev.burnin_hours.items():
        parts = (ev.identities.get(host) or {}).get("gpus") or {}
        for gpu, hours in gpus.items():
            part = parts.get(gpu.upper())
            row = writer.conn.execute(
                "SELECT part, hours FROM campaign_burnin WHERE campaign = ? AND host = ? AND gpu = ?",
                (writer.name, host, gpu),
            ).fetchone()
            total = hours
            if row is not None and (row[0] == part or not row[0] or not part):
                total += float(row[1])
            writer.conn.execute(
                "INSERT OR REPLACE INTO campaign_burnin VALUES (?, ?, ?, ?, ?)",
                (writer.name, host, gpu, part or (row[0] if row else None), total),
            )


def _record_reference(writer: Writer, ev: RunEvidence) -> None:
    """Keep each passed figure; once enough hosts gave one (``REFERENCE_HOSTS``, or every host of a smaller
    campaign), its median becomes the cluster's reference, recorded once with the run that completed it."""
    conn, name = writer.conn, writer.name
    for key, values in ev.figures.items():
        conn.executemany(
            "INSERT OR REPLACE INTO campaign_figures VALUES (?, ?, ?, ?, ?, ?)",
            [(name, key, source, value, ev.run_id, ev.started) for source, value in values],
        )
    hosts = conn.execute(
        "SELECT COUNT(*) FROM campaign_hosts WHERE campaign = ? AND excluded IS NULL", (name,)
    ).fetchone()[0]
    enough = max(1, min(REFERENCE_HOSTS, int(hosts)))
    for key in sorted(ev.figures):
        if conn.execute(
            "SELECT 1 FROM campaign_reference WHERE campaign = ? AND key = ?", (name, key)
        ).fetchone():
            continue
        rows = conn.execute(
            "SELECT source, value FROM campaign_figures WHERE campaign = ? AND key = ?", (name, key)
        ).fetchall()
        if key.startswith("busbw|"):  # a collective's source is its hosts, comma-separated
            covered = {h for source, _ in rows for h in str(source).split(",")}
        else:  # one GPU's or NIC's: "host bus-id", "host mlx5_0"
            covered = {str(source).split(" ")[0] for source, _ in rows}
        if len(covered) < enough:
            continue
        values = sorted(float(v) for _, v in rows)
        middle = len(values) // 2
        median = values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2
        conn.execute(
            "INSERT INTO campaign_reference VALUES (?, ?, ?, ?, ?, ?)",
            (name, key, round(median, 3), len(covered), ev.run_id, ev.started),
        )
        writer.event(None, "reference", f"{key.replace('|', ' ')}: {median:.4g} from {len(covered)} hosts")


def record_run(
    db_path: str | Path,
    name: str,
    results: Mapping[str, Any],
    needs: ph.Needs | None = None,
    kind: str = "run",
) -> Recorded:
    """Record one finished (or interrupted) run into campaign ``name``, creating it on first use with
    ``needs`` (default: every phase). Recording the same run again changes nothing."""
    ev = run_evidence(results)
    run = results.get("run") or {}
    create_db(db_path)
    with open_db(db_path) as conn, conn:
        ensure_campaign(
            conn,
            name,
            needs or ph.Needs(ph.HOST_PHASES, ph.CLUSTER_PHASES),
            run.get("playbook"),
            run.get("inventory"),
        )
        if conn.execute(
            "SELECT 1 FROM campaign_runs WHERE campaign = ? AND run_id = ?", (name, ev.run_id)
        ).fetchone():
            return Recorded(name, ev.run_id)
        writer = Writer(conn, name, ev.run_id, ev.started or now_iso())
        for host in ev.hosts:
            _record_host(writer, ev, host)
        _record_cluster(writer, ev)
        _record_burnin(writer, ev)
        _record_reference(writer, ev)
        conn.execute(
            "INSERT INTO campaign_runs VALUES (?, ?, ?, ?, ?, ?)",
            (name, ev.run_id, ev.started, ev.verdict, len(ev.hosts), kind),
        )
    return Recorded(name, ev.run_id, writer.events)


def require_campaign(conn: sqlite3.Connection, name: str, db_path: str | Path) -> tuple[Any, ...]:
    row = _campaign_row(conn, name)
    if row is None:
        known = [r[0] for r in conn.execute("SELECT name FROM campaigns ORDER BY name")]
        hint = (
            f"; campaigns here: {', '.join(known)}"
            if known
            else "; `diagnose run --campaign NAME` starts one"
        )
        raise ConfigError(f"no campaign {name!r} in the history{hint}", db_path)
    return row


def campaign_names(db_path: str | Path) -> list[str]:
    if not Path(db_path).is_file():
        return []
    with open_db(db_path) as conn:
        return [r[0] for r in conn.execute("SELECT name FROM campaigns ORDER BY name")]


def load(db_path: str | Path, name: str, full: bool = False) -> Ledger:
    """The campaign as stored; ``full`` adds identities, every event, burn-in hours, the reference and the
    runs (what the certificate needs)."""
    with open_db(db_path) as conn:
        row = require_campaign(conn, name, db_path)
        hosts = {
            h: {"excluded": json.loads(e) if e else None, "repaired": json.loads(r) if r else None}
            for h, e, r in conn.execute(
                "SELECT host, excluded, repaired FROM campaign_hosts WHERE campaign = ?", (name,)
            )
        }
        rows: dict[str, dict[str, Row]] = {}
        for host, phase, run_id, at, verdict, detail, voided in conn.execute(
            "SELECT host, phase, run_id, at, verdict, detail, voided FROM campaign_evidence WHERE campaign = ?",
            (name,),
        ):
            rows.setdefault(host, {})[phase] = Row(host, phase, run_id, at, verdict, detail, voided)
        cluster = {
            phase: ClusterRow(phase, run_id, at, verdict, tuple(json.loads(hosts_text)), detail, voided)
            for phase, run_id, at, verdict, hosts_text, detail, voided in conn.execute(
                "SELECT phase, run_id, at, verdict, hosts, detail, voided FROM campaign_cluster WHERE campaign = ?",
                (name,),
            )
        }
        voiding = {
            int(i): f"{text} (run {run_id}, {at[:10]})" if run_id else f"{text} ({at[:10]})"
            for i, text, run_id, at in conn.execute(
                "SELECT id, text, run_id, at FROM campaign_events WHERE campaign = ? AND id IN"
                " (SELECT voided FROM campaign_evidence WHERE campaign = ? AND voided IS NOT NULL"
                " UNION SELECT voided FROM campaign_cluster WHERE campaign = ? AND voided IS NOT NULL)",
                (name, name, name),
            )
        }
        runs, first, last = conn.execute(
            "SELECT COUNT(*), MIN(started), MAX(started) FROM campaign_runs WHERE campaign = ?", (name,)
        ).fetchone()
        ledger = Ledger(
            name=row[0],
            created=row[1],
            playbook=row[2],
            inventory=row[3],
            needs=ph.Needs.of(json.loads(row[4])),
            settings=json.loads(row[5] or "{}"),
            hosts=hosts,
            rows=rows,
            cluster=cluster,
            voiding=voiding,
            runs=int(runs),
            first_run=first,
            last_run=last,
        )
        if full:
            _load_full(conn, ledger)
    return ledger


def _load_full(conn: sqlite3.Connection, ledger: Ledger) -> None:
    name = ledger.name
    ledger.identities = {
        host: json.loads(text)
        for host, text in conn.execute(
            "SELECT h.host, i.identity FROM campaign_hosts h JOIN campaign_identities i ON i.id = h.identity"
            " WHERE h.campaign = ?",
            (name,),
        )
    }
    ledger.events = [
        Event(int(i), at, host, kind, run_id, text)
        for i, at, host, kind, run_id, text in conn.execute(
            "SELECT id, at, host, kind, run_id, text FROM campaign_events WHERE campaign = ? ORDER BY id",
            (name,),
        )
    ]
    for host, gpu, hours in conn.execute(
        "SELECT host, gpu, hours FROM campaign_burnin WHERE campaign = ?", (name,)
    ):
        ledger.burnin.setdefault(host, {})[gpu] = float(hours)
    ledger.reference = _reference_rows(conn, name)
    ledger.run_list = [
        {"run_id": run_id, "started": started, "verdict": verdict, "hosts": hosts, "kind": kind}
        for run_id, started, verdict, hosts, kind in conn.execute(
            "SELECT run_id, started, verdict, hosts, kind FROM campaign_runs WHERE campaign = ? ORDER BY started",
            (name,),
        )
    ]


def reference(db_path: str | Path, name: str) -> list[dict[str, Any]]:
    """The cluster's own reference figures, each with the run that completed it (empty: none yet)."""
    if not Path(db_path).is_file():
        return []
    with open_db(db_path) as conn:
        if _campaign_row(conn, name) is None:
            return []
        return _reference_rows(conn, name)


def _reference_rows(conn: sqlite3.Connection, name: str) -> list[dict[str, Any]]:
    return [
        {"key": key, "value": value, "hosts": sources, "run_id": run_id, "at": at}
        for key, value, sources, run_id, at in conn.execute(
            "SELECT key, value, sources, run_id, at FROM campaign_reference WHERE campaign = ? ORDER BY key",
            (name,),
        )
    ]
