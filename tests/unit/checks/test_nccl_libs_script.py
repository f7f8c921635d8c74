"""nccl.version's library listing runs ``ldconfig -p`` once and prints what the parser reads from it."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

from checks.nccl_version import LIBS_SCRIPT
from diagnose.parsers.nccl_version import parse_nccl_libs

CAPTURED = Path(__file__).resolve().parents[2] / "fixtures" / "captured" / "nccl_version"


def test_ldconfig_runs_once_and_its_nccl_lines_are_printed_and_resolved(tmp_path: Path) -> None:
    nccl = [line for line in (CAPTURED / "libs_h200x4.txt").read_text().splitlines() if "libnccl.so" in line]
    listing = tmp_path / "listing.txt"
    listing.write_text((CAPTURED / "ldconfig_devbox_no_nccl.txt").read_text() + "\n".join(nccl) + "\n")
    calls = tmp_path / "calls"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "ldconfig"
    fake.write_text(f"#!/bin/sh\necho x >>{shlex.quote(str(calls))}\ncat {shlex.quote(str(listing))}\n")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    done = subprocess.run(["/bin/sh", "-c", LIBS_SCRIPT], capture_output=True, text=True, env=env, check=True)
    lines = done.stdout.splitlines()
    assert calls.read_text().count("x") == 1
    assert lines[: len(nccl)] == nccl
    assert [line.split()[0] for line in lines[len(nccl) : 2 * len(nccl)]] == ["resolved"] * len(nccl)
    assert parse_nccl_libs(done.stdout)
