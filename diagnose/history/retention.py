"""Retention: forgetting old runs of a series, and the run folders that folder retention must keep.

The pinned baseline and the last good run of every series always stay: they are what the next run is
compared with. Deleting the folders themselves is :func:`diagnose.engine.unattended.retain`'s job.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from diagnose.history.storage import baseline_ids, last_good_ids, open_db, series_key
from diagnose.history.watch_store import forget_orphans


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
    inventory, playbook = series_key(run)
    cutoff = (
        ((now or datetime.now(timezone.utc)) - timedelta(days=keep_days)).timestamp() if keep_days else None
    )
    with open_db(db_path) as conn:
        keep = baseline_ids(conn) | last_good_ids(conn) | {str(run["id"])}
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
            forget_orphans(conn)  # the watch list's parts whose every night went with those runs
    return doomed


def protected_run_dirs(db_path: str | Path) -> set[Path]:
    """Folders of pinned baselines and last good runs: folder retention must never delete them."""
    with open_db(db_path) as conn:
        ids = sorted(baseline_ids(conn) | last_good_ids(conn))
        rows = conn.execute(
            f"SELECT run_dir FROM runs WHERE run_dir IS NOT NULL AND id IN ({','.join('?' * len(ids))})", ids
        ).fetchall()
    return {Path(r[0]) for r in rows}
