"""What the engine tells its caller while a run goes on: hosts done, the stage that runs now with its hosts
and steps, and trouble that is no check's result.

The engine never prints: the command line shows progress on a terminal and timestamped lines without one
(a cron log must say what ran when), ``--quiet`` and node-check keep silent (cron mail and slurmd's log stay
one line), and tests and site scripts want silence. Each caller hands the stages a :class:`Reporter`; this
base class says nothing, a caller overrides what it shows. A run wraps the caller's reporter in
:class:`~diagnose.engine.underway.Underway`, which keeps what is under way: it tells a long step again
while it runs (:meth:`Reporter.still`), says what a stage cut short was still running, and records each
stage's time in results.json.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

#: The first stage's name, in progress lines and results.json's ``run.stages``.
HOST_STAGE = "host checks"


class Reporter:
    """Silent by default; every method is a notice, none may raise into the run. The stage notices may come
    from several threads at once (launches run side by side)."""

    def hosts_started(self, total: int) -> None:
        """The host stage begins on ``total`` hosts."""

    def host_done(self, name: str) -> None:
        """One host's checks are judged and in the results."""

    def hosts_finished(self) -> None:
        """The host stage is over (every host done, or the time budget ran out)."""

    def stage_started(self, stage: str, hosts: Sequence[str] = ()) -> None:
        """A stage after the host checks begins on ``hosts`` (the benchmarks, an extra after the sweep
        within them, the second snapshot, the reports)."""

    def step(self, stage: str, hosts: Sequence[str], detail: str, planned_s: float | None = None) -> None:
        """One step of ``stage`` on ``hosts``: a collective or phase a launch began, or how it ended;
        ``planned_s``: how long the step is meant to take, where it has a length of its own (a burn-in)."""

    def figure(self, stage: str, hosts: Sequence[str], text: str) -> None:
        """The latest figure the step under way on ``hosts`` measured (``612 TFLOP/s, 71 °C``)."""

    def step_finished(self, stage: str, hosts: Sequence[str]) -> None:
        """The launch on ``hosts`` is over: its last step no longer runs."""

    def still(self, stage: str, hosts: Sequence[str], text: str) -> None:
        """A step, or a stage without one, has run for a while since it was last told: ``text`` says
        which, for how long against what was planned, and its latest figure (the run's heartbeat)."""

    def stage_finished(self, stage: str, seconds: float) -> None:
        """``stage`` ended normally after ``seconds``."""

    def stage_interrupted(self, stage: str, seconds: float, running: Sequence[str] = ()) -> None:
        """``stage`` was cut short (Ctrl-C, SIGTERM) after ``seconds``; ``running``: what was still under
        way then (``q3 still running ibstat (6 s)``)."""

    def run_finished(self, seconds: float) -> None:
        """The run is measured, recorded and rendered, ``seconds`` after it started; the summary follows."""

    def problem(self, message: str) -> None:
        """Something the operator should hear that no result records: a connection that would not close,
        a second snapshot that failed, work the time budget could not stop."""

    @contextmanager
    def stage(self, name: str, hosts: Sequence[str] = ()) -> Iterator[None]:
        """The block as stage ``name``: its start told, and its end with its duration, as done when it ends
        normally and as interrupted when Ctrl-C cuts it short (a stage cut short is not done); an error has
        lines of its own."""
        began = time.monotonic()
        self.stage_started(name, hosts)
        try:
            yield
        except KeyboardInterrupt:
            self.stage_interrupted(name, time.monotonic() - began)
            raise
        self.stage_finished(name, time.monotonic() - began)
