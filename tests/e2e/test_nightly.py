"""The cron use of `diagnose run`: nightly runs over real sshd hosts, a regression, history, lock, retention.

A night is ``diagnose run --playbook <nightly> --runs-dir ... --history ... --quiet`` as cron runs it: one
line on stdout for the mail, a dated folder, the run recorded in the history database. Between nights the
test bed is restarted with node2 carrying a fault from tests/support/hostkit.py (an InfiniBand port Down), as if
a cable failed during the day, and later with node2 repaired. The playbook is the shipped nightly's
checks and nightly settings with a tiny gloo sweep (the hosts have no GPUs) and ``keep_runs: 1``, so that
retention has something to remove by the third night.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from diagnose.engine.unattended import acquire_lock, lock_path
from tests.support.cli import diagnose
from tests.support.hostkit import PROFILE, healthy_h100, memlock_vars, port_down
from tests.support.paths import REPO
from tests.support.testbed import HostSpec, TestBed

pytestmark = pytest.mark.e2e

RUN_ID = re.compile(r"\d{8}T\d{6}Z-[0-9a-f]{4}")
PLAYBOOK_NAME = "nightly-testbed"


def nightly_playbook(path: Path, **nightly: object) -> Path:
    """playbooks/nightly.yaml's checks and nightly settings, with a sweep sized for a 2-core machine and
    ``nightly`` changed (``keep_runs: 1`` by default, so that retention has something to remove).

    gloo over loopback on a shared machine swings by far more than the shipped 10 % from one run to the
    next; its bandwidth is not judged, so it never makes a regression (diagnose.history.noise).
    """
    shipped = yaml.safe_load((REPO / "playbooks" / "nightly.yaml").read_text())
    sweep = {"min_bytes": "4K", "max_bytes": "256K", "step_factor": 4, "warmup_iters": 1, "iters": 3}
    playbook = {
        "name": PLAYBOOK_NAME,
        "description": "the shipped nightly with a tiny gloo sweep",
        "checks": shipped["checks"],
        "benchmarks": {**shipped["benchmarks"], **sweep},
        "nightly": {**shipped["nightly"], "keep_runs": 1, **nightly},
    }
    path.write_text(yaml.safe_dump(playbook, sort_keys=False))
    return path


class Night:
    """The crontab line of this test: the same inventory path, playbook, runs dir and history each night."""

    def __init__(self, tmp_path: Path, **nightly: object) -> None:
        self.cwd = tmp_path
        self.inventory = tmp_path / "inv.yaml"
        self.playbook = nightly_playbook(tmp_path / "nightly-testbed.yaml", **nightly)
        self.runs = tmp_path / "runs"
        self.db = tmp_path / "h.sqlite3"

    def diagnose(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return diagnose(*argv, cwd=self.cwd, timeout=300)

    def run(self) -> subprocess.CompletedProcess[str]:
        return self.diagnose(
            "run",
            "--playbook",
            str(self.playbook),
            "--runs-dir",
            str(self.runs),
            "--history",
            str(self.db),
            "-i",
            str(self.inventory),
            "-e",
            f"diagnose_profile={PROFILE}",
            "-e",
            "bench_backend=gloo",
            *memlock_vars(),
            "--quiet",
        )

    def history(self, *argv: str) -> str:
        done = self.diagnose("history", "--history", str(self.db), *argv)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def folders(self) -> list[str]:
        return sorted(p.name for p in self.runs.iterdir())

    def results(self, folder: str) -> dict:
        return json.loads((self.runs / folder / "results.json").read_text())

    @contextmanager
    def hosts(self, tmp_path: Path, label: str, specs: list[HostSpec]) -> Iterator[TestBed]:
        """The cluster as it is tonight: a fresh bed, the inventory rewritten at the same path."""
        with TestBed(tmp_path / label) as bed:
            bed.add_many(specs)
            bed.write_inventory(self.inventory)
            yield bed


def summary(done: subprocess.CompletedProcess[str]) -> str:
    """The one line cron mails; a clean night prints nothing else, on either stream."""
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout + done.stderr
    assert done.stderr == "", done.stderr
    return lines[0]


def test_nightly_runs_catch_a_regression_keep_history_lock_and_retain(
    testbed: TestBed, tmp_path: Path
) -> None:
    night = Night(tmp_path)

    # Night 1: a healthy cluster. Its run is the first reference of the series.
    testbed.add_many([healthy_h100("node1"), healthy_h100("node2")])
    testbed.write_inventory(night.inventory)
    first = night.run()
    line = summary(first)
    assert first.returncode == 0, line
    (folder_1,) = night.folders()
    assert RUN_ID.fullmatch(folder_1)  # the folder is named by the run's id
    report_1 = re.escape(str(night.runs / folder_1 / "report.html"))
    assert re.fullmatch(
        rf"diagnose {PLAYBOOK_NAME} inv: PASS — \d+ PASS, \d+ shown, no regressions — report: {report_1}",
        line,
    )
    run_1 = night.results(folder_1)
    assert run_1["run"]["id"] == folder_1
    assert run_1["verdict"] == "PASS" and (night.runs / folder_1 / "report.html").is_file()
    assert [b["backend"] for b in run_1["benchmarks"]] == ["gloo"]
    testbed.stop()

    # Night 2: node2 lost an InfiniBand port since night 1.
    with night.hosts(tmp_path, "bed-night2", [healthy_h100("node1"), port_down("node2")]):
        second = night.run()
        line = summary(second)
        assert second.returncode == 1, line
        folder_2 = next(f for f in night.folders() if f != folder_1)
        assert ": FAIL — " in line and "1 regression (node2 ib.port_state PASS→FAIL)" in line, line
        assert line.endswith(f"report: {night.runs / folder_2 / 'report.html'}")
        run_2 = night.results(folder_2)
        (regression,) = [c for c in run_2["checks"] if c["id"] == "history.regression"]
        assert (regression["host"], regression["status"]) == ("node2", "FAIL")
        assert regression["message"].startswith("ib.port_state on node2 went PASS→FAIL")
        assert regression["expected"] == f"PASS (run {run_1['run']['id']})"
        # keep_runs is 1, yet night 1 stays: it is the last good run, the reference of the next nights.
        assert night.folders() == sorted([folder_1, folder_2])

        id_1, id_2 = run_1["run"]["id"], run_2["run"]["id"]
        listing = night.history().splitlines()
        assert listing[0] == f"{PLAYBOOK_NAME} on {night.inventory}"  # the series: one table
        newest_first = [(run["run"]["id"], run["run"]["started"], run["verdict"]) for run in (run_2, run_1)]
        assert [tuple(row.split()[:3]) for row in listing[3:]] == newest_first
        assert listing[4].endswith("last good")
        # The mail and the history count alike: FAIL, ERROR, WARN as the line says them, the regression
        # in a column of its own rather than a second FAIL.
        said = dict.fromkeys(("FAIL", "ERROR", "WARN"), "0")
        said |= {s: n for n, s in re.findall(r"(\d+) (FAIL|ERROR|WARN)\b", line.split(" — ")[1])}
        assert listing[3].split()[3:7] == [said["FAIL"], said["ERROR"], said["WARN"], "1"], (line, listing)
        trend = night.history("--check", "ib.port_state", "--host", "node2").splitlines()
        assert trend[0] == "ib.port_state on node2"
        assert [row.split()[1:3] for row in trend[3:]] == [[id_1, "PASS"], [id_2, "FAIL"]]
        tally = night.history("--check", "ib.port_state")
        assert re.search(rf"{id_2}\s+1\s+0\s+1\s+0\s+0\s+node2 FAIL$", tally, re.M), tally

        # Ids are times: a prefix both share is refused, the shortest one that is id_1's alone pins it.
        common = id_1[: next(i for i, (a, b) in enumerate(zip(id_1, id_2, strict=True)) if a != b)]
        ambiguous = night.diagnose("baseline", common, "--history", str(night.db))
        assert ambiguous.returncode == 2 and id_1 in ambiguous.stderr and id_2 in ambiguous.stderr
        pinned = night.diagnose("baseline", id_1[: len(common) + 1], "--history", str(night.db))
        assert pinned.returncode == 0, pinned.stderr
        assert pinned.stdout.strip() == f"baseline: {id_1}"
        # The report path the nightly line prints names the same run.
        by_path = night.diagnose(
            "baseline", str(night.runs / folder_1 / "report.html"), "--history", str(night.db)
        )
        assert by_path.returncode == 0 and by_path.stdout.strip() == f"baseline: {id_1}", by_path.stderr
        assert night.history().splitlines()[4].endswith("baseline, last good")

        # A run that finds the lock taken (last night's run still going) starts nothing and says why.
        database = night.db.read_bytes()
        lock = acquire_lock(night.db)
        try:
            locked = night.run()
        finally:
            lock.release()
        assert locked.returncode == 4 and locked.stdout == ""
        message = locked.stderr.strip()
        assert len(message.splitlines()) == 1 and "another diagnose run is in progress" in message
        assert f"pid {os.getpid()}" in message and str(lock_path(night.db)) in message
        assert night.folders() == sorted([folder_1, folder_2])
        assert night.db.read_bytes() == database

    # Night 3: node2 repaired. keep_runs 1 removes night 2 (a failed run, neither baseline nor last good)
    # from disk and from the history; night 1 stays as the pinned baseline, though no longer the last good.
    with night.hosts(tmp_path, "bed-night3", [healthy_h100("node1"), healthy_h100("node2")]):
        third = night.run()
    line = summary(third)
    assert third.returncode == 0 and line.endswith("report.html") and "no regressions" in line, line
    folder_3 = max(night.folders())
    assert night.folders() == sorted([folder_1, folder_3])
    id_3 = night.results(folder_3)["run"]["id"]
    rows = {row.split()[0]: row for row in night.history().splitlines()[3:]}
    assert set(rows) == {id_1, id_3}
    assert rows[id_1].endswith("baseline") and rows[id_3].endswith("last good")


def test_two_unchanged_nights_pass(testbed: TestBed, tmp_path: Path) -> None:
    """Issue 36, item 2: the shipped nightly settings, twice, nothing changed. gloo's busbw on the bed
    wanders by tens of percent between the nights, and is not judged: both nights PASS, exit 0, and the
    second says no regressions."""
    night = Night(tmp_path, keep_runs=10)
    testbed.add_many([healthy_h100("node1"), healthy_h100("node2")])
    testbed.write_inventory(night.inventory)
    for _ in range(2):
        done = night.run()
        line = summary(done)
        assert done.returncode == 0 and ": PASS — " in line and "no regressions" in line, line
    runs = [night.results(folder) for folder in night.folders()]
    assert len(runs) == 2
    for run in runs:
        (bench,) = run["benchmarks"]
        assert bench["backend"] == "gloo" and bench["expected_busbw_gbps"] is None
        assert not [c for c in run["checks"] if c["id"].startswith("history.")]
