"""The statistics of the search: noise from repetitions, a healthy reference per round, one-sided tests.

Bandwidths are compared on a log scale, so a deficit is a ratio whatever the group size, and noise of a
few percent is additive there. Three facts shape the choices:

* the noise of one measurement is read from *repetitions of the same group* (the pooled spread of each
  group's repeats around its own mean). That estimate does not care whether a group is slow, so it is
  sound even when half of the groups are;
* slowness only ever lowers a group's value (a ring runs at the pace of its slowest member), so the
  reference is anchored in the upper part of a round's values: the median of the groups that measure like
  the upper quartile. Up to three slow groups in four leave it healthy, and one lone fast outlier in five
  or more cannot drag it up;
* every round tests many groups at once, so the critical value is Bonferroni-corrected for them, and
  Student's t (through the regularized incomplete beta function) stands in for the normal while the
  noise rests on few repeats.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist, median

_NORMAL = NormalDist()
# Converts a median absolute deviation into a standard deviation for normal data.
MAD_TO_SIGMA = 1.4826
# The standard error of a median is this factor times that of a mean (normal data, large samples).
MEDIAN_SE_FACTOR = 1.2533
# A per-group spread between healthy groups is estimated only from this many reference members up.
MIN_MEMBERS_FOR_SPREAD = 4


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function (modified Lentz evaluation)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 500):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= d * c
        if abs(d * c - 1.0) < 1e-13:
            break
    return result


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularized incomplete beta function."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b


def t_tail(t: float, dof: int) -> float:
    """P(T ≥ t) for Student's t with ``dof`` degrees of freedom (the normal beyond 10,000 or with none)."""
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    if dof <= 0 or dof > 10_000:
        return 1.0 - _NORMAL.cdf(t)
    half = 0.5 * _incomplete_beta(dof / 2.0, 0.5, dof / (dof + t * t))
    return half if t >= 0 else 1.0 - half


def t_quantile(q: float, dof: int) -> float:
    """Quantile ``q`` (above one half) of Student's t: the tail above solved by bisection."""
    if dof <= 0 or dof > 10_000:
        return _NORMAL.inv_cdf(q)
    low, high = _NORMAL.inv_cdf(q), 1.0
    while t_tail(high, dof) > 1.0 - q:
        high *= 2.0
    for _ in range(80):
        middle = (low + high) / 2.0
        if t_tail(middle, dof) > 1.0 - q:
            low = middle
        else:
            high = middle
    return (low + high) / 2.0


def critical_z(alpha: float, tests: int, dof: int) -> float:
    """The one-sided critical value that keeps the chance of any false flag among ``tests`` below ``alpha``."""
    return t_quantile(1.0 - alpha / max(1, tests), dof)


@dataclass
class Noise:
    """Pooled spread of repeated measurements around their group's mean, on the log scale."""

    squares: float = 0.0
    dof: int = 0

    def add(self, logs: list[float]) -> None:
        """One group's repeats (logs of the successful values)."""
        if len(logs) < 2:
            return
        mean = sum(logs) / len(logs)
        self.squares += sum((x - mean) ** 2 for x in logs)
        self.dof += len(logs) - 1

    def merged(self, other: Noise) -> Noise:
        return Noise(self.squares + other.squares, self.dof + other.dof)

    def sigma(self, floor: float) -> float:
        """The relative noise of one measurement, never below ``floor`` (nor guessed without data)."""
        if self.dof == 0:
            return floor
        return max(floor, math.sqrt(self.squares / self.dof))


@dataclass(frozen=True)
class Reference:
    """The healthy level of one size class of a round (log scale) and how well it is known."""

    center: float
    spread: float  # between-group spread of healthy groups beyond the measurement noise (log scale)
    se: float  # standard error of ``center``
    members: int


def reference(means: list[float], se: list[float], join_z: float) -> Reference:
    """The healthy level among group means (logs) with their standard errors.

    Anchored at the upper quartile (``ceil(n/4)``-th from the top), the members are the groups within
    ``join_z`` standard errors of it; their median is the level. With four members or more, their spread
    beyond what the noise explains is kept as ``spread`` and the membership widened by it, until it
    settles, so that groups are judged against the real dispersion of healthy groups (hosts that differ
    by a few percent for good), not the noise alone.
    """
    order = sorted(range(len(means)), key=lambda i: -means[i])
    anchor = means[order[max(0, math.ceil(len(means) / 4) - 1)]]
    typical = median(se)

    def members_around(center: float, extra: float) -> list[int]:
        return [
            i
            for i in range(len(means))
            if abs(means[i] - center) <= join_z * math.sqrt(se[i] ** 2 + typical**2 + 2 * extra**2)
        ]

    members = members_around(anchor, 0.0)
    center = median(means[i] for i in members)
    spread = 0.0
    for _ in range(8):  # widen while the members' own spread says healthy groups differ more than noise
        if len(members) < MIN_MEMBERS_FOR_SPREAD:
            break
        mad = MAD_TO_SIGMA * median(abs(means[i] - center) for i in members)
        noise = sum(se[i] ** 2 for i in members) / len(members)
        spread = math.sqrt(max(0.0, mad**2 - noise))
        wider = members_around(center, spread) or members
        center = median(means[i] for i in wider)
        if wider == members:
            break
        members = wider
    within = math.sqrt(typical**2 + spread**2)
    return Reference(center, spread, MEDIAN_SE_FACTOR * within / math.sqrt(len(members)), len(members))
