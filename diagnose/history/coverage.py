"""Coverage: when each host was last checked by a run of a series, and which hosts are due next.

A nightly that runs on a few free nodes of a busy Slurm cluster covers the whole cluster only if each
night takes the nodes checked longest ago. Every recorded run marks its reachable hosts as covered at
the run's start (in the ``coverage`` table, which retention never prunes: a node checked eight nights ago
must not look never checked because its run was forgotten); :func:`stalest` picks the next nodes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from diagnose.history.storage import epoch_seconds, open_db, series_key


def record_coverage(db_path: str | Path, results: Mapping[str, Any]) -> None:
    """Mark the run's reachable hosts as covered by its series at the run's start time."""
    run = results["run"]
    inventory, playbook = series_key(run)
    started = str(run.get("started") or "")
    started_ts = epoch_seconds(started)
    if started_ts is None:
        return
    hosts = [h["name"] for h in results.get("hosts", []) if h.get("reachable")]
    with open_db(db_path) as conn, conn:
        conn.executemany(
            "INSERT INTO coverage VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (inventory, playbook, host)"
            " DO UPDATE SET run_id = excluded.run_id, covered = excluded.covered,"
            " covered_ts = excluded.covered_ts WHERE excluded.covered_ts >= coverage.covered_ts",
            [(inventory, playbook, host, str(run["id"]), started, started_ts) for host in hosts],
        )


def last_covered(db_path: str | Path, run: Mapping[str, Any]) -> dict[str, tuple[str, float]]:
    """Host → (ISO time, timestamp) of its last coverage by the series ``run`` belongs to (only
    ``inventory``, ``playbook`` and ``limit`` of ``run`` are read)."""
    if not Path(db_path).exists():
        return {}
    inventory, playbook = series_key(run)
    with open_db(db_path) as conn:
        rows = conn.execute(
            "SELECT host, covered, covered_ts FROM coverage WHERE inventory = ? AND playbook = ?",
            (inventory, playbook),
        ).fetchall()
    return {str(host): (str(covered), float(ts)) for host, covered, ts in rows}


def stalest(candidates: Sequence[str], covered: Mapping[str, tuple[str, float]], count: int) -> list[str]:
    """The ``count`` candidates covered longest ago: never-covered ones first, in the candidates' order,
    then the oldest coverage first (ties in the candidates' order). Pure."""
    order = {name: index for index, name in enumerate(candidates)}
    ranked = sorted(
        candidates, key=lambda n: (n in covered, covered[n][1] if n in covered else 0.0, order[n])
    )
    return ranked[:count]
