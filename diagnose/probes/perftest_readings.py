"""The per-NIC benchmark's readings and the rail fleets they are judged against (plain data, pure).

A :class:`Reading` is one rail of one step of a pair's launch; a :class:`PairRail` the readings of a pair on
a rail (its figure: the slower direction); a :class:`RailFleet` every first-round pair of a rail judged
together with the robust statistics of :mod:`diagnose.probes.fleet_judge`, which says whether a figure is
slow (below the line-rate floor, or odd against the rail's median). :mod:`diagnose.probes.perftest_judge`
explains the rules.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from diagnose.localize.model import edge
from diagnose.probes import fleet_judge
from diagnose.probes.perftest_plan import Step


@dataclass
class Reading:
    """One rail of one step of one pair's launch, read from both ends' outputs.

    ``gbps`` (bandwidth) or ``latency`` (typical/p99/p999 µs) as the writer's side printed it (the
    server's where the writer's is unreadable); ``error`` when neither side measured.
    """

    round: int
    step: Step
    rail: int
    writer_hca: str
    server_hca: str
    line_gbps: float | None
    memory: str
    gbps: float | None = None
    latency: dict[str, float | None] | None = None
    error: str | None = None
    evidence: list[str] = field(default_factory=list)

    @property
    def pair(self) -> tuple[str, str]:
        return edge(self.step.writer, self.step.server)

    def to_dict(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "kind": "reading",
            "round": self.round,
            "step": self.step.index,
            "mode": self.step.mode,
            "tool": "ib_write_bw" if self.step.kind == "bw" else "ib_write_lat",
            "writer": self.step.writer,
            "server": self.step.server,
            "rail": self.rail,
            "writer_hca": self.writer_hca,
            "server_hca": self.server_hca,
            "memory": self.memory,
            "line_rate_gbps": self.line_gbps,
            "error": self.error,
            "evidence": self.evidence,
        }
        if self.step.kind == "bw":
            entry["gbps"] = self.gbps
        else:
            entry.update(self.latency or {})
        return entry


@dataclass
class PairRail:
    """A pair on one rail in one mode: the slower direction's figure, and the readings behind it."""

    a: str
    b: str
    rail: int
    readings: list[Reading]

    @property
    def value(self) -> float | None:
        values = [r.gbps for r in self.readings]
        return (
            None if not values or any(v is None for v in values) else min(v for v in values if v is not None)
        )

    @property
    def line(self) -> float | None:
        return next((r.line_gbps for r in self.readings if r.line_gbps), None)

    @property
    def error(self) -> str | None:
        return next((f"{r.step.describe()}: {r.error}" for r in self.readings if r.error), None)

    @property
    def label(self) -> str:
        return f"{self.a}↔{self.b}"


def pair_rails(readings: Sequence[Reading], modes: Sequence[str]) -> dict[tuple[str, str, int], PairRail]:
    """Bandwidth readings of ``modes`` grouped by (pair, rail)."""
    grouped: dict[tuple[str, str, int], PairRail] = {}
    for reading in readings:
        if reading.step.kind != "bw" or reading.step.mode not in modes:
            continue
        a, b = reading.pair
        grouped.setdefault((a, b, reading.rail), PairRail(a, b, reading.rail, [])).readings.append(reading)
    return grouped


@dataclass(frozen=True)
class RailFleet:
    """One rail's first-round pairs judged together: its median, the odd limit and the line-rate floor."""

    rail: int
    verdict: fleet_judge.FleetVerdict
    line_gbps: float | None
    floor_gbps: float | None

    @property
    def median(self) -> float | None:
        return self.verdict.median

    @property
    def short(self) -> bool:
        """Most of the rail's pairs are below the floor: a rail-wide shortfall, not one NIC. (A majority, not
        the median: with two pairs the median is their mean, and one slow NIC would drag it below.)"""
        hosts = self.verdict.hosts
        return self.floor_gbps is not None and sum(h.below_floor for h in hosts) * 2 > len(hosts) > 0

    @property
    def odd_below(self) -> float | None:
        """A value below this is odd against the rail (None when the rail has too few pairs to say)."""
        verdict = self.verdict
        if verdict.median is None or verdict.mad_used is None or len(verdict.hosts) < 3:
            return None
        limit = max(
            verdict.thresholds.mad_k * verdict.mad_used / fleet_judge.Z_SCALE,
            verdict.thresholds.min_rel_dev_pct / 100.0 * verdict.median,
        )
        return verdict.median - limit

    def slow_why(self, value: float, line: float | None, fraction: float) -> str | None:
        """Why ``value`` is slow on this rail, or None when it is not."""
        floor = None if line is None else fraction * line
        if floor is not None and value < floor and not self.short:
            return f"below {fraction:g} × the {line:g} Gb/s line rate ({floor:.0f} Gb/s)"
        odd = self.odd_below
        if odd is not None and value < odd:
            return f"odd against rail {self.rail}'s median {self.median:.0f} Gb/s (below {odd:.0f})"
        return None


def rail_fleets(
    first: Mapping[tuple[str, str, int], PairRail], thresholds: fleet_judge.Thresholds, fraction: float
) -> dict[int, RailFleet]:
    """Every rail's fleet of first-round pairs."""
    by_rail: dict[int, list[PairRail]] = {}
    for pair in first.values():
        by_rail.setdefault(pair.rail, []).append(pair)
    fleets = {}
    for rail, pairs in sorted(by_rail.items()):
        values = {p.label: p.value for p in pairs if p.value is not None}
        lines = [p.line for p in pairs if p.line]
        line = float(statistics.median(lines)) if lines else None
        floor = None if line is None else round(fraction * line, 3)
        verdict = fleet_judge.judge(
            f"rail {rail}", values, floor, thresholds, unit="Gb/s", label=f"rail {rail}"
        )
        fleets[rail] = RailFleet(rail, verdict, line, floor)
    return fleets
