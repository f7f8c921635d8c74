"""One rule for a test whose prerequisite (a program, a bed, a kernel feature) is missing on this machine.

CI (``CI=true``, set by .ci/run after .ci/install-test-deps) installs what the suite drives, so there a
missing prerequisite fails the test loudly: a suite that passes by skipping proves nothing. Elsewhere the
test is skipped with the reason, so a developer without root or Slurm can still run the rest.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    """Whether this is the CI run (``CI`` set to true, 1 or yes, as CI services do)."""
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


def unavailable(what: str, problem: str) -> NoReturn:
    """Stop the calling test because ``what`` cannot run here: a failure under CI, a skip elsewhere."""
    if in_ci():
        pytest.fail(f"{what} cannot run under CI: {problem}")
    pytest.skip(f"{what} cannot run here: {problem}")


def require(what: str, problem: str | None) -> None:
    """Let the calling test go on when there is no ``problem``; otherwise :func:`unavailable`."""
    if problem:
        unavailable(what, problem)
