"""``--check`` estimates a run from this machine's own earlier runs where the history has some: the model
said ~2 min 09 s for a run that took 7 min 02 s on a head node at load average 60, and only the past runs of
the series knew. Real parser, real dry run on this machine, a real history database written by
:func:`diagnose.history.record_run` (tests/support/nightly.py's documents)."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest

from diagnose import history
from diagnose.cli import main
from tests.support.nightly import make_results, night

INVENTORY = "all:\n  hosts:\n    here: {ansible_connection: local}\n"
#: What the slow head node's runs took, stage by stage: 7 min 02 s in all.
STAGES = [{"stage": "host checks", "seconds": 130.0}, {"stage": "benchmarks", "seconds": 289.0}]
WALL = timedelta(minutes=7, seconds=2)


def _record(db: Path, n: int, wall: timedelta, stages: list[dict[str, object]] | None) -> None:
    results = make_results(f"2026111{n}T020000Z-ab0{n}", night(n), playbook="acceptance")
    results["run"]["inventory"] = "cluster.yaml"
    results["run"]["finished"] = (night(n) + wall).isoformat(timespec="seconds")
    if stages is not None:
        results["run"]["stages"] = stages
    history.record_run(db, results, None)


def _check(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    assert main(["run", "-i", "cluster.yaml", "--check", *argv]) == 0
    return capsys.readouterr().out.splitlines()


def test_check_estimates_from_the_series_past_runs_and_says_how(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))  # the default database: none yet
    monkeypatch.delenv("DIAGNOSE_HISTORY", raising=False)
    (tmp_path / "cluster.yaml").write_text(INVENTORY)
    db = tmp_path / "history.sqlite3"
    for n in (1, 2, 3):
        _record(db, n, WALL + timedelta(seconds=10 * (n - 2)), STAGES)
    _record(db, 4, timedelta(seconds=40), [{**STAGES[0], "interrupted": True, "still_running": []}])
    model = _check(capsys)  # the default database, which holds nothing of this series
    lines = _check(capsys, "--history", str(db))
    at = lines.index(f"from this machine's history ({db}): the last 3 runs of this inventory and playbook "
                     "took 6 min 52 s to 7 min 12 s")  # fmt: skip
    assert lines[at + 1] == "  by stage, median of the 3 runs that recorded them: host checks 2 min 10 s, " \
        "benchmarks 4 min 49 s"  # fmt: skip
    assert lines[at + 2].startswith("  expect ~7 min 02 s (the median of those runs, made on this machine")
    assert not any("from this machine's history" in line for line in model)
    assert any(line.startswith("no earlier run of this inventory and playbook in") for line in model)


def test_another_series_and_a_database_from_before_stages_were_recorded(tmp_path) -> None:
    from diagnose.history.durations import past_runs

    db = tmp_path / "history.sqlite3"
    _record(db, 1, WALL, STAGES)
    assert past_runs(db, ("cluster.yaml", "nightly")) is None  # the same inventory, another playbook
    with sqlite3.connect(db) as conn:  # as a database recorded before the stages column was
        conn.execute("ALTER TABLE runs DROP COLUMN stages")
    past = past_runs(db, ("cluster.yaml", "acceptance"))
    assert past is not None and past.seconds == [WALL.total_seconds()] and past.stages == {}
    assert past_runs(tmp_path / "none.sqlite3", ("cluster.yaml", "acceptance")) is None


def test_a_run_without_benchmarks_does_not_estimate_one_with_them(tmp_path, monkeypatch, capsys) -> None:
    """A campaign's first pass with --skip-benchmarks was the series' only run: ``--check`` of the full run
    then said "expect ~8 s", the model ~28 min. A run that measured other stages than the plan says nothing
    of its length; a --skip-benchmarks plan is estimated from such runs alone."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DIAGNOSE_HISTORY", raising=False)
    (tmp_path / "cluster.yaml").write_text(INVENTORY)
    db = tmp_path / "history.sqlite3"
    _record(db, 1, WALL, STAGES)
    _record(db, 2, timedelta(seconds=8), [{"stage": "host checks", "seconds": 8.0}])
    full = _check(capsys, "--history", str(db))
    assert any(
        line.endswith("the last 1 run of this inventory and playbook took 7 min 02 s") for line in full
    )
    host_checks = _check(capsys, "--history", str(db), "--skip-benchmarks")
    assert any(
        line.endswith("the last 1 run of this inventory and playbook took 8 s") for line in host_checks
    )
