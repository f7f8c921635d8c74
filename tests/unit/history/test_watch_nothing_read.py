"""``diagnose history --watch`` where the recorded runs read nothing the watch list follows (GPUs and NICs by
serial): two nightly runs of two CPU hosts said "no watch list readings (each run recorded with --history adds
a night)", which reads as if the runs had not been recorded."""

from __future__ import annotations

from pathlib import Path

from diagnose import history


def _night(db: Path, run_id: str, started: str) -> None:
    results = {
        "schema": 1,
        "run": {"id": run_id, "started": started, "inventory": "inv.yaml", "playbook": "nightly"},
        "hosts": [{"name": "node1", "reachable": True}],
        "checks": [{"id": "host.reachable", "host": "node1", "status": "PASS", "message": "connected"}],
        "benchmarks": [],
        "verdict": "PASS",
    }
    history.record_run(db, results, None)


def test_runs_recorded_without_components_are_said_to_have_read_none(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite3"
    _night(db, "run1", "2026-11-28T23:42:09+00:00")
    _night(db, "run2", "2026-11-28T23:49:15+00:00")
    assert history.watch_table(db) == (
        f"no watch list readings in {db}: the 2 runs recorded read no GPU, InfiniBand port or cable "
        "(what the watch list follows, by serial number or GUID)"
    )


def test_an_empty_database_says_how_readings_come(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite3"
    history.create_db(db)
    assert history.watch_table(db) == (
        f"no watch list readings in {db} (each run recorded with --history adds a night)"
    )
