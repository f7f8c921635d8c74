"""Probes and searches run their launches through ``launch_in_parallel``: results in order, and Ctrl-C does
not wait for the launches under way. A fleet probe, a burn-in or a perftest round once held an interrupt
until every launch of the wave had finished on its own (11 s on the lent H100; a burn-in's minutes)."""

from __future__ import annotations

import threading
import time

import pytest

from diagnose.launchers.base import launch_in_parallel


def test_results_come_back_in_the_order_of_the_items() -> None:
    def slow_first(n: int) -> int:
        time.sleep(0.05 * (3 - n))
        return n * n

    assert launch_in_parallel(slow_first, [0, 1, 2, 3], workers=4) == [0, 1, 4, 9]
    assert launch_in_parallel(slow_first, [], workers=4) == []


def test_an_interrupt_does_not_wait_for_the_launches_under_way() -> None:
    release = threading.Event()
    started: list[int] = []

    def work(n: int) -> int:
        started.append(n)
        if n == 0:
            time.sleep(0.2)
            raise KeyboardInterrupt  # as the signal handler raises it in the waiting thread
        release.wait(30)  # a launch still running when the operator pressed Ctrl-C
        return n

    began = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        launch_in_parallel(work, list(range(6)), workers=2)
    waited = time.monotonic() - began
    release.set()
    assert waited < 5, f"the interrupt waited {waited:.1f} s for a launch"
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
