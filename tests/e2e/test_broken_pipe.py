"""Output into a pipe whose reader left (`diagnose ... | head -1`): the command ends quietly, no traceback,
with the exit status of a program stopped by SIGPIPE (issue 36, item 7). Real processes, real pipes."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import FIXTURES, REPO

pytestmark = pytest.mark.e2e

CPU_TRACES = FIXTURES / "traces" / "cpu"


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def test_a_reader_gone_before_the_first_line_ends_the_command_quietly(tmp_path: Path) -> None:
    """`diagnose checks` prints its table with plain print(): the pipe's read end is closed before it starts."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "diagnose", "checks"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            env=_env(),
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert done.stderr == "", done.stderr
    assert done.returncode == 141


def test_trace_into_head_prints_its_first_line_and_no_traceback(tmp_path: Path) -> None:
    """The issue's command, through a shell pipe into `head -1`; the trace's reports are written all the same."""
    argv = [
        sys.executable, "-m", "diagnose", "trace", str(CPU_TRACES / "healthy_rank0.json.gz"),
        str(CPU_TRACES / "healthy_rank1.json.gz"), "--out", str(tmp_path / "out"), "--format", "json,html",
    ]  # fmt: skip
    script = f'{shlex.join(argv)} | head -1; echo "status ${{PIPESTATUS[0]}}"'
    done = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, cwd=tmp_path, env=_env(), timeout=300
    )
    lines = done.stdout.splitlines()
    assert lines[0].startswith("train.overlap "), done.stdout
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr
    assert lines[-1] in ("status 0", "status 141"), lines  # 0: head read after the last line was written
    assert (tmp_path / "out" / "report.html").is_file()
