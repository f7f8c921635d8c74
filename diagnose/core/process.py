"""A local program run to its end: an argv list (never a shell line), a timeout, both outputs as text.

The controller runs the Slurm clients (sinfo, scontrol, sbatch, scancel), kubectl and pytest this way.
Each caller words a failure for its own readers (a configuration error, a Slurm error, a check's
ERROR, an answer to pass on); what they share is here, so that a program that is not installed, not
executable or silent past its timeout is always told apart, in one line, as :class:`ProgramError`.
A program that ran and failed is not an error here: its exit status and outputs are the answer.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

#: ``ProgramError.reason``: not on PATH (or no such file), not executable, no answer in time, other.
MISSING, DENIED, TIMEOUT, FAILED = "missing", "denied", "timeout", "failed"


class ProgramError(RuntimeError):
    """A program that could not be run to its end; the message names it and says why.

    ``reason`` is one of MISSING, DENIED, TIMEOUT, FAILED; ``output`` holds what a program that timed
    out had printed by then (both streams), kept as evidence by callers that want it.
    """

    def __init__(self, message: str, reason: str, output: str = "") -> None:
        super().__init__(message)
        self.reason = reason
        self.output = output


def _text(data: str | bytes | None) -> str:
    # TimeoutExpired carries bytes even when the run asked for text.
    if isinstance(data, bytes):
        return data.decode("utf-8", errors="replace")
    return data or ""


def run_program(
    argv: Sequence[str], timeout: float, stdin: str | None = None, cwd: Path | str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` with ``stdin`` as its input (none: an empty input, never the controller's terminal)
    and return it finished, outputs captured; ProgramError when it could not start or end in time."""
    args = list(argv)
    name = args[0]
    try:
        return subprocess.run(
            args,
            input=stdin,
            stdin=subprocess.DEVNULL if stdin is None else None,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=cwd,
            check=False,
        )
    except FileNotFoundError:
        raise ProgramError(f"{name}: command not found", MISSING) from None
    except PermissionError:
        raise ProgramError(f"{name}: not executable", DENIED) from None
    except subprocess.TimeoutExpired as exc:
        output = _text(exc.stdout) + _text(exc.stderr)
        raise ProgramError(f"{name} gave no answer in {timeout:.0f} s", TIMEOUT, output) from None
    except OSError as exc:
        raise ProgramError(f"{name} could not start: {exc.strerror or exc}", FAILED) from None
