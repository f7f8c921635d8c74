"""Hosts judged against their peers: the fleet's median and a robust spread instead of a fixed number.

A fixed per-SKU threshold fails healthy machines whenever the number is wrong for the site (a topology
file, a BIOS setting, a newer driver) and passes a host that is 8 % slower than its 15 identical peers as
long as it clears the floor. Comparing each host with the fleet answers both: the median of the hosts'
figures is what this fleet delivers, the median absolute deviation (MAD) is how much healthy hosts differ,
and a host far below the median, measured in that spread, is odd whatever the floor says.

* robust z = 0.6745 · (x − median) / MAD (Iglewicz and Hoaglin's modified z-score: 0.6745 makes the MAD
  comparable with a standard deviation on normal data). The MAD used is never below ``MAD_FLOOR`` of the
  median, so on a fleet of identical figures a host 0.5 % off is not an infinite z.
* a host is odd when it is below the median by more than both ``k`` robust standard deviations
  (z < −k, profile variable ``fleet_mad_k``) and ``fleet_min_rel_dev_pct`` percent of the median: the first
  keeps a noisy fleet from accusing its noise, the second keeps a very quiet fleet from accusing a
  difference nobody would act on. Faster than the median is never odd.
* the profile's floor, where it has one, judges the fleet as a whole: a median below it is one cluster-wide
  finding (the profile or the fabric is off), not one failure per host. A host below the floor while the
  fleet's median clears it, but within the fleet's spread, is a warning (the floor may be tight, the host
  marginal); an odd host is a failure.
* fewer than ``STRONG_FLEET`` hosts make a weak verdict: odd hosts are warnings, and the message says so.
  Two hosts cannot say which of them is odd at all: their gap is reported instead, and warns only when it
  is well beyond the relative threshold (``TWO_HOST_GAP_FACTOR``).

Everything here is pure: figures in, verdicts out. :mod:`diagnose.probes.fleet` measures and emits.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from diagnose.catalog.stage_ids import FLEET_H2D, FLEET_MEMCPY
from diagnose.core.units import counted, is_number

#: Scales the MAD to a standard deviation on normal data (the 0.75 quantile of the standard normal).
Z_SCALE = 0.6745
#: The MAD used is at least this share of the median: no fleet is more uniform than its measurement.
MAD_FLOOR = 0.005
#: From this many hosts on the median and MAD are trusted enough to fail a host.
STRONG_FLEET = 4
#: Two hosts have no spread to measure noise by: their gap warns only at this multiple of the relative
#: threshold, so run-to-run jitter of a healthy pair (host copies swing ±10 %) stays quiet.
TWO_HOST_GAP_FACTOR = 3.0
DEFAULT_MAD_K = 3.5
DEFAULT_MIN_REL_DEV_PCT = 5.0
#: A host's slowest GPU copying this far below its host's median GPU (a share of it) is that GPU's own link.
ONE_LINK_BELOW = 0.8


@dataclass(frozen=True)
class Thresholds:
    """When a host is odd: below the median by more than ``mad_k`` robust deviations and ``min_rel_dev_pct``."""

    mad_k: float = DEFAULT_MAD_K
    min_rel_dev_pct: float = DEFAULT_MIN_REL_DEV_PCT


@dataclass(frozen=True)
class HostVerdict:
    """One host's figure against the fleet; ``status`` PASS, WARN or FAIL, ``why`` in words."""

    host: str
    value: float
    deviation_pct: float
    robust_z: float
    odd: bool
    below_floor: bool
    status: str
    why: str


@dataclass(frozen=True)
class FleetVerdict:
    """One metric over the fleet: its centre and spread, each host's verdict and the cluster-wide line.

    ``status`` is the cluster-wide summary: FAIL when the median itself is below the floor (a shortfall of
    the whole fleet), WARN when two hosts differ by more than the relative threshold, SKIP when fewer than
    two hosts were measured, PASS otherwise (odd hosts have their own verdicts).
    """

    metric: str
    unit: str
    hosts: tuple[HostVerdict, ...]
    median: float | None
    mad: float | None
    mad_used: float | None
    floor: float | None
    shortfall: bool
    weak: bool
    status: str
    message: str
    thresholds: Thresholds = field(default_factory=Thresholds)

    @property
    def odd(self) -> list[HostVerdict]:
        return [h for h in self.hosts if h.odd]

    def flagged(self) -> list[HostVerdict]:
        """Hosts whose verdict is worse than PASS, worst first then lowest first."""
        rank = {"FAIL": 0, "WARN": 1}
        return sorted(
            (h for h in self.hosts if h.status != "PASS"), key=lambda h: (rank[h.status], h.deviation_pct)
        )


def median(values: list[float]) -> float:
    return float(statistics.median(values))


def mad(values: list[float], centre: float) -> float:
    """Median absolute deviation from ``centre``."""
    return float(statistics.median(abs(v - centre) for v in values))


def robust_z(value: float, centre: float, spread: float) -> float:
    """The modified z-score of ``value``; ``spread`` is the MAD (already floored, never zero)."""
    return Z_SCALE * (value - centre) / spread


def _fmt(value: float, unit: str) -> str:
    return f"{value:.1f} {unit}" if value >= 10 else f"{value:.2f} {unit}"


def _odd_limit(centre: float, spread: float, thresholds: Thresholds) -> float:
    """How far below the median a host must be to be odd (in the metric's unit)."""
    return max(thresholds.mad_k * spread / Z_SCALE, thresholds.min_rel_dev_pct / 100.0 * centre)


def judge(
    metric: str,
    values: Mapping[str, float],
    floor: float | None = None,
    thresholds: Thresholds | None = None,
    unit: str = "GB/s",
    label: str | None = None,
) -> FleetVerdict:
    """Each host of ``values`` (host → figure) against the fleet's median; see the module docstring.

    ``label`` names the metric in messages (default: ``metric``)."""
    thresholds = thresholds or Thresholds()
    name = label or metric
    figures = {h: float(v) for h, v in values.items()}
    if len(figures) < 2:
        only = ", ".join(f"{h} {_fmt(v, unit)}" for h, v in figures.items()) or "nothing measured"
        return FleetVerdict(
            metric,
            unit,
            (),
            None,
            None,
            None,
            floor,
            False,
            True,
            "SKIP",
            f"{name}: not judged against a fleet: fewer than two hosts measured ({only})",
            thresholds,
        )
    centre = median(list(figures.values()))
    raw_mad = mad(list(figures.values()), centre)
    spread = max(raw_mad, MAD_FLOOR * abs(centre)) or 1e-12
    weak = len(figures) < STRONG_FLEET
    shortfall = floor is not None and centre < floor
    limit = _odd_limit(centre, spread, thresholds)
    verdicts = []
    for host, value in sorted(figures.items()):
        deviation = (value / centre - 1.0) * 100.0 if centre else 0.0
        z = robust_z(value, centre, spread)
        odd = len(figures) > 2 and centre - value > limit
        below = floor is not None and value < floor
        status, why = "PASS", "within the fleet's spread"
        deviation, z = round(deviation, 1), round(z, 2)
        if odd:
            status = "WARN" if weak else "FAIL"
            why = f"odd: robust z {z:+.1f}, below {_fmt(centre - limit, unit)}"
            if weak:
                why += f"; weak verdict: only {len(figures)} hosts"
        elif below and not shortfall:
            status = "WARN"
            why = (
                f"below the profile floor {_fmt(floor or 0.0, unit)} but within the fleet's spread: "
                "the floor may be tight for this site, or the host marginal"
            )
        verdicts.append(HostVerdict(host, value, deviation, z, odd, below, status, why))
    status, message = _summary(name, unit, verdicts, centre, raw_mad, floor, shortfall, thresholds)
    return FleetVerdict(
        metric,
        unit,
        tuple(verdicts),
        centre,
        raw_mad,
        spread,
        floor,
        shortfall,
        weak,
        status,
        message,
        thresholds,
    )


def _summary(
    name: str,
    unit: str,
    verdicts: list[HostVerdict],
    centre: float,
    raw_mad: float,
    floor: float | None,
    shortfall: bool,
    thresholds: Thresholds,
) -> tuple[str, str]:
    """(status, message) of the cluster-wide line of one metric."""
    count = len(verdicts)
    head = (
        f"{name} over {count} hosts: median {_fmt(centre, unit)}, MAD {_fmt(raw_mad, unit)} "
        f"({raw_mad / centre * 100.0 if centre else 0.0:.1f} %)"
    )
    if count == 2:
        low, high = sorted(verdicts, key=lambda v: v.value)
        gap = (1.0 - low.value / high.value) * 100.0 if high.value else 0.0
        head += (
            f"; two hosts cannot say which one is odd: {low.host} is {gap:.1f} % below {high.host}"
            " (weak verdict: add hosts to judge them against a fleet)"
        )
        status = "WARN" if gap > TWO_HOST_GAP_FACTOR * thresholds.min_rel_dev_pct else "PASS"
    else:
        odd = [v for v in verdicts if v.odd]
        named = ", ".join(f"{v.host} {v.deviation_pct:+.1f} %" for v in sorted(odd, key=lambda v: v.value))
        head += f"; {counted(len(odd), 'odd host')}" + (f" ({named})" if odd else "")
        if count < STRONG_FLEET:
            head += f" (weak verdict: fewer than {STRONG_FLEET} hosts)"
        status = "PASS"
    if floor is None:
        return status, f"{head}; the profile sets no floor for it, so the fleet as a whole is not judged"
    if shortfall:
        below = sum(1 for v in verdicts if v.below_floor)
        return "FAIL", (
            f"{head}; the fleet's median is below the profile floor {_fmt(floor, unit)} ({below} of {count} "
            "hosts below it): a cluster-wide shortfall — the profile's expectation or the fabric/configuration "
            "shared by every host is off, not one host"
        )
    return status, f"{head}; the median clears the profile floor {_fmt(floor, unit)}"


def host_action(check_id: str, speeds: Sequence[Any]) -> str:
    """What to do about a host odd in a fleet check (docs/actions.md), ``speeds`` its GPUs' (or pairs')
    figures of the metric: host↔device copies slow on one GPU while its host's other GPUs are not is that
    GPU's PCIe link (``reseat_or_replace_cable``: the GPU or its riser), slow on every GPU the host's
    setting (BIOS, IOMMU: ``check_config``); single-node busbw and peer copies are ``reset_gpu``, host
    memory copies ``check_config``. The fleet as a whole short of the profile is ``check_config``."""
    if check_id == FLEET_H2D:
        known = sorted(float(v) for v in speeds if is_number(v))
        lone = len(known) > 1 and known[0] < ONE_LINK_BELOW * statistics.median(known)
        return "reseat_or_replace_cable" if lone else "check_config"
    return "check_config" if check_id == FLEET_MEMCPY else "reset_gpu"
