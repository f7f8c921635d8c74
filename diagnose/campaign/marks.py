"""What is written into a campaign besides runs: the inventory's hosts, exclusions, repairs, settings and
the soak's finished rounds. Each is an event in the ledger's history, with who and when."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from diagnose.campaign.ledger import Event, Writer, dumps, now_iso, require_campaign
from diagnose.core.errors import ConfigError
from diagnose.history.storage import open_db


def add_hosts(db_path: str | Path, name: str, hosts: Sequence[str]) -> None:
    """Make the inventory's hosts known to the campaign before any run measured them (all pending)."""
    with open_db(db_path) as conn, conn:
        require_campaign(conn, name, db_path)
        conn.executemany(
            "INSERT OR IGNORE INTO campaign_hosts (campaign, host) VALUES (?, ?)", [(name, h) for h in hosts]
        )


def _mark(
    db_path: str | Path, name: str, host: str, column: str, value: dict[str, Any] | None, kind: str, text: str
) -> Event:
    with open_db(db_path) as conn, conn:
        require_campaign(conn, name, db_path)
        if not conn.execute(
            "SELECT 1 FROM campaign_hosts WHERE campaign = ? AND host = ?", (name, host)
        ).fetchone():
            raise ConfigError(f"campaign {name!r} has no host {host!r}", db_path)
        conn.execute(
            f"UPDATE campaign_hosts SET {column} = ? WHERE campaign = ? AND host = ?",
            (dumps(value) if value is not None else None, name, host),
        )
        writer = Writer(conn, name, None, str((value or {}).get("at") or now_iso()))
        writer.event(host, kind, text)
    return writer.events[0]


def exclude(db_path: str | Path, name: str, host: str, reason: str, by: str) -> Event:
    """Leave a host out of the sign-off, with the reason and who decided; it no longer counts as pending."""
    if not reason.strip():
        raise ConfigError("campaign exclude: --reason must say why the host is left out")
    at = now_iso()
    return _mark(
        db_path,
        name,
        host,
        "excluded",
        {"reason": reason, "by": by, "at": at},
        "excluded",
        f"left out by {by}: {reason}",
    )


def include(db_path: str | Path, name: str, host: str, by: str) -> Event:
    return _mark(db_path, name, host, "excluded", None, "included", f"taken back in by {by}")


def repaired(db_path: str | Path, name: str, host: str, note: str, by: str) -> Event:
    """The operator's word that a failed host was repaired: it is retested first, its failure stays in
    the history."""
    at = now_iso()
    text = f"repaired ({by}): {note}" if note else f"repaired ({by})"
    return _mark(db_path, name, host, "repaired", {"at": at, "by": by, "note": note}, "repaired", text)


def save_settings(db_path: str | Path, name: str, settings: Mapping[str, Any]) -> None:
    with open_db(db_path) as conn, conn:
        row = require_campaign(conn, name, db_path)
        merged = {**json.loads(row[5] or "{}"), **settings}
        conn.execute("UPDATE campaigns SET settings = ? WHERE name = ?", (dumps(merged), name))


def soak_rounds(db_path: str | Path, name: str) -> list[dict[str, Any]]:
    """The soak's finished rounds, first to last."""
    with open_db(db_path) as conn:
        return [
            {"round": r, "run_id": run_id, "started": started, "verdict": verdict, "hosts": json.loads(hosts)}
            for r, run_id, started, verdict, hosts in conn.execute(
                "SELECT round, run_id, started, verdict, hosts FROM campaign_soak WHERE campaign = ? ORDER BY round",
                (name,),
            )
        ]


def record_soak_round(db_path: str | Path, name: str, number: int, results: Mapping[str, Any]) -> None:
    run = results.get("run") or {}
    hosts = [h["name"] for h in results.get("hosts") or []]
    with open_db(db_path) as conn, conn:
        conn.execute(
            "INSERT OR REPLACE INTO campaign_soak VALUES (?, ?, ?, ?, ?, ?)",
            (
                name,
                number,
                str(run.get("id")),
                str(run.get("started") or ""),
                str(results.get("verdict")),
                dumps(hosts),
            ),
        )
