"""Telling the operator which benchmark runs now: the stage, its hosts and each launch's steps.

A sweep, a probe or a burn-in can take minutes with nothing to show for it until it ends; an operator
watching a terminal, or reading a cron log the next morning, must be able to tell a slow stage from a hung
one. The engine hands the benchmark stage a :class:`Teller` over its reporter; the stage and every extra
after it name themselves through it (:meth:`Teller.stage`), and each launch tells it the steps its program
announces (:class:`LaunchProgress`: the first ``warm`` or ``begin`` record of each collective or phase of the
progress protocol, :mod:`diagnose.shipped.common`), plus how it ended when it did not end well. One line
per stage and per step, never per measured row: a sweep of twenty sizes is one step per collective. Each
row's figures (a collective's busbw, a burn-in minute's TFLOP/s, temperature and SM clock) are handed on
as the step's latest figure, which the run's heartbeat quotes while the step goes on
(:mod:`diagnose.engine.underway`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from diagnose.core.units import counted, duration, human_bytes, is_number


class Listener(Protocol):
    """Who hears of the stages and steps: the engine's :class:`~diagnose.engine.reporter.Reporter`."""

    def stage_started(self, stage: str, hosts: Sequence[str] = ()) -> None: ...

    def step(self, stage: str, hosts: Sequence[str], detail: str, planned_s: float | None = None) -> None: ...

    def figure(self, stage: str, hosts: Sequence[str], text: str) -> None: ...

    def step_finished(self, stage: str, hosts: Sequence[str]) -> None: ...

    def stage_finished(self, stage: str, seconds: float) -> None: ...

    def stage_interrupted(self, stage: str, seconds: float, running: Sequence[str] = ()) -> None: ...


class Teller:
    """The stage that runs now (``benchmarks`` until an extra or a search names itself) and the listener
    told of it; without a listener it says nothing. Launches run in threads of their own: nothing a listener
    raises may reach them, so every notice is guarded."""

    def __init__(self, listener: Listener | None = None, stage: str = "benchmarks") -> None:
        self.listener = listener
        self.name = stage

    def step(self, hosts: Sequence[str], detail: str, planned_s: float | None = None) -> None:
        """One step of the stage that runs now, on ``hosts``; ``planned_s``: its length, where it has one."""
        self._tell("step", self.name, list(hosts), detail, planned_s)

    def figure(self, hosts: Sequence[str], text: str) -> None:
        """The latest figure of the step under way on ``hosts``."""
        self._tell("figure", self.name, list(hosts), text)

    def finished(self, hosts: Sequence[str]) -> None:
        """The launch on ``hosts`` is over."""
        self._tell("step_finished", self.name, list(hosts))

    @contextmanager
    def stage(self, name: str, hosts: Sequence[str]) -> Iterator[None]:
        """Steps told inside belong to stage ``name``; its start is told, and its end with its duration:
        as done when it ends normally, as interrupted when Ctrl-C cuts it short."""
        outer, began = self.name, time.monotonic()
        self.name = name
        self._tell("stage_started", name, list(hosts))
        try:
            yield
        except KeyboardInterrupt:
            self._tell("stage_interrupted", name, time.monotonic() - began)
            raise
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

    def __init__(
        self, teller: Teller | None, nproc: int, planned_s: Callable[[str], float | None] | None = None
    ) -> None:
        self.teller = teller
        self.nproc = nproc
        self.planned_s = planned_s
        self.hosts: list[str] = []
        self.runner = "the launch"
        self.began = time.monotonic()
        self.seen: set[str] = set()

    def begin(self, hosts: Sequence[str], runner: str) -> None:
        """The launch starts on ``hosts`` (every host a rank runs on), started by ``runner``."""
        self.hosts, self.runner, self.began = list(hosts), runner, time.monotonic()

    def record(self, record: dict[str, Any]) -> None:
        """A progress record of the program: a phase not seen before is a step; a row's figures are the
        step's latest."""
        if self.teller is None:
            return
        phase = record.get("collective")
        if record.get("event") == "row" and (figure := figure_of(record)) is not None:
            self.teller.figure(self.hosts, figure)
        if record.get("event") not in ("warm", "begin") or not isinstance(phase, str) or phase in self.seen:
            return
        self.seen.add(phase)
        planned = self.planned_s(phase) if self.planned_s is not None else None
        self.teller.step(self.hosts, f"{phase}, {counted(len(self.hosts) * self.nproc, 'rank')}", planned)

    def ended(self, status: str) -> None:
        """The launch is over; only an end other than done is told (the next step shows the rest)."""
        if self.teller is None:
            return
        if status != "done":
            spent = duration(time.monotonic() - self.began)
            self.teller.step(self.hosts, f"{self.runner} {ENDINGS.get(status, status)} after {spent}")
        self.teller.finished(self.hosts)


def figure_of(row: dict[str, Any]) -> str | None:
    """What a progress line quotes of a measured row: a collective's busbw at its size; a GPU phase's
    slowest TFLOP/s, and from rank 0's nvidia-smi samples of a burn-in minute the hottest GPU's last
    temperature and the slowest last SM clock. None when the row carries none of them."""
    parts = []
    if is_number(row.get("busbw_gbps")) and is_number(row.get("bytes")):
        parts.append(f"{row['busbw_gbps']:.3g} GB/s busbw at {human_bytes(int(row['bytes']))}")
    gpus = [g for g in row.get("gpus") or [] if isinstance(g, dict)]
    tflops = [g["tflops"] for g in gpus if is_number(g.get("tflops"))]
    if tflops:
        parts.append(f"{min(tflops):.3g} TFLOP/s")
    fields, samples = row.get("fields"), row.get("samples")
    if isinstance(fields, list) and isinstance(samples, dict):
        last = [rows[-1] for rows in samples.values() if isinstance(rows, list) and rows]
        for name, pick, unit in (("temperature.gpu", max, "°C"), ("clocks.sm", min, "MHz")):
            if name in fields:
                index = fields.index(name) + 1  # each sample is [time, value per field]
                values = [r[index] for r in last if len(r) > index and is_number(r[index])]
                if values:
                    parts.append(f"{pick(values):.0f} {unit}")
    return ", ".join(parts) or None


#: How a launch that did not finish ended, as the progress line says it (LaunchOutcome.status).
ENDINGS = {
    "failed": "failed",
    "hung": "hung, stopped",
    "host_lost": "lost a host",
    "deadline": "stopped at the run's time budget",
}
