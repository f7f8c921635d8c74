"""A mistyped ``--history`` (issue 36, item 8): every command reading history refuses a database that does not
exist, with one line and exit 2, and leaves nothing behind; only a run recording history makes one, and only
where its folder exists (or at the default path)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import diagnose

pytestmark = pytest.mark.e2e


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize(
    "argv",
    [
        ("history",),
        ("history", "--check", "ib.port_state"),
        ("history", "--collective", "all_reduce"),
        ("baseline", "20261121T020000Z"),
    ],
)
def test_reading_a_missing_database_is_refused_and_creates_nothing(
    tmp_path: Path, argv: tuple[str, ...]
) -> None:
    before = files_under(tmp_path)
    for typo in (tmp_path / "typo" / "history.sqlite3", tmp_path / "histroy.sqlite3"):
        done = diagnose(*argv, "--history", str(typo), cwd=tmp_path)
        assert done.returncode == 2, done.stdout + done.stderr
        assert done.stdout == ""
        (line,) = done.stderr.splitlines()
        assert str(typo) in line and "no history database" in line, line
        assert "Traceback" not in done.stderr
    assert files_under(tmp_path) == before


def test_a_run_refuses_a_history_folder_that_does_not_exist(tmp_path: Path) -> None:
    typo = tmp_path / "var-lib-diagnsoe" / "history.sqlite3"
    done = diagnose("run", "--playbook", "nightly", "--history", str(typo), "--runs-dir", str(tmp_path / "runs"),
                    cwd=tmp_path, timeout=120)  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert f"the folder {typo.parent} does not exist" in line, line
    assert files_under(tmp_path) == []  # no folder, no database, no lock, no run folder


def test_the_default_history_not_made_yet_is_no_runs_and_stays_unmade(tmp_path: Path) -> None:
    data = tmp_path / "data"
    done = diagnose("history", cwd=tmp_path, env={"XDG_DATA_HOME": str(data)})
    assert done.returncode == 0, done.stderr
    default = data / "diagnose" / "history.sqlite3"
    said = (
        f"no runs recorded yet: no history at {default} (a nightly run, or a run given --history, makes it)"
    )
    assert done.stdout.strip() == said
    assert not data.exists()
