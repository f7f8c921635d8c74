"""The driver: one search from start to finding, through a :class:`Measure` and a clock.

Real runs pass a Measure that launches the collective on each host group
(:class:`diagnose.benchmarks.straggler.LaunchMeasure`) and the monotonic clock; the simulator
(``bench/localize.py``) passes a fabric model and a simulated clock. Both go through this loop, so the
simulator's accuracy and time are those of the code that runs on clusters.

A round is measured repeat by repeat, wave by wave (each wave one call of the Measure, its groups at
once); groups still unclear after that are measured again on their own. Before each wave the driver
checks that it can end before the deadline (``budget_s`` from the start), judging its length by the last
wave's; when it cannot, the search stops and what is still suspected is reported as unresolved.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Protocol

from diagnose.localize.model import Finding, Settings
from diagnose.localize.search import Search, pack


class Measure(Protocol):
    """Measures host groups, all at once: they are disjoint, so their launches share no host."""

    def __call__(self, groups: list[list[str]]) -> list[float | None]:
        """The busbw (GB/s) of the collective over each group, its hosts in ring order; None where the
        launch failed or hung (as bad as slow)."""
        ...


def localize(
    hosts: Sequence[str],
    measure: Measure,
    settings: Settings,
    clock: Callable[[], float] = time.monotonic,
    shortfall: float | None = None,
) -> Finding:
    """Search ``hosts`` (in the ring order of the slow collective) for the slow host(s) or link(s);
    ``shortfall`` is the full run's busbw over its expected value, when there is one."""
    search = Search(hosts, settings, shortfall)
    started = clock()
    deadline = started + settings.budget_s
    last_wave = 0.0
    while (plan := search.plan()) is not None:
        values: list[list[float | None]] = [[] for _ in plan.tasks]
        round_start = clock()
        target = search.repeats(plan, values)
        done = 0
        out_of_time = False
        while done < target and not out_of_time:
            for wave in plan.waves:
                groups = [list(plan.tasks[i].group) for i in wave]
                if clock() + last_wave > deadline:
                    out_of_time = True
                    break
                begin = clock()
                results = measure(groups)
                last_wave = clock() - begin
                for i, value in zip(wave, results, strict=True):
                    values[i].append(value)
            else:
                done += 1
                if done == target:
                    target = search.repeats(plan, values)
        while done and not out_of_time and (again := search.unclear(plan, values)):
            for wave in pack([plan.tasks[i] for i in again], settings.concurrency):
                groups = [list(plan.tasks[again[k]].group) for k in wave]
                if clock() + last_wave > deadline:
                    out_of_time = True
                    break
                begin = clock()
                results = measure(groups)
                last_wave = clock() - begin
                for k, value in zip(wave, results, strict=True):
                    values[again[k]].append(value)
        if done or any(values):
            search.record(plan, values, clock() - round_start, done)
        if out_of_time:
            search.stop(
                f"the localization budget of {settings.budget_s:.0f} s ran out in round {plan.number}"
            )
            break
    return search.finding(clock() - started)
