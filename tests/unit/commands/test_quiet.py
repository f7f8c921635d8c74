"""``--quiet`` is what cron mails: nothing may reach stderr but the engine's problems, not even a library's
Python warning raised while the run goes on (matplotlib's legend warning once did)."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from diagnose.commands import run as runs


class _WarningRun:
    """A run whose work raises a library warning, as a plot of a run without rows did."""

    def __init__(self, request: Any, reporter: Any) -> None:
        self.reporter = reporter

    def execute(self) -> str:
        warnings.warn("No artists with labels found to put in legend.", UserWarning, stacklevel=1)
        return "outcome"


@pytest.mark.parametrize("quiet", [True, False])
def test_quiet_keeps_library_warnings_off_stderr(
    quiet: bool, monkeypatch: pytest.MonkeyPatch, recwarn: pytest.WarningsRecorder
) -> None:
    monkeypatch.setattr(runs, "Run", _WarningRun)
    monkeypatch.setattr(runs.signal, "signal", lambda *args: None)  # the test process keeps its SIGTERM
    assert runs.execute(None, quiet=quiet) == "outcome"  # type: ignore[arg-type]
    assert len(recwarn) == (0 if quiet else 1)


class _Stop(Exception):
    """Raised in place of the run: what matters here is printed before it starts."""


@pytest.mark.parametrize("quiet", [True, False])
def test_quiet_keeps_the_missing_profile_note_off_stderr(
    quiet: bool, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A nightly of an inventory without ``diagnose_profile`` under cron: the note that no profile was chosen
    (some 250 characters) reached the mail every night beside the verdict line, which does not need it."""
    from diagnose.cli import main

    inventory = tmp_path / "inv.yaml"
    inventory.write_text("all:\n  hosts:\n    node1: {ansible_host: 127.0.0.1}\n")

    def stop(*_args: Any, **_kwargs: Any) -> None:
        raise _Stop

    monkeypatch.setattr(runs, "execute", stop)
    argv = ["run", "-i", str(inventory), "--playbook", "nightly", "-o", str(tmp_path / "out")]
    with pytest.raises(_Stop):
        main([*argv, "--quiet"] if quiet else argv)
    err = capsys.readouterr().err
    assert ("no profile chosen" in err) is not quiet, err
