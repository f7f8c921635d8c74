"""The command line as an operator runs it: a fresh `python -m diagnose.cli` process, output captured."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from tests.support.paths import REPO


def diagnose(
    *argv: str, cwd: Path, timeout: float = 600, before: Sequence[Path] = ()
) -> subprocess.CompletedProcess[str]:
    """``before``: folders searched for modules ahead of everything (stand-ins for installed packages)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*map(str, before), str(REPO)])}
    return subprocess.run(
        [sys.executable, "-m", "diagnose.cli", *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
