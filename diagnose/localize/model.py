"""What the search works with and hands back: its settings, the groups it measures, their verdicts, the
accusations with the numbers behind them, and the finding. Plain data, so that the stage can write it
into results.json and the simulator can score it without knowing how the search reached it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Group = tuple[str, ...]
Edge = tuple[str, str]
Role = Literal["split", "partner", "link", "control"]
Verdict = Literal["slow", "failed", "ok", "unclear", "unjudged"]


def edge(a: str, b: str) -> Edge:
    """A link between two hosts, the same whichever end is named first."""
    return (a, b) if a <= b else (b, a)


def ring_edges(group: Group) -> list[Edge]:
    """The host pairs a ring over ``group`` (in its order) sends over: neighbours, and last to first."""
    if len(group) < 2:
        return []
    if len(group) == 2:
        return [edge(group[0], group[1])]
    return [edge(group[i], group[(i + 1) % len(group)]) for i in range(len(group))]


@dataclass(frozen=True)
class Settings:
    """How hard the search looks and how long it may take.

    ``concurrency`` launches run at once (disjoint host groups; 0: as many as the hosts make, every host
    busy, which is as wide as the fabric allows); every group of a round is measured ``repeats`` times,
    and only the groups still near the line — neither ``z_power`` standard errors above the level of a
    ``detect_deficit`` slow element (which clears its hosts) nor beyond the critical value below the
    reference (slow) — are measured again, up to ``max_repeats``, and then cleared if they fall short by
    less than half the design deficit or than ``min_deficit``, whichever is more: a wave costs the same
    with one group as with thousands, so the repeats go where a verdict is still open; ``alpha`` is
    the chance of any false flag in a round, over every look at a group measured again; nothing less than ``min_deficit`` slow is accused; a host
    is accused after slow pairs with ``quorum`` distinct partners already seen fast, a link after
    ``quorum`` slow measurements of the pair whose two hosts are fast with others; ``budget_s`` bounds
    the whole search; ``noise_floor`` is the smallest relative noise believed.
    """

    concurrency: int = 0
    repeats: int = 3
    max_repeats: int = 10
    quorum: int = 2
    detect_deficit: float = 0.08
    min_deficit: float = 0.05
    alpha: float = 0.01
    z_power: float = 3.0
    budget_s: float = 600.0
    noise_floor: float = 0.005
    min_reference: int = 8

    def __post_init__(self) -> None:
        if self.concurrency < 0 or self.repeats < 2 or self.max_repeats < self.repeats or self.quorum < 1:
            raise ValueError(
                "localization needs concurrency ≥ 0 (0: every host at once), repeats ≥ 2 (the noise is read from repeats), "
                "max_repeats ≥ repeats and quorum ≥ 1"
            )
        if not 0 < self.detect_deficit < 1 or not 0 <= self.min_deficit < 1 or not 0 < self.alpha < 1:
            raise ValueError("detect_deficit and alpha lie in (0, 1), min_deficit in [0, 1)")


@dataclass(frozen=True)
class Task:
    """One group to measure in a round, and why.

    ``split``: a piece of a slow group; ``partner``: a suspect host (``subject``) with a fresh partner
    already seen fast; ``link``: a suspect host pair measured alone; ``control``: hosts already seen
    fast, measured alongside so that the round has a healthy reference of the same group size.
    """

    group: Group
    role: Role
    subject: str = ""


@dataclass
class Judged:
    """A measured task with its verdict against the round's healthy reference of its group size.

    ``slow``: significantly below the reference (``z`` beyond the round's critical value) and by at least
    the smallest deficit worth naming; ``ok``: significantly above the level of an element slow by the
    design deficit, so it clears its hosts and links; ``unclear``: neither yet (measured again, then left
    as a suspect); ``failed``: a launch failed or hung; ``unjudged``: no reference to judge it against.
    """

    task: Task
    values: list[float | None]
    reference_gbps: float | None
    ratio: float | None
    z: float | None
    p: float | None
    verdict: Verdict

    def to_dict(self) -> dict[str, Any]:
        return {
            "hosts": list(self.task.group),
            "role": self.task.role,
            "subject": self.task.subject or None,
            "values": [None if v is None else round(v, 4) for v in self.values],
            "reference_gbps": None if self.reference_gbps is None else round(self.reference_gbps, 4),
            "ratio": None if self.ratio is None else round(self.ratio, 4),
            "z": None if self.z is None else (round(self.z, 2) if self.z != float("inf") else "inf"),
            "p": self.p,
            "verdict": self.verdict,
        }


@dataclass
class Step:
    """One round of the search: what it measured, how often, and what it concluded."""

    round: int
    repeats: int
    waves: int
    seconds: float
    judged: list[Judged]
    notes: list[str] = field(default_factory=list)
    noise_pct: float | None = None
    critical_z: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "repeats": self.repeats,
            "waves": self.waves,
            "seconds": round(self.seconds, 2),
            "noise_pct": None if self.noise_pct is None else round(self.noise_pct, 3),
            "critical_z": None if self.critical_z is None else round(self.critical_z, 2),
            "groups": [list(j.task.group) for j in self.judged],
            "values": [j.to_dict()["values"] for j in self.judged],
            "verdicts": [
                {k: v for k, v in j.to_dict().items() if k not in ("hosts", "values")} for j in self.judged
            ],
            "notes": list(self.notes),
        }


@dataclass
class Accusation:
    """A slow host or link, how much slower it is, how sure the search is, and the measurements behind it."""

    kind: Literal["host", "link"]
    hosts: Group  # one host, or the link's two ends
    deficit: float  # 1 − (its measurements / the healthy reference), median over the evidence
    confidence: float  # 1 − the chance that noise alone produced the evidence, corrected for the tests made
    evidence: list[Judged]  # the slow measurements that convict it
    cleared_by: list[Judged] = field(default_factory=list)  # for a link: each end fast with another host

    @property
    def name(self) -> str:
        return self.hosts[0] if self.kind == "host" else f"{self.hosts[0]}↔{self.hosts[1]}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "hosts": list(self.hosts),
            "deficit_pct": round(100 * self.deficit, 1),
            "confidence": self.confidence,
            "measurements": [j.to_dict() for j in self.evidence],
            "cleared_by": [j.to_dict() for j in self.cleared_by],
        }


@dataclass
class Suspect:
    """What the search still suspects but could not prove (the budget ran out, or partners or repeats did),
    with the measurements against it: a reader can act on a named suspect, not on "nothing named"."""

    kind: Literal["host", "link", "group"]
    name: str
    hosts: Group
    deficit: float | None  # 1 − its measurements / the healthy reference, median over the evidence
    evidence: list[Judged]  # the slow or unclear measurements that contain it, most telling first

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "hosts": list(self.hosts) if len(self.hosts) <= 3 else [self.hosts[0], self.hosts[-1]],
            "host_count": len(self.hosts),
            "deficit_pct": None if self.deficit is None else round(100 * self.deficit, 1),
            "measurements": [j.to_dict() for j in self.evidence],
        }


@dataclass
class Finding:
    """The outcome of one search.

    ``status``: ``accused`` (at least one host or link named), ``none`` (nothing stands out among the
    groups: the shortfall is fleet-wide or shows only at full scale), ``incomplete`` (the budget ran out,
    or suspects were left without a verdict — too few partners, too much noise; accusations made so far
    stand).
    """

    status: Literal["accused", "none", "incomplete"]
    accused: list[Accusation]
    unresolved: list[str]  # suspects left: host names, or "a↔b" links
    steps: list[Step]
    hosts: int
    launches: int
    seconds: float
    healthy_gbps: dict[int, float]  # the healthy busbw by group size, medians over the search
    notes: list[str] = field(default_factory=list)
    stopped: str | None = None  # why the search ended before it was done (the budget), if it did
    suspects: list[Suspect] = field(default_factory=list)  # the unresolved, each with its evidence

    @property
    def rounds(self) -> int:
        return len(self.steps)

    @property
    def confidence(self) -> float | None:
        """The weakest accusation's confidence (the finding is as sure as its least sure part)."""
        return min((a.confidence for a in self.accused), default=None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "accused": [a.to_dict() for a in self.accused],
            "unresolved": list(self.unresolved),
            "hosts": self.hosts,
            "rounds": self.rounds,
            "launches": self.launches,
            "seconds": round(self.seconds, 2),
            "healthy_gbps": {str(k): round(v, 4) for k, v in sorted(self.healthy_gbps.items())},
            "confidence": self.confidence,
            "notes": list(self.notes),
            "stopped": self.stopped,
            "suspects": [x.to_dict() for x in self.suspects],
            "steps": [s.to_dict() for s in self.steps],
        }


def as_plain(settings: Settings) -> dict[str, Any]:
    """The settings as results.json records them."""
    return asdict(settings)
