"""Probes and searches run their launches through ``launch_in_parallel``: results in order, and Ctrl-C does
not wait for the launches under way. A fleet probe, a burn-in or a perftest round once held an interrupt
until every launch of the wave had finished on its own (11 s on the lent H100; a burn-in's minutes)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import ClassVar

import pytest

from diagnose.core.hosts import Host
from diagnose.launchers.base import Launch, LaunchSpec, launch_in_parallel, run_launch


def test_results_come_back_in_the_order_of_the_items() -> None:
    def slow_first(n: int) -> int:
        time.sleep(0.05 * (3 - n))
        return n * n

    assert launch_in_parallel(slow_first, [0, 1, 2, 3], workers=4) == [0, 1, 4, 9]
    assert launch_in_parallel(slow_first, [], workers=4) == []


def test_an_interrupt_does_not_wait_for_the_launches_under_way() -> None:
    """Ordered by events, not by a start that a loaded machine may delay: the interrupt comes once launch 1
    runs, and launch 1 ends only when the test lets it, after the call returned."""
    running, release = threading.Event(), threading.Event()
    started: list[int] = []
    finished: list[int] = []

    def work(n: int) -> int:
        started.append(n)
        if n == 0:
            assert running.wait(30), "launch 1 never started"
            raise KeyboardInterrupt  # as the signal handler raises it in the waiting thread
        running.set()
        release.wait(10)  # a launch still running when the operator pressed Ctrl-C
        finished.append(n)
        return n

    try:
        with pytest.raises(KeyboardInterrupt):
            launch_in_parallel(work, list(range(6)), workers=2, name="interrupted-wave")
        assert finished == [], "the interrupt waited for a launch under way"
    finally:
        release.set()
    # The workers free only now: the items still queued would start here unless the interrupt dropped them.
    for thread in threading.enumerate():
        if thread.name.startswith("interrupted-wave"):
            thread.join(30)
            assert not thread.is_alive(), f"{thread.name} still runs"
    # Two workers: 0 and 1 ran, 0's worker may have taken 2 as it freed; 3, 4 and 5 never start.
    assert {0, 1} <= set(started) <= {0, 1, 2}, "items not started when it came are never started"


def test_a_failing_launch_is_raised_after_the_others_finish() -> None:
    finished: list[int] = []

    def work(n: int) -> int:
        if n == 0:
            raise RuntimeError("launch 0 broke")
        time.sleep(0.2)
        finished.append(n)
        return n

    with pytest.raises(RuntimeError, match="launch 0 broke"):
        launch_in_parallel(work, [0, 1, 2], workers=3)
    assert sorted(finished) == [1, 2]


class Recorded(Launch):
    """A launch that only notes that it started (no host is touched)."""

    runner = "test"
    started: ClassVar[list[str]] = []

    def start(self) -> None:
        Recorded.started.append(self.spec.tag)
        self.outcome.status = "done"

    def follow(self) -> None:
        return None

    def stop(self, timeout: float = 0) -> None:
        return None

    def collect(self) -> None:
        return None

    def failure_detail(self) -> str:
        return ""


def spec(tag: str, tmp_path: Path) -> LaunchSpec:
    host = Host("h1")
    return LaunchSpec("unit", tag, [host], {}, 1, "gloo", [], [], lambda c, b: 1.0, tmp_path)


def test_a_worker_left_running_by_an_interrupt_starts_no_further_launch(tmp_path: Path) -> None:
    """A fleet probe measures a host with two launches in a row: the second must not start once the run
    was interrupted and has stopped the live ones."""
    first, release, done = threading.Event(), threading.Event(), threading.Event()
    outcome: dict[str, BaseException] = {}

    def work(n: int) -> None:
        if n == 0:
            assert first.wait(30), "the first launch never ran"
            raise KeyboardInterrupt
        run_launch(Recorded(spec("first", tmp_path)))
        first.set()
        release.wait(30)
        try:
            run_launch(Recorded(spec("second", tmp_path)))
        except BaseException as exc:
            outcome["second"] = exc
        done.set()

    with pytest.raises(KeyboardInterrupt):
        launch_in_parallel(work, [0, 1], workers=2)
    release.set()
    assert done.wait(30)
    assert Recorded.started == ["first"] and isinstance(outcome["second"], KeyboardInterrupt)
    assert run_launch(Recorded(spec("later", tmp_path))).status == "done", "outside a wave launches run"
