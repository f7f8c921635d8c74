"""The reports of an interrupted run (issue 45, item 4) and a second Ctrl-C while they are written.

An interrupted run wrote no report until `diagnose report`; now it writes the formats asked for, of what was
measured. The stop of the remote work ignores a second Ctrl-C (it must not leave half the hosts running), but
the report writing that follows must not: an operator who presses Ctrl-C again wants out, with results.json
whole and each report either whole or absent. Both interrupts here are real SIGINTs the process sends itself
at the moment an operator's would land, through the handlers the run installs.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from diagnose.config.playbook import load_playbook
from diagnose.engine import run as engine_run
from diagnose.engine import stages
from diagnose.engine.run import Run, RunOptions, RunRequest
from diagnose.render.render import render as real_render


@pytest.fixture
def handlers_kept() -> Iterator[None]:
    """The run sets SIGINT and SIGTERM aside for its stop; the test process gets its own back."""
    saved = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, saved[0])
        signal.signal(signal.SIGTERM, saved[1])


def _ctrl_c(*args: Any, **kwargs: Any) -> Any:
    """The host checks, cut short by the operator's Ctrl-C."""
    signal.raise_signal(signal.SIGINT)
    raise AssertionError("SIGINT did not interrupt the host checks")


def _request(tmp_path: Path, formats: set[str]) -> RunRequest:
    options = RunOptions(out=str(tmp_path / "out"))
    return RunRequest(options, load_playbook("acceptance"), [], [], [], [], formats, None)


def test_a_second_ctrl_c_while_the_reports_are_written_ends_them_and_keeps_results_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, handlers_kept: None
) -> None:

    def html_then_ctrl_c(results: Path, formats: set[str], out_dir: Path | None = None) -> list[Path]:
        written = real_render(results, {"json", "html"})
        signal.raise_signal(signal.SIGINT)  # the second Ctrl-C, after the HTML, before the JUnit
        return written + real_render(results, formats - {"json", "html"})

    monkeypatch.setattr(stages, "run_host_stage", _ctrl_c)
    monkeypatch.setattr(engine_run, "render", html_then_ctrl_c)
    outcome = Run(_request(tmp_path, {"json", "html", "junit"})).execute()

    out = tmp_path / "out"
    assert outcome.status == "interrupted" and outcome.out_dir == out
    document = json.loads((out / "results.json").read_text())
    assert document["verdict"] == "INCOMPLETE" and document["run"]["interrupted"] is True
    assert outcome.written == [out / "results.json", out / "report.html"]
    assert 'class="verdict-word">INCOMPLETE<' in (out / "report.html").read_text()
    assert not (out / "junit.xml").exists()
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]
    assert outcome.notes == [f"interrupted again: junit.xml not written; {out / 'results.json'} is complete"]
    # the summary and the exit follow at once: a third Ctrl-C must not cut them short
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_an_interrupted_run_writes_every_report_asked_for_of_what_was_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, handlers_kept: None
) -> None:
    monkeypatch.setattr(stages, "run_host_stage", _ctrl_c)
    outcome = Run(_request(tmp_path, {"json", "html", "junit", "prom"})).execute()

    out = tmp_path / "out"
    assert outcome.status == "interrupted" and not outcome.notes
    assert outcome.written == [out / n for n in ("results.json", "report.html", "junit.xml", "diagnose.prom")]
    junit = (out / "junit.xml").read_text()
    assert 'errors="1"' in junit and 'type="INCOMPLETE"' in junit
    assert "diagnose_run_incomplete{} 1.0" in (out / "diagnose.prom").read_text().splitlines()
