"""A launch is polled by a small shell script: its exit status must come back even before the progress file
exists, or a program that died at once is reported as hung after the startup timeout instead of failed."""

from __future__ import annotations

import subprocess
from pathlib import Path

from diagnose.launchers.remote import poll_script


def _poll(folder: Path, offset: int | None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", "-c", poll_script(str(folder), offset)], capture_output=True, text=True, check=False
    )


def test_a_program_that_ended_before_opening_its_progress_file_still_reports_its_exit_status(
    tmp_path: Path,
) -> None:
    (tmp_path / "rc").write_text("1\n")
    done = _poll(tmp_path, 0)
    assert done.returncode == 0 and done.stdout == "rc=1\n"


def test_new_bytes_of_the_progress_file_follow_the_status(tmp_path: Path) -> None:
    (tmp_path / "results.jsonl").write_text('{"a": 1}\n{"b": 2}\n')
    done = _poll(tmp_path, 9)
    assert done.returncode == 0 and done.stdout == 'rc=\n{"b": 2}\n'
