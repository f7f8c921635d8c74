"""History store and regression detection on realistic results documents (schema 1), in a real SQLite file.

The documents are tests/support/nightly.py's healthy two-node nights (a real environment and real all_reduce
rows), each test changing what its regression needs.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from diagnose import history
from diagnose.core.errors import ConfigError
from tests.support.nightly import (
    A3_ALL_REDUCE,
    fail_check,
    good_nights,
    make_results,
    night,
    record,
    scale_band,
)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "state" / "history.sqlite3"


def test_healthy_repeat_has_no_regression(db: Path, tmp_path: Path) -> None:
    record(db, make_results("r1", night(0)), tmp_path)
    tonight = make_results("r2", night(1))
    scale_band(tonight, 0, None, 0.96)  # ordinary night-to-night noise
    assert history.regressions(db, tonight) == []


def test_first_run_has_nothing_to_compare(db: Path) -> None:
    assert history.regressions(db, make_results("r1", night(0))) == []


def test_pass_to_fail_names_host_check_and_reference(db: Path, tmp_path: Path) -> None:
    run_dir = record(db, make_results("r1", night(0)), tmp_path)
    tonight = make_results("r2", night(1))
    fail_check(tonight, "ib.port_state", "node02", "mlx5_1 port 1: State Down, Physical state Polling")
    found = history.regressions(db, tonight)
    assert [r.summary for r in found] == ["node02 ib.port_state PASS→FAIL"]
    result = found[0].result
    assert (result.id, result.host, result.checklist, result.status) == (
        "history.regression",
        "node02",
        "–",
        "FAIL",
    )
    assert result.observed == "FAIL"
    assert result.expected == "PASS (run r1)"
    assert "State Down" in result.message and "run r1 (last good" in result.message
    assert str(run_dir.resolve()) in result.remediation


def test_busbw_drop_in_one_band_only(db: Path, tmp_path: Path) -> None:
    good_nights(db, tmp_path)  # the series' noise is known: the minimum change decides
    record(db, make_results("r1", night(0)), tmp_path)
    tonight = make_results("r2", night(1))
    scale_band(tonight, 64 << 20, None, 0.82)  # the bandwidth-bound band: a degraded link
    scale_band(tonight, 1 << 20, 64 << 20, 0.95)  # within the threshold: not reported
    found = history.regressions(db, tonight, busbw_drop_pct=10)
    assert [r.kind for r in found] == ["busbw"]
    result = found[0].result
    assert found[0].summary == "all_reduce ≥64MiB busbw -18%"
    assert result.status == "FAIL" and result.checklist == "3" and result.host is None
    # median of 99.74, 213.19, 297.86 is 213.19; scaled by 0.82 it is 174.82
    assert result.observed == "174.8 GB/s"
    assert result.expected == "≥ 0.9 × 213.2 GB/s (run r1)"
    assert "median of 3 sizes, 2 nodes, 16 ranks, nccl-tests" in result.message


def test_busbw_threshold_comes_from_the_caller(db: Path, tmp_path: Path) -> None:
    good_nights(db, tmp_path)  # the series' noise is known: the minimum change decides
    record(db, make_results("r1", night(0)), tmp_path)
    tonight = make_results("r2", night(1))
    scale_band(tonight, 0, 1 << 20, 0.85)
    assert history.regressions(db, tonight, busbw_drop_pct=20) == []
    # 0.77 x 0.85 printed with two decimals, as nccl-tests does, is 0.65: -16%
    assert [r.summary for r in history.regressions(db, tonight, busbw_drop_pct=10)] == [
        "all_reduce <1MiB busbw -16%"
    ]


def test_busbw_compares_only_sizes_both_runs_measured(db: Path, tmp_path: Path) -> None:
    record(db, make_results("r1", night(0)), tmp_path)
    tonight = make_results("r2", night(1))
    # Tonight's sweep stopped at 256M (time budget): the 1G row is missing, the band's other sizes are
    # unchanged. A median over different size sets would read this as a drop.
    tonight["benchmarks"][0]["rows"].pop()
    assert history.regressions(db, tonight) == []


def test_rows_with_wrong_results_carry_no_bandwidth(db: Path, tmp_path: Path) -> None:
    record(db, make_results("r1", night(0)), tmp_path)
    tonight = make_results("r2", night(1))
    scale_band(tonight, 64 << 20, None, 0.5)
    for row in tonight["benchmarks"][0]["rows"]:
        if row["bytes"] >= 64 << 20:
            row["wrong"] = 3
    assert history.regressions(db, tonight) == []


def test_version_change_on_one_host_is_a_fail(db: Path, tmp_path: Path) -> None:
    record(db, make_results("r1", night(0)), tmp_path)
    tonight = make_results("r2", night(1))
    tonight["hosts"][1]["environment"]["nccl"] = "2.28.3"  # the libnccl2 system package, captured too
    found = history.regressions(db, tonight)
    assert [r.summary for r in found] == ["nccl 2.28.9→2.28.3 on node02"]
    result = found[0].result
    assert (result.status, result.checklist, result.host) == ("FAIL", "3", "node02")
    assert (result.observed, result.expected) == ("2.28.3", "2.28.9 (run r1)")
    assert "on 1 of 2 hosts (node02)" in result.message
    assert "hosts now disagree: 2.28.3, 2.28.9" in result.message


def test_version_upgrade_on_every_host_is_a_warn(db: Path, tmp_path: Path) -> None:
    record(db, make_results("r1", night(0)), tmp_path)
    tonight = make_results("r2", night(1))
    for host in tonight["hosts"]:
        host["environment"]["driver"] = "580.165.02"
    found = history.regressions(db, tonight)
    assert [(r.summary, r.result.status, r.result.host) for r in found] == [
        ("driver 580.159.04→580.165.02 on 2 hosts", "WARN", None)
    ]


def test_host_disappeared_but_unreachable_host_is_present(db: Path, tmp_path: Path) -> None:
    record(db, make_results("r1", night(0)), tmp_path)
    tonight = make_results("r2", night(1))
    del tonight["hosts"][1]
    tonight["checks"] = [c for c in tonight["checks"] if c["host"] != "node02"]
    found = history.regressions(db, tonight)
    assert [(r.kind, r.summary, r.result.status, r.result.host) for r in found] == [
        ("host", "node02 disappeared", "FAIL", "node02")
    ]
    # Unreachable: still in hosts (no environment), host.reachable FAIL is the finding.
    unreachable = make_results("r3", night(1))
    unreachable["hosts"][1].update(reachable=False, error="timed out", environment={})
    unreachable["checks"] = [c for c in unreachable["checks"] if c["host"] != "node02"]
    unreachable["checks"].append(
        {"id": "host.reachable", "host": "node02", "checklist": "–", "status": "FAIL", "message": "timed out"}
    )
    assert [r.summary for r in history.regressions(db, unreachable)] == ["node02 host.reachable PASS→FAIL"]


def test_a_host_lost_during_the_run_is_a_regression(db: Path, tmp_path: Path) -> None:
    """node02 answered at the start and stopped answering mid-run: host.reachable ERROR, its other results
    ERROR too. The one change that counts is the host's: PASS→ERROR, one FAIL finding, not zero."""
    record(db, make_results("r1", night(0)), tmp_path)
    tonight = make_results("r2", night(1))
    for check in tonight["checks"]:
        if check["host"] == "node02":
            check.update(status="ERROR", message="the host stopped answering during the run")
    tonight["checks"].append(
        {
            "id": "host.reachable",
            "host": "node02",
            "checklist": "–",
            "status": "ERROR",
            "message": "answered at the start, then no answer for 20 s",
        }
    )
    found = history.regressions(db, tonight)
    assert [r.summary for r in found] == ["node02 host.reachable PASS→ERROR"]
    assert found[0].result.status == "FAIL" and found[0].result.observed == "ERROR"


def test_reference_is_last_pass_run_of_the_same_series(db: Path, tmp_path: Path) -> None:
    record(db, make_results("r1", night(0)), tmp_path)
    bad = make_results("r2", night(1))
    fail_check(bad, "ib.port_state", "node01", "Down")
    record(db, bad, tmp_path)
    other = make_results("a1", night(2), playbook="acceptance")
    fail_check(other, "gpu.topology", "node01", "NV# missing")
    other["verdict"] = "PASS"  # a PASS of another series must not become tonight's reference
    record(db, other, tmp_path)
    tonight = make_results("r3", night(3))
    fail_check(tonight, "ib.port_state", "node01", "Down")
    fail_check(tonight, "gpu.topology", "node01", "NV# missing")
    found = history.regressions(db, tonight)
    assert sorted(r.summary for r in found) == [
        "node01 gpu.topology PASS→FAIL",
        "node01 ib.port_state PASS→FAIL",
    ]
    assert all("(run r1)" in r.result.expected for r in found)


def test_baseline_catches_slow_drift(db: Path, tmp_path: Path) -> None:
    good_nights(db, tmp_path)  # the series' noise is known: the minimum change decides
    record(db, make_results("r1", night(0)), tmp_path)
    assert history.set_baseline(db, "r1") == "r1"
    step = make_results("r2", night(1))
    scale_band(step, 64 << 20, None, 0.94)
    assert history.regressions(db, step) == []
    record(db, step, tmp_path)
    tonight = make_results("r3", night(2))
    scale_band(tonight, 64 << 20, None, 0.94 * 0.94)  # -6% against r2, -12% against the baseline
    found = history.regressions(db, tonight)
    assert [r.summary for r in found] == ["all_reduce ≥64MiB busbw -12%"]
    assert "run r1 (baseline" in found[0].result.message
    assert found[0].result.expected == "≥ 0.9 × 213.2 GB/s (run r1)"


def test_pinned_baseline_acknowledges_a_removed_host(db: Path, tmp_path: Path) -> None:
    record(db, make_results("r1", night(0)), tmp_path)
    shrunk = make_results("r2", night(1))
    del shrunk["hosts"][1]
    assert [r.summary for r in history.regressions(db, shrunk)] == ["node02 disappeared"]
    shrunk["verdict"] = "FAIL"
    record(db, shrunk, tmp_path)
    history.set_baseline(db, "r2")
    tonight = make_results("r3", night(2))
    del tonight["hosts"][1]
    assert history.regressions(db, tonight) == []


def test_set_baseline_accepts_a_unique_prefix_only(db: Path, tmp_path: Path) -> None:
    record(db, make_results("20261118T020000Z", night(0)), tmp_path)
    record(db, make_results("20261119T020000Z", night(1)), tmp_path)
    assert history.set_baseline(db, "20261118") == "20261118T020000Z"
    with pytest.raises(ConfigError, match="ambiguous"):
        history.set_baseline(db, "2026111")
    with pytest.raises(ConfigError, match="no run 'nope'"):
        history.set_baseline(db, "nope")
    assert "baseline" in history.history_list(db).splitlines()[4]


def test_record_run_again_replaces_the_run(db: Path, tmp_path: Path) -> None:
    results = make_results("r1", night(0))
    record(db, results, tmp_path)
    history.set_baseline(db, "r1")  # a pinned run can still be re-recorded
    fail_check(results, "ib.port_state", "node01", "Down")
    record(db, results, tmp_path)
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT COUNT(*) FROM checks WHERE run_id = 'r1'").fetchone()[0] == 11
    assert conn.execute("SELECT verdict FROM runs").fetchall() == [("FAIL",)]
    assert conn.execute("SELECT COUNT(*) FROM bench_rows").fetchone()[0] == len(A3_ALL_REDUCE)
    conn.close()


def test_schema_is_versioned_and_a_newer_schema_is_refused(db: Path) -> None:
    history.create_db(db)
    assert history.schema_version(db) == history.SCHEMA_VERSION
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("INSERT INTO schema_version VALUES (?)", (history.SCHEMA_VERSION + 1,))
    conn.close()
    with pytest.raises(ConfigError, match="newer than this diagnose understands"):
        history.history_list(db)


def test_prune_keeps_baseline_last_good_and_current(db: Path, tmp_path: Path) -> None:
    for n in range(6):
        results = make_results(f"r{n}", night(n))
        if n >= 2:
            fail_check(results, "ib.port_state", "node01", "Down")
        record(db, results, tmp_path)
    record(db, make_results("a0", night(0), playbook="acceptance"), tmp_path)
    history.set_baseline(db, "r0")
    current = make_results("r5", night(5))
    pruned = history.prune(db, current, keep_runs=2, keep_days=None, now=night(5))
    # newest two (r5, r4) by count; r0 baseline, r1 last good; the other series untouched
    assert sorted(p.run_id for p in pruned) == ["r2", "r3"]
    assert all(p.run_dir and p.run_dir.endswith(p.run_id) for p in pruned)
    pruned = history.prune(db, current, keep_runs=None, keep_days=0.5, now=night(5))
    assert [p.run_id for p in pruned] == ["r4"]
    conn = sqlite3.connect(db)
    assert sorted(r[0] for r in conn.execute("SELECT id FROM runs")) == ["a0", "r0", "r1", "r5"]
    assert conn.execute("SELECT COUNT(*) FROM checks WHERE run_id = 'r4'").fetchone()[0] == 0
    assert conn.execute("SELECT COUNT(*) FROM bench_rows WHERE run_id = 'r4'").fetchone()[0] == 0
    conn.close()
    assert {p.name for p in history.protected_run_dirs(db)} == {"r0", "r1", "a0"}


def test_history_list_and_trends(db: Path, tmp_path: Path) -> None:
    record(db, make_results("r1", night(0)), tmp_path)
    bad = make_results("r2", night(1))
    fail_check(bad, "ib.port_state", "node02", "mlx5_1 port 1: State Down")
    scale_band(bad, 64 << 20, None, 0.5)
    record(db, bad, tmp_path)

    listing = history.history_list(db).splitlines()
    assert listing[0] == "nightly on /etc/diagnose/prod.yaml"
    header = ["run", "started", "verdict", "FAIL", "ERROR", "WARN", "regressions", "hosts", "note"]
    assert listing[1].split() == header
    assert listing[3].split() == ["r2", "2026-11-19T02:00:00+00:00", "FAIL", "1", "0", "0", "0", "2"]
    assert listing[4].split()[2] == "PASS" and listing[4].endswith("last good")

    trend = history.history_trend(db, check_id="ib.port_state").splitlines()
    assert trend[0] == "ib.port_state"
    assert trend[3].split() == ["2026-11-18T02:00:00+00:00", "r1", "2", "0", "0", "0", "0"]
    assert trend[4].split() == ["2026-11-19T02:00:00+00:00", "r2", "1", "0", "1", "0", "0", "node02", "FAIL"]
    one = history.history_trend(db, check_id="ib.port_state", host="node02").splitlines()
    assert one[3].split()[:3] == ["2026-11-18T02:00:00+00:00", "r1", "PASS"]
    assert one[4].split()[:3] == ["2026-11-19T02:00:00+00:00", "r2", "FAIL"]
    assert "State Down" in one[4]

    busbw = history.history_trend(db, collective="all_reduce").splitlines()
    assert busbw[3].split() == [
        "2026-11-18T02:00:00+00:00",
        "r1",
        "nccl-tests",
        "2×8",  # 16 ranks on 2 nodes: nodes × ranks per node
        "0.8",
        "21.6",
        "213.2",
        "297.9",
        "PASS",
    ]
    assert busbw[4].split()[6:8] == ["106.6", "148.9"]
    assert history.history_trend(db, check_id="gpu.nope") == "no recorded run has gpu.nope"
    with pytest.raises(ConfigError):
        history.history_trend(db)


def test_trend_for_report_includes_the_current_run(db: Path, tmp_path: Path) -> None:
    record(db, make_results("r1", night(0)), tmp_path)
    history.set_baseline(db, "r1")
    tonight = make_results("r2", night(1))
    scale_band(tonight, 64 << 20, None, 0.5)
    tonight["verdict"] = "FAIL"
    trend = history.trend_for_report(db, tonight)
    assert [r["id"] for r in trend["runs"]] == ["r1", "r2"]
    assert trend["runs"][1]["verdict"] == "FAIL" and trend["runs"][1]["counts"]["PASS"] == 12
    assert trend["busbw"]["all_reduce"][">=64MiB"] == [213.19, pytest.approx(106.6, abs=0.01)]
    assert trend["busbw"]["all_reduce"]["<1MiB"] == [0.77, 0.77]
    assert [b["key"] for b in trend["bands"]] == ["<1MiB", "1-64MiB", ">=64MiB"]
    assert trend["references"] == {"last_good": "r1", "baseline": "r1"}
    record(db, tonight, tmp_path)  # recorded or not, the current run appears once
    assert [r["id"] for r in history.trend_for_report(db, tonight)["runs"]] == ["r1", "r2"]


def test_a_limited_run_is_its_own_series(db: Path, tmp_path: Path) -> None:
    record(db, make_results("r1", night(0)), tmp_path)
    rack = make_results("r2", night(1))
    rack["run"]["limit"] = "node01"
    del rack["hosts"][1]
    rack["checks"] = [c for c in rack["checks"] if c["host"] != "node02"]
    assert history.regressions(db, rack) == [], "hosts outside --limit did not disappear"
    record(db, rack, tmp_path)
    whole = make_results("r3", night(2))
    del whole["hosts"][1]
    whole["checks"] = [c for c in whole["checks"] if c["host"] != "node02"]
    assert [r.summary for r in history.regressions(db, whole)] == ["node02 disappeared"]
