"""Instability in a real history database: a check flipping PASS↔FAIL on a host is history.unstable.

The runs are tests/support/nightly.py's healthy nightly documents (a real 2-node environment and real all_reduce rows)
recorded night after night in a real SQLite file, with ib.port_state on node02 failing on some nights
the way a flapping port fails it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from diagnose import history
from diagnose.core.vars import Vars
from diagnose.history.stability import count_flips, statuses_of, unstable_checks
from tests.support.nightly import fail_check, make_results, night, record

FLAP = "ib.port_state"
PORT_DOWN = "mlx5_1 port 1: State Down, Physical state Polling"


def nights(db: Path, tmp_path: Path, pattern: str, playbook: str = "nightly") -> None:
    """Record one run per letter of ``pattern`` (P: healthy, F: node02's port down, E: could not judge)."""
    for n, letter in enumerate(pattern):
        results = make_results(f"{playbook}-{n}", night(n), playbook)
        mark(results, letter)
        record(db, results, tmp_path)


def mark(results: dict[str, Any], letter: str) -> None:
    if letter == "F":
        fail_check(results, FLAP, "node02", PORT_DOWN)
    elif letter == "E":
        for check in results["checks"]:
            if check["id"] == FLAP and check["host"] == "node02":
                check["status"] = "ERROR"


def tonight(db: Path, letter: str, n: int, host_vars: Vars | None = None) -> tuple[list, list]:
    results = make_results(f"nightly-{n}", night(n))
    mark(results, letter)
    return history.instability(db, results, history.regressions(db, results), host_vars)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "state" / "history.sqlite3"


def test_a_passing_night_of_a_flapping_host_is_not_a_clean_accept(db: Path, tmp_path: Path) -> None:
    nights(db, tmp_path, "PFPFP")
    regressions, unstable = tonight(db, "P", 5)
    assert regressions == []
    (found,) = unstable
    assert found.id == history.UNSTABLE_ID and found.status == "WARN"
    assert found.host == "node02" and found.checklist == "–"
    assert found.observed == ["PASS", "FAIL", "PASS", "FAIL", "PASS", "PASS"]
    assert "ib.port_state on node02 is unstable: failed 2 of the last 6 runs" in found.message
    assert "diagnose history --check ib.port_state --host node02" in (found.remediation or "")


def test_a_failing_night_is_unstable_instead_of_another_regression(db: Path, tmp_path: Path) -> None:
    nights(db, tmp_path, "PFPFP")
    results = make_results("nightly-5", night(5))
    mark(results, "F")
    plain = history.regressions(db, results)
    assert [r.summary for r in plain] == ["node02 ib.port_state PASS→FAIL"]
    assert plain[0].check == (FLAP, "node02")
    regressions, unstable = history.instability(db, results, plain)
    assert regressions == [], "the flip is folded into the instability finding"
    (found,) = unstable
    assert found.observed == ["PASS", "FAIL", "PASS", "FAIL", "PASS", "FAIL"]
    assert "failed 3 of the last 6 runs" in found.message and "5 PASS↔FAIL changes" in found.message


def test_one_failure_and_its_repair_is_not_instability(db: Path, tmp_path: Path) -> None:
    nights(db, tmp_path, "PPF")
    assert tonight(db, "P", 3)[1] == [], "failed once, repaired: two changes"
    nights(db, tmp_path, "PPFP")
    (found,) = tonight(db, "F", 4)[1]
    assert "failed 2 of the last 5 runs" in found.message, "failing again after the repair: three changes"


def test_a_host_that_stays_down_is_a_regression_not_unstable(db: Path, tmp_path: Path) -> None:
    nights(db, tmp_path, "PFFF")
    regressions, unstable = tonight(db, "F", 4)
    assert unstable == []
    assert [r.summary for r in regressions] == ["node02 ib.port_state PASS→FAIL"], "against the last good run"


def test_errors_are_not_verdicts_and_do_not_count_as_flips(db: Path, tmp_path: Path) -> None:
    nights(db, tmp_path, "PEPEP")
    assert tonight(db, "E", 5)[1] == []


def test_flips_older_than_the_window_are_forgotten(db: Path, tmp_path: Path) -> None:
    nights(db, tmp_path, "FPFPPPPP")
    assert tonight(db, "P", 8)[1] == []
    wide = Vars({"history_unstable_window": 10})
    (found,) = tonight(db, "P", 8, wide)[1]
    assert "failed 2 of the last 9 runs" in found.message


def test_thresholds_come_from_the_variables(db: Path, tmp_path: Path) -> None:
    nights(db, tmp_path, "PFP")
    assert tonight(db, "P", 3)[1] == [], "two flips: below the default of three"
    (found,) = tonight(db, "P", 3, Vars({"history_unstable_flips": 2}))[1]
    assert found.host == "node02"


def test_a_pinned_baseline_after_the_repair_clears_the_record(db: Path, tmp_path: Path) -> None:
    nights(db, tmp_path, "PFPFP")
    assert tonight(db, "P", 5)[1], "unstable before the repair is acknowledged"
    history.set_baseline(db, "nightly-4")
    assert tonight(db, "P", 5)[1] == []


def test_other_series_are_not_mixed_in(db: Path, tmp_path: Path) -> None:
    nights(db, tmp_path, "FPFPF", playbook="acceptance")
    nights(db, tmp_path, "PP")
    assert tonight(db, "P", 5)[1] == []


def test_pure_parts() -> None:
    assert count_flips(["PASS", "FAIL", "WARN", "FAIL"]) == 3
    assert count_flips(["PASS", "WARN", "PASS"]) == 0
    checks = [
        {"id": "gpu.xid", "host": "n1", "status": "PASS"},
        {"id": "gpu.xid", "host": "n1", "status": "FAIL"},
        {"id": "history.regression", "host": "n1", "status": "FAIL"},
        {"id": "bench.all_reduce", "host": None, "status": "PASS"},
    ]
    assert statuses_of(checks) == {("gpu.xid", "n1"): "FAIL", ("bench.all_reduce", ""): "PASS"}
    runs = [{("bench.all_reduce", ""): s} for s in ("FAIL", "PASS", "FAIL", "PASS")]
    (cluster,) = unstable_checks(runs, 3)
    assert cluster.host == "" and cluster.failures == 2
