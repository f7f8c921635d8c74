"""What the ranks of one training trace say of each other: the rank that waits least, whose NCCL time is
closest to the fabric's own, and how much more another rank communicates in the same steps.

A rank that waits for a late peer waits every step, so the excess is taken step by step against the same
step of the rank that waits least, never as the difference of two medians: where one step's window ends
inside an all-reduce, part of that step's communication moves into the next, the per-step sums stay equal
and only the medians differ. The excess counts as waiting only where it stands out of the steps' own
scatter by ``SKEW_NOISE_K`` standard errors of the paired median (diagnose.trace.judge).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from diagnose.trace.analyze import RankAnalysis

#: How many standard errors of the paired median a rank's extra communication must stand out by to be skew.
SKEW_NOISE_K = 3.0


def rank_label(analysis: RankAnalysis) -> int:
    return analysis.rank if analysis.rank is not None else -1


@dataclass(frozen=True)
class Peers:
    """What the ranks judged together say of each other: communication at its least (the rank that waits
    least, whose NCCL time is closest to the fabric's own) and compute at its most."""

    least_comm_rank: int | None = None
    least_comm_ms: float | None = None
    most_compute_ms: float | None = None
    compute_skew_ms: float | None = None
    least_steps: dict[int, float] = field(default_factory=dict)  # its steady steps' communication, by step

    @classmethod
    def of(cls, analyses: list[RankAnalysis]) -> Peers:
        timed = [a for a in analyses if a.summary.get("comm_ms") and a.summary.get("compute_ms") is not None]
        if not timed:
            return cls()
        least = min(timed, key=lambda a: (a.summary["comm_ms"], rank_label(a)))
        computes = [a.summary["compute_ms"] for a in timed]
        return cls(
            rank_label(least),
            least.summary["comm_ms"],
            max(computes),
            max(computes) - min(computes),
            steady_comm(least),
        )


def steady_comm(analysis: RankAnalysis) -> dict[int, float]:
    """Communication of each steady step (the steps the summary's medians are taken over), by step."""
    steps = analysis.steps[1:] if len(analysis.steps) >= 3 else analysis.steps
    return {s.step: s.comm_ms for s in steps if s.comm_ms is not None}


def paired_excess(mine: dict[int, float], least: dict[int, float]) -> tuple[float, float] | None:
    """This rank's extra communication over the least-waiting rank's in the same steps: the median of the
    per-step differences and its standard error (robust scatter from the median absolute deviation). None
    with fewer than two steps in common: one step cannot tell waiting from where a step boundary fell."""
    differences = [mine[step] - least[step] for step in sorted(mine.keys() & least.keys())]
    if len(differences) < 2:
        return None
    middle = statistics.median(differences)
    scatter = 1.4826 * statistics.median(abs(d - middle) for d in differences)
    return middle, 1.2533 * scatter / math.sqrt(len(differences))
