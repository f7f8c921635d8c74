"""Which end of a slow pair is slow: each end measured again with other partners (pure).

Like the collectives' localization (:mod:`diagnose.localize`: fresh partners already seen fast, a quorum),
each end of a slow first-round pair is measured again with :data:`QUORUM` hosts whose own pair on that
rail was healthy (the least used first, so that no partner carries every suspect). An end slow with every
one of them is accused (weakly with fewer partners than the quorum), an end fast with any of them is
cleared, anything else stays unclear; :mod:`diagnose.probes.perftest_judge` turns that into verdicts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from diagnose.localize.model import edge
from diagnose.probes.perftest_readings import PairRail, RailFleet

#: Partners an end is measured with before it is accused.
QUORUM = 2


@dataclass
class Suspect:
    """A slow first-round pair on one rail, and what the re-measurements said of each end."""

    pair: PairRail
    why: str
    partners: dict[str, list[str]] = field(default_factory=dict)  # end → partners chosen
    results: dict[str, list[tuple[str, float | None, str | None]]] = field(default_factory=dict)


def suspects_of(
    first: Mapping[tuple[str, str, int], PairRail], fleets: Mapping[int, RailFleet], fraction: float
) -> list[Suspect]:
    """The first-round pairs that are slow, in rail then pair order."""
    found = []
    for key in sorted(first, key=lambda k: (k[2], k[0], k[1])):
        pair = first[key]
        value = pair.value
        if value is None:
            continue
        why = fleets[pair.rail].slow_why(value, pair.line, fraction)
        if why:
            found.append(Suspect(pair, why))
    return found


def choose_partners(
    suspects: Sequence[Suspect],
    first: Mapping[tuple[str, str, int], PairRail],
    fleets: Mapping[int, RailFleet],
    fraction: float,
) -> list[tuple[str, str, int]]:
    """Fill each suspect's ``partners`` (up to QUORUM per end, hosts whose own pair on the rail was
    healthy, the least used first) and return the (end, partner, rail) measurements to make."""
    healthy: dict[int, list[str]] = {}
    for pair in first.values():
        value = pair.value
        if value is not None and fleets[pair.rail].slow_why(value, pair.line, fraction) is None:
            healthy.setdefault(pair.rail, []).extend((pair.a, pair.b))
    used: dict[str, int] = {}
    tasks = []
    for suspect in suspects:
        pair = suspect.pair
        pool = [h for h in dict.fromkeys(healthy.get(pair.rail, [])) if h not in (pair.a, pair.b)]
        for end in (pair.a, pair.b):
            chosen = sorted(pool, key=lambda h: (used.get(h, 0), pool.index(h)))[:QUORUM]
            suspect.partners[end] = chosen
            for partner in chosen:
                used[partner] = used.get(partner, 0) + 1
                tasks.append((end, partner, pair.rail))
    return tasks


def record_checks(suspects: Sequence[Suspect], checks: Mapping[tuple[str, str, int], PairRail]) -> None:
    """Attach the localization readings to each suspect's ends: (partner, value, error) per partner."""
    for suspect in suspects:
        rail = suspect.pair.rail
        for end, partners in suspect.partners.items():
            found = []
            for partner in partners:
                a, b = edge(end, partner)
                pair = checks.get((a, b, rail))
                found.append(
                    (partner, None if pair is None else pair.value, None if pair is None else pair.error)
                )
            suspect.results[end] = found


@dataclass(frozen=True)
class EndVerdict:
    """One end of a suspect pair after its re-measurements."""

    host: str
    state: str  # accused, weak, cleared, unclear, alone
    slow_with: tuple[tuple[str, float], ...]
    fast_with: tuple[tuple[str, float], ...]


def end_verdict(
    suspect: Suspect,
    end: str,
    fleet: RailFleet,
    lines: Mapping[tuple[str, str], float | None],
    fraction: float,
) -> EndVerdict:
    results = suspect.results.get(end, [])
    slow, fast = [], []
    for partner, value, _ in results:
        if value is None:
            continue
        line = lines.get(edge(end, partner))
        (slow if fleet.slow_why(value, line, fraction) else fast).append((partner, value))
    measured = len(slow) + len(fast)
    if not suspect.partners.get(end):
        state = "alone"
    elif fast:
        state = "cleared" if not slow else "unclear"
    elif slow and len(slow) >= QUORUM:
        state = "accused"
    elif slow and measured == len(results):
        state = "weak"
    else:
        state = "unclear"
    return EndVerdict(end, state, tuple(slow), tuple(fast))
