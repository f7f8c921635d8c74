"""Unattended-run helpers: a lock contended by real processes, the time budget, dated folders, the cron
line, and retention on real folders and a real history database."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from diagnose import history
from diagnose.core.model import CheckResult
from diagnose.engine import run_ids, unattended

HOLDER = textwrap.dedent(
    """
    import sys
    from diagnose.engine.unattended import acquire_lock
    lock = acquire_lock(sys.argv[1])
    print("locked", flush=True)
    sys.stdin.read()
    lock.release()
    """
)


def hold_lock(db: Path) -> subprocess.Popen[str]:
    """Another diagnose process holding the run lock until its stdin closes."""
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "locked"
    return child


def test_second_run_is_refused_with_the_holder_named(tmp_path: Path) -> None:
    db = tmp_path / "state" / "history.sqlite3"
    child = hold_lock(db)
    try:
        with pytest.raises(unattended.LockBusy) as refused:
            unattended.acquire_lock(db)
        assert refused.value.exit_code == 4
        assert refused.value.holder["pid"] == child.pid
        message = str(refused.value)
        assert message.startswith(f"another diagnose run is in progress (pid {child.pid} on ")
        assert f"started {refused.value.holder['started']}" in message
        assert str(unattended.lock_path(db)) in message
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)
    with unattended.acquire_lock(db) as lock:  # the holder ended: the lock is free again
        note = json.loads(lock.path.read_text())
        assert note["pid"] == os.getpid()
    assert lock.path.read_text() == ""  # released: no holder named any more


def test_a_killed_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite3"
    child = hold_lock(db)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    lock = unattended.acquire_lock(db)
    lock.release()


def test_deadline_counts_down_and_caps_timeouts() -> None:
    now = [1000.0]
    deadline = unattended.Deadline(60, clock=lambda: now[0])
    assert deadline.remaining() == 60 and not deadline.expired()
    assert deadline.cap(20) == 20
    now[0] += 50
    assert deadline.cap(20) == 10
    now[0] += 11
    assert deadline.remaining() == 0 and deadline.expired()
    unlimited = unattended.Deadline(None, clock=lambda: now[0])
    assert unlimited.cap(20) == 20 and not unlimited.expired()


def test_a_nightly_folder_is_named_by_its_utc_run_id_and_never_shared(tmp_path: Path) -> None:
    moment = datetime(2026, 11, 21, 3, 0, 0, tzinfo=timezone(timedelta(hours=1)))
    run_id = run_ids.new_run_id(moment)
    first = run_ids.dated_run_dir(tmp_path / "nightly", run_id)
    assert first.name == run_id and run_id.startswith("20261121T020000Z-") and first.is_dir()
    with pytest.raises(FileExistsError):
        run_ids.dated_run_dir(tmp_path / "nightly", run_id)


def _results(verdict: str, statuses: list[str]) -> dict[str, Any]:
    checks = [{"id": f"check{i}", "host": "node07", "status": s} for i, s in enumerate(statuses)]
    return {
        "run": {"id": "20261121T020000Z", "inventory": "/etc/diagnose/prod.yaml", "playbook": "nightly"},
        "checks": checks,
        "benchmarks": [{"collective": "all_reduce", "status": "PASS"}],
        "verdict": verdict,
    }


def _regression(summary: str, status: str = "FAIL") -> history.Regression:
    result = CheckResult(history.REGRESSION_ID, None, "3", status)
    return history.Regression("busbw", summary, result)


def test_summary_line_for_cron_mail() -> None:
    regressions = [
        _regression("node07 ib.port_state PASS→FAIL"),
        _regression("all_reduce ≥64MiB busbw -18%"),
        _regression("nccl 2.28.9→2.28.3 on node02"),
        _regression("node09 disappeared"),
    ]
    results = _results("FAIL", ["PASS", "FAIL", "FAIL", "ERROR", "WARN"])
    # The regressions are in results["checks"] too (the engine adds them); they are not counted twice.
    results["checks"] += [r.result.to_dict() for r in regressions]
    line = unattended.summary_line(results, regressions, "/srv/nightly/2026-11-21T02-00-00Z/report.html")
    assert line == (
        "diagnose nightly prod: FAIL — 2 FAIL, 1 ERROR, 1 WARN, 4 regressions (node07 ib.port_state PASS→FAIL; "
        "all_reduce ≥64MiB busbw -18%; nccl 2.28.9→2.28.3 on node02; +1 more) — "
        "report: /srv/nightly/2026-11-21T02-00-00Z/report.html"
    )
    assert "\n" not in line


def test_summary_line_when_all_is_well() -> None:
    line = unattended.summary_line(_results("PASS", ["PASS", "PASS", "SKIP"]), [])
    assert line == "diagnose nightly prod: PASS — 3 PASS, no regressions"


def test_summary_line_says_a_pass_covered_little() -> None:
    line = unattended.summary_line(_results("PASS", ["PASS", "SKIP", "SKIP", "SKIP"]), [])
    assert line == (
        "diagnose nightly prod: PASS — 2 PASS, limited coverage (2 of 5 results measured), no regressions"
    )


def test_summary_line_counts_what_was_only_shown_beside_the_passes() -> None:
    """A two-host CPU nightly: the gloo sweep and the memory copy judged no figure (``judged: false``). The
    line said "1 PASS, limited coverage (1 of 4 results measured)", leaving the reader two results short."""
    results = _results("PASS", ["PASS", "SKIP"])
    results["checks"].append({"id": "fleet.memcpy", "host": None, "status": "PASS", "judged": False})
    results["benchmarks"][0]["judged"] = False
    line = unattended.summary_line(results, [])
    assert line == (
        "diagnose nightly prod: PASS — 1 PASS, 2 shown, limited coverage (1 of 4 results measured), "
        "no regressions"
    )


def _write_run(root: Path, name: str, started: datetime, document: dict[str, Any] | None = None) -> Path:
    folder = root / name
    (folder / "raw" / "node01").mkdir(parents=True)
    (folder / "raw" / "node01" / "ibstat.txt").write_text("CA 'mlx5_0'\n")
    if document is None:
        document = {
            "schema": 1,
            "run": {"id": name, "started": started.isoformat(), "tool_version": "0.1.0"},
            "hosts": [],
            "checks": [],
            "benchmarks": [],
            "verdict": "PASS",
        }
    (folder / "results.json").write_text(json.dumps(document))
    return folder


NOW = datetime(2026, 11, 21, 2, 0, tzinfo=timezone.utc)


def _night(days_ago: int) -> tuple[str, datetime]:
    moment = NOW - timedelta(days=days_ago)
    return moment.strftime("%Y-%m-%dT%H-%M-%SZ"), moment


def test_folder_retention_deletes_only_diagnose_runs(tmp_path: Path) -> None:
    root = tmp_path / "nightly"
    runs = [_write_run(root, *_night(n)) for n in range(6)]  # runs[0] is tonight
    foreign = _write_run(root, "photos", NOW - timedelta(days=400), {"schema": 1, "title": "holiday"})
    broken = root / "2026-01-01T02-00-00Z"  # a crashed run's folder: no results.json, no proof it is ours
    broken.mkdir()
    elsewhere = _write_run(tmp_path / "elsewhere", "2025-01-01T02-00-00Z", NOW - timedelta(days=500))
    (root / "link").symlink_to(elsewhere)

    removed, failures = unattended.prune_run_folders(
        root, keep_runs=3, keep_days=None, protect=[runs[5]], now=NOW
    )
    assert failures == []
    assert sorted(removed) == sorted(runs[3:5])
    assert all(not r.exists() for r in runs[3:5])
    assert all(r.is_dir() for r in [*runs[:3], runs[5], foreign, broken, elsewhere])

    removed, _ = unattended.prune_run_folders(root, keep_runs=None, keep_days=1.5, protect=[runs[5]], now=NOW)
    assert removed == [runs[2]]
    assert sorted(p.name for p in root.iterdir()) == sorted(
        [runs[0].name, runs[1].name, runs[5].name, "photos", broken.name, "link"]
    )


def test_retention_orders_old_dated_and_new_id_folders_as_one_series(tmp_path: Path) -> None:
    root = tmp_path / "nightly"
    old = [_write_run(root, *_night(n)) for n in (5, 4, 3)]  # before folders carried the run id
    new = []
    for n in (2, 1, 0):
        moment = NOW - timedelta(days=n)
        new.append(_write_run(root, run_ids.new_run_id(moment), moment))
    assert [run_ids.dated_folder_time(f) for f in old + new] == [
        NOW - timedelta(days=n) for n in range(5, -1, -1)
    ]
    removed, failures = unattended.prune_run_folders(root, keep_runs=4, keep_days=None, now=NOW)
    assert failures == [] and sorted(removed) == sorted(old[:2])
    removed, _ = unattended.prune_run_folders(root, keep_runs=None, keep_days=1.5, now=NOW)
    assert sorted(removed) == sorted([old[2], new[0]])
    assert sorted(root.iterdir()) == sorted(new[1:])


def test_retain_prunes_history_and_folders_together(tmp_path: Path) -> None:
    root = tmp_path / "nightly"
    db = tmp_path / "history.sqlite3"
    folders = []
    for n in (5, 4, 3, 2, 1, 0):
        name, moment = _night(n)
        folder = _write_run(root, name, moment)
        results = json.loads((folder / "results.json").read_text())
        results["run"].update(inventory="/etc/diagnose/prod.yaml", playbook="nightly")
        results["verdict"] = "PASS" if n in (5, 3) else "FAIL"
        history.record_run(db, results, folder)
        folders.append(folder)
    history.set_baseline(db, folders[0].name)
    retention = unattended.retain(db, results, root, folders[-1], keep_runs=2, keep_days=None, now=NOW)
    # kept: tonight and last night by count, the baseline (5 nights ago), the last good run (3 nights ago)
    assert sorted(p.run_id for p in retention.pruned_runs) == [folders[1].name, folders[3].name]
    assert sorted(retention.removed_folders) == [folders[1], folders[3]]
    assert retention.failures == []
    assert sorted(p.name for p in root.iterdir()) == sorted(
        f.name for f in (folders[0], folders[2], *folders[4:])
    )
    listed = history.history_list(db)
    assert folders[1].name not in listed and folders[2].name in listed
