"""Telling the operator which benchmark runs now: the stage, its hosts and each launch's steps.

A sweep, a probe or a burn-in can take minutes with nothing to show for it until it ends; an operator
watching a terminal, or reading a cron log the next morning, must be able to tell a slow stage from a hung
one. The engine hands the benchmark stage a :class:`Teller` over its reporter; the stage and every extra
after it name themselves through it (:meth:`Teller.stage`), and each launch tells it the steps its program
announces (:class:`LaunchProgress`: the first ``warm`` or ``begin`` record of each collective or phase of the
progress protocol, :mod:`diagnose.shipped.common`), plus how it ended when it did not end well. One line
per stage and per step, never per measured row: a sweep of twenty sizes is one step per collective.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from diagnose.core.units import counted, duration


class Listener(Protocol):
    """Who hears of the stages and steps: the engine's :class:`~diagnose.engine.reporter.Reporter`."""

    def stage_started(self, stage: str, hosts: Sequence[str] = ()) -> None: ...

    def step(self, stage: str, hosts: Sequence[str], detail: str) -> None: ...

    def stage_finished(self, stage: str, seconds: float) -> None: ...


class Teller:
    """The stage that runs now (``benchmarks`` until an extra or a search names itself) and the listener
    told of it; without a listener it says nothing. Launches run in threads of their own: nothing a listener
    raises may reach them, so every notice is guarded."""

    def __init__(self, listener: Listener | None = None, stage: str = "benchmarks") -> None:
        self.listener = listener
        self.name = stage

    def step(self, hosts: Sequence[str], detail: str) -> None:
        """One step of the stage that runs now, on ``hosts``."""
        self._tell("step", self.name, list(hosts), detail)

    @contextmanager
    def stage(self, name: str, hosts: Sequence[str]) -> Iterator[None]:
        """Steps told inside belong to stage ``name``; its start is told, and its end with its duration
        when it ends normally (an interrupt's own lines say how a run stopped)."""
        outer, began = self.name, time.monotonic()
        self.name = name
        self._tell("stage_started", name, list(hosts))
        try:
            yield
        finally:
            self.name = outer
        self._tell("stage_finished", name, time.monotonic() - began)

    def _tell(self, notice: str, *args: Any) -> None:
        if self.listener is None:
            return
        try:
            getattr(self.listener, notice)(*args)
        except Exception:  # progress is a courtesy: it must never end a launch or a stage
            return


class LaunchProgress:
    """What one launch tells its stage: each new collective or phase its program begins, and, unless it
    ended done, how and after how long it ended."""

    def __init__(self, teller: Teller | None, nproc: int) -> None:
        self.teller = teller
        self.nproc = nproc
        self.hosts: list[str] = []
        self.runner = "the launch"
        self.began = time.monotonic()
        self.seen: set[str] = set()

    def begin(self, hosts: Sequence[str], runner: str) -> None:
        """The launch starts on ``hosts`` (every host a rank runs on), started by ``runner``."""
        self.hosts, self.runner, self.began = list(hosts), runner, time.monotonic()

    def record(self, record: dict[str, Any]) -> None:
        """A progress record of the program: a phase not seen before is a step."""
        phase = record.get("collective")
        if record.get("event") not in ("warm", "begin") or not isinstance(phase, str) or phase in self.seen:
            return
        self.seen.add(phase)
        if self.teller is not None:
            self.teller.step(self.hosts, f"{phase}, {counted(len(self.hosts) * self.nproc, 'rank')}")

    def ended(self, status: str) -> None:
        """The launch is over; only an end other than done is told (the next step shows the rest)."""
        if self.teller is not None and status != "done":
            spent = duration(time.monotonic() - self.began)
            self.teller.step(self.hosts, f"{self.runner} {ENDINGS.get(status, status)} after {spent}")


#: How a launch that did not finish ended, as the progress line says it (LaunchOutcome.status).
ENDINGS = {
    "failed": "failed",
    "hung": "hung, stopped",
    "host_lost": "lost a host",
    "deadline": "stopped at the run's time budget",
}
