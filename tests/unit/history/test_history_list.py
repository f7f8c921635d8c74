"""``diagnose history``'s list of runs over a real history database: one table per series, each with its own
last good run, and counts that are the nightly line's (issue 36, item 9).

The documents are tests/support/nightly.py's healthy two-node nights; the failing night is finished as the
engine finishes one: its regressions found by the real comparison and added as results, its ``coverage``
counted by render/tally, then recorded.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from diagnose import history
from diagnose.engine.unattended import summary_line
from diagnose.render.tally import coverage_of
from diagnose.render.view_history import build_history
from tests.support.nightly import fail_check, make_results, night, record


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "history.sqlite3"


def _tables(listing: str) -> dict[str, dict[str, list[str]]]:
    """Each series' heading -> its rows by run id (cells split on runs of spaces)."""
    tables: dict[str, dict[str, list[str]]] = {}
    for block in listing.split("\n\n"):
        lines = block.splitlines()
        if len(lines) > 2 and set(lines[2]) <= {"-", " "}:
            tables[lines[0]] = {row.split()[0]: row.split() for row in lines[3:]}
    return tables


def test_each_series_has_its_own_table_and_last_good_run(db: Path, tmp_path: Path) -> None:
    """The nightly, a run of one rack (--limit) and a plain run given --history are three series: each
    table marks the newest PASS of its own series, and no more than one per series."""
    for n, verdict in enumerate(("PASS", "PASS", "FAIL")):
        nightly = make_results(f"n{n}", night(n))
        if verdict == "FAIL":
            fail_check(nightly, "ib.port_state", "node02", "mlx5_1 port 1: State Down")
        record(db, nightly, tmp_path)
    rack = make_results("rack1", night(1))
    rack["run"]["limit"] = "node01"
    record(db, rack, tmp_path)
    plain = make_results("plain1", night(0), playbook="acceptance")
    record(db, plain, tmp_path)

    listing = history.history_list(db)
    assert listing.splitlines()[0].startswith("3 series (playbook on inventory)"), listing
    tables = _tables(listing)
    assert list(tables) == [  # the series of the newest run first
        "nightly on /etc/diagnose/prod.yaml",
        "nightly --limit node01 on /etc/diagnose/prod.yaml",
        "acceptance on /etc/diagnose/prod.yaml",
    ]
    nightly_rows = tables["nightly on /etc/diagnose/prod.yaml"]
    assert list(nightly_rows) == ["n2", "n1", "n0"]
    assert [" ".join(row[8:]) for row in nightly_rows.values()] == ["", "last good", ""]
    for heading in list(tables)[1:]:
        ((row),) = tables[heading].values()
        assert row[2] == "PASS" and row[-2:] == ["last", "good"], heading
    assert sum(line.endswith("last good") for line in listing.splitlines()) == 3


def _finish_like_the_engine(db: Path, results: dict[str, Any]) -> list[history.Regression]:
    """What the engine does to a night before recording it: regressions added as results, then the
    finished document's ``coverage`` (engine/results.py writes it with render/tally)."""
    found = history.regressions(db, results)
    results["checks"] += [r.result.to_dict() for r in found]
    results["coverage"] = coverage_of(results).to_dict()
    return found


def _bench_row(status: str) -> dict[str, Any]:
    """The bench.<collective> row the benchmark stage writes beside its entry in ``benchmarks``."""
    return {
        "id": "bench.all_reduce",
        "host": None,
        "status": status,
        "message": "all_reduce 2 nodes 16 ranks",
    }


def test_the_history_row_says_the_nightly_lines_numbers(db: Path, tmp_path: Path) -> None:
    """A benchmark counts once (its bench.* row stands for its entry), and a regression is listed apart,
    not as a second FAIL: the table's FAIL, ERROR, WARN and regressions are the cron line's."""
    good = make_results("r1", night(0))
    good["checks"].append(_bench_row("PASS"))
    record(db, good, tmp_path)
    bad = make_results("r2", night(1))
    bad["checks"].append(_bench_row("FAIL"))
    bad["benchmarks"][0]["status"] = "FAIL"
    fail_check(bad, "ib.port_state", "node02", "mlx5_1 port 1: State Down")
    found = _finish_like_the_engine(db, bad)
    record(db, bad, tmp_path)

    line = summary_line(bad, found)
    tally = line.split(" — ")[1]
    said = {status: int(n) for n, status in re.findall(r"(\d+) (FAIL|ERROR|WARN)\b", tally)}
    listed = re.search(r"(\d+) regressions? \(", tally)
    assert said == {"FAIL": 2} and listed is not None and listed.group(1) == "2", line
    row = _tables(history.history_list(db))["nightly on /etc/diagnose/prod.yaml"]["r2"]
    assert row[3:7] == ["2", "0", "0", "2"], row  # FAIL, ERROR, WARN, regressions

    trend = history.trend_for_report(db, bad)
    assert [(r["counts"]["FAIL"], r["regressions"]) for r in trend["runs"]] == [(0, 0), (2, 2)]
    shown = build_history({"trend": trend})
    assert shown is not None and shown.runs[-1].counts == "10 PASS, 2 FAIL, 2 regressions"


def test_a_database_of_the_old_counts_is_counted_by_the_same_rule(db: Path, tmp_path: Path) -> None:
    """Runs recorded before schema 3 stored every benchmark twice and regressions among the FAILs, with no
    regressions of their own: they are counted again from their rows."""
    good = make_results("r1", night(0))
    good["checks"].append(_bench_row("PASS"))
    record(db, good, tmp_path)
    bad = make_results("r2", night(1))
    bad["checks"].append(_bench_row("FAIL"))
    bad["benchmarks"][0]["status"] = "FAIL"
    _finish_like_the_engine(db, bad)
    record(db, bad, tmp_path)
    old_counts = '{"PASS": 12, "WARN": 0, "FAIL": 3, "ERROR": 0, "SKIP": 0}'  # 2 bench + 1 regression
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE runs SET counts = ?, regressions = NULL WHERE id = 'r2'", (old_counts,))
    conn.close()
    row = _tables(history.history_list(db))["nightly on /etc/diagnose/prod.yaml"]["r2"]
    assert row[3:7] == ["1", "0", "0", "1"], row
