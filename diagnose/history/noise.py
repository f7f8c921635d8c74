"""When a busbw change stands out of its series' own run-to-run noise: the pure rule of a bandwidth regression.

A fixed threshold fails nights on noise: gloo over loopback on a busy 2-core machine swings by 60 % from one
run to the next, NCCL's latency-bound sizes by more than its bandwidth-bound ones, and one fabric is steadier
than another. So each figure (a collective's median busbw in one size band) is judged against the spread
the same figure showed over the series' last good runs:

* only a *judged* figure can regress: one whose benchmark had an expectation and a verdict of its own
  (``expected_busbw_gbps`` set: NCCL against the profile's fabric). gloo on CPU hosts and a run without an
  expected busbw measured that the ranks talk, not a bandwidth anyone judged, so their figures never fail a
  night; a reference under :data:`MIN_GBPS` is too small to read at the shown precision and never does either;
* the noise is the robust deviation of the figure over the series' last :data:`WINDOW` good runs (1.4826 ×
  the median absolute deviation from their median, relative to that median), runs before a pinned baseline
  included: pinning acknowledges a level, not a different spread;
* a drop is a regression when it exceeds both ``busbw_drop_pct`` (the smallest change worth a night's
  FAIL) and :data:`K` robust deviations;
* first nights: with fewer than :data:`MIN_RUNS` good runs the noise is not known yet, so the drop must
  exceed :data:`FIRST_NIGHTS_FACTOR` × ``busbw_drop_pct`` (20 % with the shipped 10 %); the benchmark's own
  verdict against its expected range judges those nights meanwhile.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from diagnose.core.units import counted

#: Good runs the noise is measured over (the newest of the series).
WINDOW = 10
#: Good runs needed before the measured noise is trusted.
MIN_RUNS = 3
#: How many robust deviations a drop must exceed.
K = 4.0
#: Without a known noise, the drop must exceed this many times the minimum change.
FIRST_NIGHTS_FACTOR = 2.0
#: A reference figure under this (GB/s) reads 0.0 or 0.1 in every message: no drop of it can be shown.
MIN_GBPS = 0.1
#: 1.4826 × MAD estimates the standard deviation of normally distributed values.
MAD_SCALE = 1.4826


@dataclass(frozen=True)
class Noise:
    """The run-to-run spread of one figure over the good runs, and the relative drop that stands out of it."""

    runs: int  # good runs the spread was measured over
    spread: float | None  # relative robust deviation; None on first nights
    threshold: float  # the relative drop (0.2 = 20 %) beyond which the figure regressed

    def words(self, min_drop: float) -> str:
        """How the threshold was set, for the regression's message."""
        if self.spread is None:
            return (
                f"first nights: {counted(self.runs, 'good run')} of this figure are too few to know its noise, so the "
                f"drop must exceed {FIRST_NIGHTS_FACTOR:g} × the minimum {min_drop:.0%}"
            )
        return (
            f"run-to-run noise ±{self.spread:.1%} over the last {self.runs} good runs; a drop must exceed "
            f"{K:g} × that and at least {min_drop:.0%}"
        )


def noise(good: Sequence[float], min_drop: float) -> Noise:
    """The noise of a figure from its values in the series' good runs (any order), ``min_drop`` a fraction."""
    values = [v for v in good if v > 0][-WINDOW:]
    if len(values) < MIN_RUNS:
        return Noise(len(values), None, min(FIRST_NIGHTS_FACTOR * min_drop, 0.99))
    center = statistics.median(values)
    spread = MAD_SCALE * statistics.median(abs(v - center) for v in values) / center
    return Noise(len(values), spread, min(max(min_drop, K * spread), 0.99))


def regressed(now: float, before: float, threshold: float) -> bool:
    """Whether ``now`` fell below ``before`` by more than ``threshold`` (a fraction) of a readable figure."""
    return before >= MIN_GBPS and now < (1.0 - threshold) * before
