"""What a run has under way, and since when: the stages and steps the engine tells, kept between notices.

The reporters tell when a stage or a step starts, not that it is still going: a burn-in, an sdc pass on a
loaded host or an ``ibstat`` that hangs could run for minutes with no line, and whoever reads a cron mail,
a CI log or ``journalctl`` could not tell a hang from work. :class:`Underway` stands between the engine and
the caller's reporter, passes every notice on, and from what it kept:

- tells again (:meth:`~diagnose.engine.reporter.Reporter.still`) every step, or stage without a step, that
  has gone :data:`PROGRESS_INTERVAL_S` without a line (``progress_interval_s``): the step, its hosts, its
  time against what was planned and the latest figure it measured; for the host checks, how many hosts are
  done and which command holds up each host still running;
- says what a stage cut short (Ctrl-C, SIGTERM) was still running, so that its line reads
  ``host checks interrupted after 6 s; q3 still running ibstat (6 s)`` and never as done;
- records every stage's time, interrupted or not, as results.json's ``run.stages``, in the words of
  :mod:`diagnose.render.stage_times`, which the report shows too.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from diagnose.connectors import running_commands
from diagnose.core.hosts import Host
from diagnose.core.units import duration
from diagnose.engine.reporter import HOST_STAGE, Reporter
from diagnose.engine.results import ResultsStore
from diagnose.render.hostlist import fold
from diagnose.render.stage_times import stage_entry, still_running

#: Seconds a step may go without a line before the run tells it again; ``progress_interval_s`` sets it.
PROGRESS_INTERVAL_S = 30.0
#: Steps told again in one heartbeat at most, and hosts named in one host-stage line: a launch per host on
#: a thousand hosts must not put a thousand lines in the log every half minute.
MAX_TOLD = 4


def progress_interval(hosts: Sequence[Host]) -> float:
    """The run's heartbeat interval: ``progress_interval_s`` as the hosts' variables give it (``-e``, the
    playbook's or the inventory's ``all`` vars), else :data:`PROGRESS_INTERVAL_S`."""
    if not hosts:
        return PROGRESS_INTERVAL_S
    return hosts[0].vars.float("progress_interval_s", PROGRESS_INTERVAL_S) or PROGRESS_INTERVAL_S


@dataclass
class _Step:
    detail: str
    began: float
    said: float
    planned_s: float | None = None
    figure: str | None = None


@dataclass
class _Stage:
    name: str
    hosts: tuple[str, ...]
    began: float
    said: float
    total: int = 0
    done: int = 0
    steps: dict[tuple[str, ...], _Step] = field(default_factory=dict)


def _where(hosts: Sequence[str]) -> str:
    return ", ".join(fold(hosts))


class Underway(Reporter):
    """The caller's ``inner`` reporter, told everything the engine tells and, through :meth:`beat`, each
    long step again; ``clock`` and ``running`` (the check commands in flight, per host) are the monotonic
    clock and :func:`~diagnose.connectors.running_commands`, given otherwise by tests that drive them."""

    def __init__(
        self,
        inner: Reporter,
        interval_s: float = PROGRESS_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
        running: Callable[[], list[tuple[str, str | None, float]]] = running_commands,
    ) -> None:
        self.inner = inner
        self.interval_s = interval_s
        self.clock = clock
        self.running = running
        self.stages: list[dict[str, Any]] = []  # run.stages: each stage's time, in the order they ended
        self._store: ResultsStore | None = None
        self._open: list[_Stage] = []
        self._lock = threading.Lock()

    def keep(self, store: ResultsStore | None) -> None:
        """Record the stages' times in ``store``'s ``run.stages`` from now on; None once its document is
        final (the reports' own stage ends after results.json is written for good)."""
        with self._lock:
            self._store = store

    # -- notices, passed on --------------------------------------------------------------------------------
    def hosts_started(self, total: int) -> None:
        now = self.clock()
        with self._lock:
            self._open.append(_Stage(HOST_STAGE, (), now, now, total=total))
        self.inner.hosts_started(total)

    def host_done(self, name: str) -> None:
        with self._lock:
            stage = self._find(HOST_STAGE)
            if stage is not None:
                stage.done += 1
        self.inner.host_done(name)

    def hosts_finished(self) -> None:
        self._close(HOST_STAGE, None, None)
        self.inner.hosts_finished()

    def stage_started(self, stage: str, hosts: Sequence[str] = ()) -> None:
        now = self.clock()
        with self._lock:
            self._open.append(_Stage(stage, tuple(hosts), now, now))
            self._heard(now)
        self.inner.stage_started(stage, hosts)

    def step(self, stage: str, hosts: Sequence[str], detail: str, planned_s: float | None = None) -> None:
        now = self.clock()
        with self._lock:
            found = self._find(stage)
            if found is not None:
                found.steps[tuple(hosts)] = _Step(detail, now, now, planned_s)
            self._heard(now)
        self.inner.step(stage, hosts, detail, planned_s)

    def figure(self, stage: str, hosts: Sequence[str], text: str) -> None:
        with self._lock:
            found = self._find(stage)
            step = found.steps.get(tuple(hosts)) if found is not None else None
            if step is not None:
                step.figure = text
        self.inner.figure(stage, hosts, text)

    def step_finished(self, stage: str, hosts: Sequence[str]) -> None:
        with self._lock:
            found = self._find(stage)
            if found is not None:
                found.steps.pop(tuple(hosts), None)
        self.inner.step_finished(stage, hosts)

    def stage_finished(self, stage: str, seconds: float) -> None:
        self._close(stage, seconds, None)
        self.inner.stage_finished(stage, seconds)

    def stage_interrupted(self, stage: str, seconds: float, running: Sequence[str] = ()) -> None:
        said = list(running) or self._still_running(stage)
        self._close(stage, seconds, said)
        self.inner.stage_interrupted(stage, seconds, said)

    def run_finished(self, seconds: float) -> None:
        self.inner.run_finished(seconds)

    def problem(self, message: str) -> None:
        self.inner.problem(message)

    # -- the heartbeat -------------------------------------------------------------------------------------
    def beat(self) -> float:
        """Tell again every step (and innermost stage without a step) that went the interval without a line;
        the seconds until the next is due."""
        now = self.clock()
        told: list[tuple[str, tuple[str, ...], str]] = []
        with self._lock:
            for stage in self._open:
                if stage.name == HOST_STAGE:
                    if now - stage.said >= self.interval_s:
                        told.append((HOST_STAGE, (), self._hosts_text(stage, now)))
                        stage.said = now
                    continue
                for hosts, step in stage.steps.items():
                    if now - step.said >= self.interval_s:
                        told.append((stage.name, hosts, _step_text(step, now)))
                        step.said = now
            last = self._open[-1] if self._open else None
            if last and last.name != HOST_STAGE and not last.steps and now - last.said >= self.interval_s:
                told.append((last.name, last.hosts, f"still running after {duration(now - last.began)}"))
            if told:
                self._heard(now)
            due = [s.said for s in self._open] + [p.said for s in self._open for p in s.steps.values()]
        for stage_name, hosts, text in told[:MAX_TOLD]:
            self.inner.still(stage_name, hosts, text)
        if len(told) > MAX_TOLD:
            self.inner.still(told[MAX_TOLD][0], (), f"and {len(told) - MAX_TOLD} more steps still running")
        return max(0.0, min(due, default=now) + self.interval_s - now)

    @contextmanager
    def beating(self) -> Iterator[None]:
        """The block with the heartbeat on: a thread that beats whenever the next line is due."""
        stop = threading.Event()

        def loop() -> None:
            wait = self.interval_s
            while not stop.wait(wait):
                try:
                    wait = max(0.05, self.beat())
                except Exception:  # progress is a courtesy: a reporter's trouble must not end the run
                    wait = self.interval_s

        thread = threading.Thread(target=loop, name="heartbeat", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=5)

    # -- what was kept -------------------------------------------------------------------------------------
    def _find(self, name: str) -> _Stage | None:
        return next((s for s in reversed(self._open) if s.name == name), None)

    def _heard(self, now: float) -> None:
        """A line was just told: no stage is silent, whichever stage inside it the line was about (the
        benchmarks around a GPU stress that just ended are not told again at once)."""
        for stage in self._open:
            stage.said = now

    def _close(self, name: str, seconds: float | None, running: list[str] | None) -> None:
        with self._lock:
            stage = self._find(name)
            if stage is not None:
                self._open.remove(stage)
            self._heard(self.clock())
            if seconds is None:
                seconds = self.clock() - stage.began if stage is not None else 0.0
            self.stages.append(stage_entry(name, seconds, running))
            store = self._store
            if store is not None:
                store.run["stages"] = list(self.stages)
        if store is not None:
            store.flush(force=True)

    def _still_running(self, name: str) -> list[str]:
        """What stage ``name`` had under way: the check command each host was running (host checks), or
        the step each launch was at."""
        now = self.clock()
        if name == HOST_STAGE:
            return [still_running(host, key, seconds) for host, key, seconds in self.running()]
        with self._lock:
            stage = self._find(name)
            steps = list(stage.steps.items()) if stage is not None else []
        return [still_running(_where(hosts), step.detail, now - step.began) for hosts, step in steps]

    def _hosts_text(self, stage: _Stage, now: float) -> str:
        running = self.running()
        text = f"{stage.done} of {stage.total} hosts done after {duration(now - stage.began)}"
        said = [still_running(host, key, seconds) for host, key, seconds in running[:MAX_TOLD]]
        if len(running) > MAX_TOLD:
            said.append(f"{len(running) - MAX_TOLD} more hosts still running")
        return "; ".join([text, *said])


def _step_text(step: _Step, now: float) -> str:
    """``burnin, 8 ranks still running, 31 s of 1 min 00 s planned; latest 612 TFLOP/s, 71 °C``."""
    text = f"{step.detail} still running, {duration(now - step.began)}"
    if step.planned_s:
        text += f" of {duration(step.planned_s)} planned"
    return f"{text}; latest {step.figure}" if step.figure else text
