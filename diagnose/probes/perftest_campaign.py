"""The per-NIC benchmark from first round to verdicts, through a :class:`RoundMeasure` and a clock.

The stage (:mod:`diagnose.probes.perftest`) passes a measure that launches every pair of a round on real
hosts and the monotonic clock; the simulator (``bench/perftest_scale.py``) and the unit tests pass a
modelled fabric and a simulated clock. Both go through this driver, so the simulated stage time is that of
the code that runs on clusters.

1. first rounds (:func:`~diagnose.probes.perftest_plan.first_rounds`): every pair's full steps;
2. every rail's fleet and its slow pairs (:mod:`diagnose.probes.perftest_readings`,
   :mod:`diagnose.probes.perftest_localize`);
3. localization rounds: the ends of the slow pairs with their partners, scheduled so that every host is
   busy once per round (:func:`~diagnose.probes.perftest_plan.schedule`);
4. the verdicts (:class:`~diagnose.probes.perftest_judge.Judge`).

Before each round the driver checks that the round can end before the deadline, judging its length by
its longest launch (:func:`estimate_s`); a round that cannot is not started and is said.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from diagnose.catalog.stage_ids import IB_WRITE_BW
from diagnose.localize.model import edge
from diagnose.probes import fleet_judge
from diagnose.probes.perftest_judge import Conclusion, Judge
from diagnose.probes.perftest_localize import Suspect, choose_partners, record_checks, suspects_of
from diagnose.probes.perftest_plan import HostRails, Step, check_steps, first_rounds, pair_steps, schedule
from diagnose.probes.perftest_readings import RailFleet, Reading, pair_rails, rail_fleets
from diagnose.probes.perftest_settings import Settings

#: What a step costs beyond its measurement, for the budget: starting the tools, connecting, polling.
STEP_OVERHEAD_S = 4.0

Launch = tuple[str, str, list[Step]]


class RoundMeasure(Protocol):
    """Measures every pair of one round at once (they share no host): the readings of all their steps."""

    def __call__(self, number: int, launches: Sequence[Launch]) -> list[Reading]: ...


def estimate_s(steps: Sequence[Step], settings: Settings, overhead_s: float = STEP_OVERHEAD_S) -> float:
    """About how long one pair's launch takes: its steps' measurements and their overhead."""
    work = sum((settings.duration_s if s.kind == "bw" else 2.0) + overhead_s for s in steps)
    return work + 2 * overhead_s


@dataclass
class Outcome:
    """What a campaign measured and concluded."""

    readings: list[Reading] = field(default_factory=list)
    fleets: dict[int, RailFleet] = field(default_factory=dict)
    suspects: list[Suspect] = field(default_factory=list)
    rounds: int = 0
    launches: int = 0
    seconds: float = 0.0
    not_measured: list[str] = field(default_factory=list)
    conclusion: Conclusion = field(default_factory=Conclusion)


class Campaign:
    """One run of the benchmark over the hosts of ``rails`` (in order)."""

    def __init__(
        self,
        rails: Mapping[str, HostRails],
        settings: Settings,
        thresholds: fleet_judge.Thresholds,
        measure: RoundMeasure,
        latency: bool = False,
        clock: Callable[[], float] = time.monotonic,
        deadline: float | None = None,
    ) -> None:
        self.rails = rails
        self.settings = settings
        self.thresholds = thresholds
        self.measure = measure
        self.latency = latency
        self.clock = clock
        self.deadline = deadline
        self.outcome = Outcome()

    def round(self, number: int, launches: Sequence[Launch]) -> list[Reading]:
        """One round's readings, or none when it cannot end before the deadline."""
        if not launches:
            return []
        longest = max(estimate_s(steps, self.settings) for _, _, steps in launches)
        if self.deadline is not None and self.clock() + longest > self.deadline:
            pairs = ", ".join(f"{a}↔{b}" for a, b, _ in launches)
            self.outcome.not_measured.append(
                f"round {number} ({pairs}): about {longest:.0f} s to measure, past the time budget"
            )
            return []
        self.outcome.rounds += 1
        self.outcome.launches += len(launches)
        return self.measure(number, launches)

    def run(self, names: Sequence[str]) -> Outcome:
        out, settings = self.outcome, self.settings
        started = self.clock()
        number = 0
        for pairs in first_rounds(names):
            number += 1
            launches = []
            for a, b in pairs:
                common = min(len(self.rails[a].nics), len(self.rails[b].nics))
                launches.append((a, b, pair_steps(a, b, common, self.latency)))
            out.readings += self.round(number, launches)
        first = pair_rails(out.readings, ("single",))
        out.fleets = rail_fleets(first, self.thresholds, settings.fraction)
        out.suspects = suspects_of(first, out.fleets, settings.fraction)
        rails_of_pair: dict[tuple[str, str], set[int]] = {}
        for end, partner, rail in choose_partners(out.suspects, first, out.fleets, settings.fraction):
            rails_of_pair.setdefault(edge(end, partner), set()).add(rail)
        for pairs in schedule(list(rails_of_pair)):
            number += 1
            launches = [(a, b, check_steps(a, b, sorted(rails_of_pair[(a, b)]))) for a, b in pairs]
            out.readings += self.round(number, launches)
        record_checks(out.suspects, pair_rails(out.readings, ("check",)))
        judge = Judge(self.rails, settings)
        judge.bandwidth(out.readings, out.fleets, out.suspects)
        judge.together(out.readings)
        if self.latency:
            judge.latency(out.readings)
        for note in out.not_measured:
            judge.emit(IB_WRITE_BW, None, "WARN", f"not measured within perftest_budget_s: {note}")
        out.conclusion = judge.out
        out.seconds = self.clock() - started
        return out
