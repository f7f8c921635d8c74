"""The driver: one search from start to finding, through a :class:`Measure` and a clock.

Real runs pass a Measure that launches the collective on each host group
(:class:`diagnose.benchmarks.straggler.LaunchMeasure`) and the monotonic clock; the simulator
(``bench/localize.py``) passes a fabric model and a simulated clock. Both go through this loop, so the
simulator's accuracy and time are those of the code that runs on clusters.

A round is measured ``repeats`` times, wave by wave (each wave one call of the Measure, its groups at
once); after that only the groups whose verdict is still open are measured again, one wave at a time
(as many of them as share no host, the least measured first) and judged again after each wave, until
each is clearly above or below the line or has ``max_repeats`` values. A wave costs as long with one
group as with thousands, so repeating the open groups alone is what makes a round of thousands of pairs
affordable; and an open group that shares a host with another waits one wave rather than adding a wave
to every repeat of the round (two open pairs side by side in the ring would otherwise double the waves
of the round's tail). Before each wave the driver checks that it can end
before the deadline (``budget_s`` from the start), judging its length by the last wave's; when it
cannot, the search stops and reports what it still suspects with the measurements against each.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Protocol

from diagnose.localize.model import Finding, Settings
from diagnose.localize.rounds import RoundPlan, next_wave
from diagnose.localize.search import Search


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
    last_wave = [0.0]

    def run_waves(
        plan: RoundPlan, tasks: list[int], waves: list[list[int]], values: list[list[float | None]]
    ) -> bool:
        """Measure ``waves`` (positions in ``tasks``) one after another; False when time ran out."""
        for wave in waves:
            if clock() + last_wave[0] > deadline:
                return False
            begin = clock()
            results = measure([list(plan.tasks[tasks[k]].group) for k in wave])
            last_wave[0] = clock() - begin
            for k, value in zip(wave, results, strict=True):
                values[tasks[k]].append(value)
        return True

    while (plan := search.plan()) is not None:
        values: list[list[float | None]] = [[] for _ in plan.tasks]
        round_start = clock()
        every = list(range(len(plan.tasks)))
        done = 0
        in_time = True
        while done < settings.repeats and (in_time := run_waves(plan, every, plan.waves, values)):
            done += 1
        while in_time and done and (again := search.unclear(plan, values)):
            in_time = run_waves(
                plan, again, [next_wave(plan.tasks, again, [len(v) for v in values], search.width)], values
            )
        if done or any(values):
            search.record(plan, values, clock() - round_start, done)
        if not in_time:
            search.stop(
                f"the localization budget of {settings.budget_s:.0f} s ran out in round {plan.number}"
            )
            break
    return search.finding(clock() - started)
