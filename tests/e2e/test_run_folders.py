"""Runs never mix, and one name finds a run everywhere: through the real command line, a folder holding
another run is refused (run, trace, report -o), and `diagnose report` and `diagnose baseline` take the run's
id, its folder's name or path, or a file in it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from diagnose import history
from tests.support.cli import diagnose
from tests.support.paths import REPO

pytestmark = pytest.mark.e2e

FIXTURE = REPO / "tests" / "fixtures" / "results" / "cpu_only_local.json"
TRACE = REPO / "tests" / "fixtures" / "traces" / "cpu" / "healthy_rank0.json.gz"


def one_error_line(done) -> str:  # type: ignore[no-untyped-def]
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def write_run(folder: Path, run_id: str, started: str = "2026-11-21T02:00:00+00:00") -> Path:
    """A finished run's folder: its results.json (a real local run's, re-identified) and a report."""
    document = json.loads(FIXTURE.read_text())
    document["run"].update(id=run_id, started=started)
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(document))
    (folder / "report.html").write_text("<html>the old run's report</html>")
    return folder


def test_a_run_into_a_folder_holding_another_run_is_refused_and_touches_nothing(tmp_path: Path) -> None:
    out = write_run(tmp_path / "acceptance", "20261121T020000Z-ab12")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    done = diagnose("run", "--skip-benchmarks", "-o", str(out), "--format", "json", cwd=tmp_path)
    line = one_error_line(done)
    assert line.startswith(f"diagnose: --out {out}: holds another run (run 20261121T020000Z-ab12);"), line
    assert "new or empty folder" in line and done.stdout == ""
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before

    traced = diagnose("trace", str(TRACE), "-o", str(out), cwd=tmp_path)
    assert one_error_line(traced).startswith(f"diagnose: --out {out}: holds another run")


def test_an_empty_existing_folder_takes_a_run(tmp_path: Path) -> None:
    out = tmp_path / "empty"
    out.mkdir()
    done = diagnose("run", "--skip-benchmarks", "-o", str(out), "--format", "json", cwd=tmp_path)
    assert done.returncode in (0, 1), done.stderr
    run_id = json.loads((out / "results.json").read_text())["run"]["id"]
    again = diagnose("run", "--skip-benchmarks", "-o", str(out), "--format", "json", cwd=tmp_path)
    assert f"holds another run (run {run_id})" in one_error_line(again)


def test_report_finds_a_run_by_id_folder_name_path_or_history(tmp_path: Path) -> None:
    folder = write_run(tmp_path / "diagnose-runs" / "20261121T020000Z-ab12-prod", "20261121T020000Z-ab12")
    for name in ("20261121T020000Z-ab12", "20261121T020000Z-ab12-prod", "20261121T02", str(folder)):
        (folder / "junit.xml").unlink(missing_ok=True)
        done = diagnose("report", name, "--format", "junit", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == str(Path("diagnose-runs/20261121T020000Z-ab12-prod/junit.xml")) or (
            Path(done.stdout.strip()).resolve() == (folder / "junit.xml").resolve()
        ), done.stdout
    # Elsewhere, an id is found through the history, which recorded the run's folder.
    db = tmp_path / "history.sqlite3"
    history.record_run(db, json.loads((folder / "results.json").read_text()), folder)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    found = diagnose(
        "report", "20261121T020000Z-ab12", "--history", str(db), "--format", "prom", cwd=elsewhere
    )
    assert found.returncode == 0 and Path(found.stdout.strip()) == folder / "diagnose.prom", found.stderr
    missing = diagnose("report", "20261121T030000Z-0000", "--history", str(db), cwd=elsewhere)
    assert "no run '20261121T030000Z-0000' in the history" in one_error_line(missing)


def test_report_out_never_mixes_two_runs(tmp_path: Path) -> None:
    first = write_run(tmp_path / "first", "20261121T020000Z-ab12")
    second = write_run(tmp_path / "second", "20261122T020000Z-cd34")
    share = tmp_path / "share"
    done = diagnose("report", str(first), "-o", str(share), "--format", "junit", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads((share / "results.json").read_text())["run"]["id"] == "20261121T020000Z-ab12"
    again = diagnose("report", str(first), "-o", str(share), "--format", "junit,prom", cwd=tmp_path)
    assert again.returncode == 0, again.stderr  # the same run's reports, rendered again
    other = diagnose("report", str(second), "-o", str(share), "--format", "junit", cwd=tmp_path)
    line = one_error_line(other)
    assert f"--out {share}: holds another run (run 20261121T020000Z-ab12)" in line
    assert "20261122T020000Z-cd34" in line


def test_baseline_takes_the_folder_the_nightly_names_old_or_new(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite3"
    runs = tmp_path / "nightly"
    old = write_run(runs / "2026-11-20T02-00-00Z", "20261120T020000Z-aa11", "2026-11-20T02:00:00+00:00")
    new = write_run(runs / "20261121T020000Z-bb22", "20261121T020000Z-bb22")
    for folder in (old, new):
        history.record_run(db, json.loads((folder / "results.json").read_text()), folder)
    for name, run_id in (
        (str(old), "20261120T020000Z-aa11"),  # the folder's path
        (str(new / "report.html"), "20261121T020000Z-bb22"),  # the report path the nightly line prints
        ("2026-11-20T02-00-00Z", "20261120T020000Z-aa11"),  # an old dated name, known to the history
        ("20261121T020000Z-bb22", "20261121T020000Z-bb22"),
    ):
        done = diagnose("baseline", name, "--history", str(db), cwd=tmp_path)
        assert done.returncode == 0 and done.stdout.strip() == f"baseline: {run_id}", done.stderr
    shutil.rmtree(old)  # retention removed it: the history still knows its name
    done = diagnose("baseline", "2026-11-20T02-00-00Z", "--history", str(db), cwd=tmp_path)
    assert done.stdout.strip() == "baseline: 20261120T020000Z-aa11", done.stderr
