"""The command line as an operator runs it: a fresh `python -m diagnose.cli` process, output captured."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.support.paths import REPO


def diagnose(
    *argv: str,
    cwd: Path,
    timeout: float = 600,
    before: Sequence[Path] = (),
    env: Mapping[str, str | None] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``before``: folders searched for modules ahead of everything (stand-ins for installed packages);
    ``env``: variables changed for this process (None removes one, e.g. SSH_AUTH_SOCK)."""
    changed = {**os.environ, **(env or {}), "PYTHONPATH": os.pathsep.join([*map(str, before), str(REPO)])}
    process_env = {k: v for k, v in changed.items() if v is not None}
    return subprocess.run(
        [sys.executable, "-m", "diagnose.cli", *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=process_env,
        timeout=timeout,
    )
