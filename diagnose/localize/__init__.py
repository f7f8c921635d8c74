"""Localization: which host or link makes a collective slow, found as a search with statistics.

* :mod:`~diagnose.localize.model`: settings, groups, verdicts, accusations and the finding (plain data);
* :mod:`~diagnose.localize.stats`: noise from repeats, the healthy reference of a round, one-sided tests;
* :mod:`~diagnose.localize.rounds`: a round's groups and waves, and which open groups the next wave
  measures again;
* :mod:`~diagnose.localize.search`: the search itself (narrow by contiguous pieces, attribute with fresh
  partners, accuse hosts and links on a quorum);
* :mod:`~diagnose.localize.run`: the driver loop through a :class:`~diagnose.localize.run.Measure` and a
  clock, with the time budget;
* :mod:`~diagnose.localize.timing`: what a measurement costs in time (the simulator's clock, the budget).

Nothing here touches a host: the benchmark stage (:mod:`diagnose.benchmarks.straggler`) measures with real
launches, ``bench/localize.py`` with a simulated fabric.
"""

from diagnose.localize.model import Accusation, Finding, Judged, Settings, Step
from diagnose.localize.run import Measure, localize
from diagnose.localize.timing import TimeModel

__all__ = ["Accusation", "Finding", "Judged", "Measure", "Settings", "Step", "TimeModel", "localize"]
