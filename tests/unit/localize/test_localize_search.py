"""The localization search on seeded fabrics: what it names, what it leaves alone, and how long it takes.

Each fabric is a ring of hosts with a persistent per-host factor, slow hosts or links planted by the test
and fresh noise at every measurement; a group runs at the pace of its slowest host or ring link, as a
collective does. The search is driven through the same driver as real runs, with a simulated clock.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from statistics import median

import pytest

from diagnose.localize import Settings, localize
from diagnose.localize.model import Edge, Task, edge, ring_edges
from diagnose.localize.rounds import next_wave
from diagnose.localize.timing import TimeModel

PAIR_GBPS = 340.0


@dataclass
class Fabric:
    hosts: list[str]
    seed: int
    noise: float = 0.03
    slow_hosts: dict[str, float] = field(default_factory=dict)
    slow_links: dict[Edge, float] = field(default_factory=dict)
    fleet: float = 1.0
    fail: set[str] = field(default_factory=set)
    concurrency_seen: int = 0
    calls: int = 0
    now: float = 0.0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.factor = {h: 1.0 + self.rng.gauss(0.0, 0.01) for h in self.hosts}

    def measure(self, groups: list[list[str]]) -> list[float | None]:
        members = [h for g in groups for h in g]
        assert len(members) == len(set(members)), "a wave's groups must not share a host"
        self.concurrency_seen = max(self.concurrency_seen, len(groups))
        self.calls += 1
        values: list[float | None] = []
        for group in groups:
            if set(group) & self.fail:
                values.append(None)
                continue
            pace = min(self.factor[h] * (1.0 - self.slow_hosts.get(h, 0.0)) for h in group)
            for link in ring_edges(tuple(group)):
                pace = min(pace, 1.0 - self.slow_links.get(link, 0.0))
            values.append(PAIR_GBPS * self.fleet * pace * (1.0 + self.rng.gauss(0.0, self.noise)))
        timing = TimeModel()
        self.now += max(timing.launch_seconds(len(g), v or 1.0) for g, v in zip(groups, values, strict=True))
        return values

    def clock(self) -> float:
        return self.now


def hosts(n: int) -> list[str]:
    return [f"gpu{i:03d}" for i in range(n)]


def named(finding) -> set[tuple[str, tuple[str, ...]]]:
    return {(a.kind, a.hosts) for a in finding.accused}


def test_one_slow_host_is_named_with_its_numbers() -> None:
    fabric = Fabric(hosts(96), seed=3, slow_hosts={"gpu041": 0.2})
    finding = localize(fabric.hosts, fabric.measure, Settings(), clock=fabric.clock)
    assert named(finding) == {("host", ("gpu041",))}
    assert finding.status == "accused" and not finding.unresolved
    (accusation,) = finding.accused
    assert 0.15 < accusation.deficit < 0.25
    assert accusation.confidence > 0.999
    partners = [next(h for h in j.task.group if h != "gpu041") for j in accusation.evidence]
    assert len(set(partners)) >= 2, "a quorum of distinct partners"
    for j in accusation.evidence:
        assert j.verdict == "slow" and j.ratio is not None and j.ratio < 0.9
        assert len(j.values) >= 3 and j.reference_gbps is not None and j.z is not None and j.z > 3
    # The steps show the search: the first round cut the ring into pieces, and the evidence is in them.
    assert [j.task.role for j in finding.steps[0].judged] == ["split"] * len(finding.steps[0].judged)
    measured = [j for step in finding.steps for j in step.judged]
    assert all(any(j is k for k in measured) for j in accusation.evidence)
    assert finding.seconds == pytest.approx(fabric.now)


def test_a_slow_link_is_named_as_a_link_not_as_its_hosts() -> None:
    fabric = Fabric(hosts(64), seed=5, slow_links={edge("gpu020", "gpu021"): 0.2})
    finding = localize(fabric.hosts, fabric.measure, Settings(), clock=fabric.clock)
    assert named(finding) == {("link", ("gpu020", "gpu021"))}
    (accusation,) = finding.accused
    assert len(accusation.evidence) >= 2 and all(j.task.group in {("gpu020", "gpu021"), ("gpu021", "gpu020")}
                                                 for j in accusation.evidence)  # fmt: skip
    # Each end is fast with at least one other host, and the record says with whom.
    ends = {h for j in accusation.cleared_by for h in j.task.group} & {"gpu020", "gpu021"}
    assert ends == {"gpu020", "gpu021"}
    assert all(j.verdict == "ok" for j in accusation.cleared_by)


def test_a_slow_link_between_two_pieces_of_the_first_cut_is_found() -> None:
    """gpu031↔gpu032 crosses the boundary of the first round's pieces: no piece uses it."""
    fabric = Fabric(hosts(64), seed=8, slow_links={edge("gpu031", "gpu032"): 0.25})
    finding = localize(
        fabric.hosts, fabric.measure, Settings(concurrency=4), clock=fabric.clock, shortfall=0.75
    )
    assert named(finding) == {("link", ("gpu031", "gpu032"))}
    assert any("measured alone next" in note for step in finding.steps for note in step.notes)


def test_two_slow_hosts_are_both_named() -> None:
    fabric = Fabric(hosts(128), seed=11, slow_hosts={"gpu007": 0.2, "gpu090": 0.3})
    finding = localize(fabric.hosts, fabric.measure, Settings(), clock=fabric.clock)
    assert named(finding) == {("host", ("gpu007",)), ("host", ("gpu090",))}
    deficits = {a.hosts[0]: a.deficit for a in finding.accused}
    assert deficits["gpu090"] > deficits["gpu007"]


def test_two_slow_neighbours_in_one_pair_are_both_named_and_their_link_is_not() -> None:
    fabric = Fabric(hosts(32), seed=2, slow_hosts={"gpu010": 0.2, "gpu011": 0.2})
    finding = localize(fabric.hosts, fabric.measure, Settings(), clock=fabric.clock)
    assert named(finding) == {("host", ("gpu010",)), ("host", ("gpu011",))}


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_noise_alone_accuses_nothing(seed: int) -> None:
    fabric = Fabric(hosts(256), seed=seed, noise=0.04)
    finding = localize(fabric.hosts, fabric.measure, Settings(), clock=fabric.clock)
    assert finding.accused == [] and finding.status == "none"


def test_a_fleet_wide_shortfall_accuses_nobody() -> None:
    fabric = Fabric(hosts(128), seed=9, fleet=0.7)
    finding = localize(fabric.hosts, fabric.measure, Settings(), clock=fabric.clock, shortfall=0.7)
    assert finding.accused == [] and finding.status == "none"
    assert finding.healthy_gbps[2] == pytest.approx(0.7 * PAIR_GBPS, rel=0.05)


def test_a_host_whose_launches_fail_is_accused_after_a_quorum() -> None:
    fabric = Fabric(hosts(16), seed=4, fail={"gpu005"})
    finding = localize(fabric.hosts, fabric.measure, Settings(), clock=fabric.clock)
    assert named(finding) == {("host", ("gpu005",))}
    (accusation,) = finding.accused
    assert accusation.deficit == 1.0 and all(j.verdict == "failed" for j in accusation.evidence)


@pytest.mark.parametrize("n", [3, 4, 5])
def test_a_handful_of_hosts_is_enough(n: int) -> None:
    """Few hosts leave few partners: the search pairs suspects with each other and still decides."""
    slow = hosts(n)[-1]
    fabric = Fabric(hosts(n), seed=n, slow_hosts={slow: 0.5})
    finding = localize(fabric.hosts, fabric.measure, Settings(), clock=fabric.clock)
    assert named(finding) == {("host", (slow,))}


def test_waves_respect_the_concurrency_and_rounds_grow_with_log_n() -> None:
    rounds = {}
    for n in (16, 256):
        fabric = Fabric(hosts(n), seed=n, slow_hosts={hosts(n)[n // 3]: 0.2})
        finding = localize(fabric.hosts, fabric.measure, Settings(concurrency=4), clock=fabric.clock)
        assert named(finding) == {("host", (hosts(n)[n // 3],))}
        assert fabric.concurrency_seen <= 4
        rounds[n] = finding.rounds
    # Four pieces per cut: 256 hosts need two more cuts than 16 (log4(256/16) = 2), not sixteen times more.
    assert rounds[256] - rounds[16] in (1, 2, 3)


def test_the_budget_is_respected_and_what_is_left_is_unresolved() -> None:
    fabric = Fabric(hosts(512), seed=6, slow_hosts={"gpu300": 0.2})
    settings = Settings(budget_s=25.0)
    finding = localize(fabric.hosts, fabric.measure, settings, clock=fabric.clock)
    assert finding.status == "incomplete"
    assert finding.seconds <= 25.0
    assert finding.unresolved and any("gpu300" in u or "…" in u for u in finding.unresolved)
    assert any("budget" in note for note in finding.notes)


def test_a_search_out_of_budget_reports_its_suspects_with_the_evidence_against_each() -> None:
    """Two waves of pairs fit in the budget, not the repeats a verdict needs: the slow host is not
    accused, but named as a suspect with its slow pairs, and nothing healthy is accused."""
    fabric = Fabric(hosts(512), seed=6, noise=0.05, slow_hosts={"gpu300": 0.2})
    finding = localize(fabric.hosts, fabric.measure, Settings(budget_s=25.0), clock=fabric.clock)
    assert finding.stopped and finding.accused == []
    by_name = {x.name: x for x in finding.suspects}
    assert {x.name for x in finding.suspects} <= set(finding.unresolved)
    suspect = by_name["gpu300"]
    assert suspect.kind == "host" and suspect.deficit is not None and 0.1 < suspect.deficit < 0.3
    assert suspect.evidence and all("gpu300" in j.task.group for j in suspect.evidence)
    assert all(
        j.verdict in ("slow", "unclear") and j.ratio is not None and j.ratio < 0.9 for j in suspect.evidence
    )
    assert finding.to_dict()["suspects"][0]["measurements"]


def test_repeats_go_to_the_groups_near_the_line_not_to_every_group() -> None:
    """At 5 % noise a 50 % slow host is clear after the first repeats, and so are the healthy pairs that
    measured well; only the pairs still near the line are measured again, not the whole round."""
    fabric = Fabric(hosts(64), seed=7, noise=0.05, slow_hosts={"gpu020": 0.5})
    settings = Settings()
    finding = localize(fabric.hosts, fabric.measure, settings, clock=fabric.clock)
    assert named(finding) == {("host", ("gpu020",))}
    first = finding.steps[0].judged
    slow = [j for j in first if "gpu020" in j.task.group]
    assert slow and all(len(j.values) == settings.repeats for j in slow)
    healthy = [j for j in first if "gpu020" not in j.task.group]
    at_once = [j.ratio or 0.0 for j in healthy if len(j.values) == settings.repeats]
    again = [j.ratio or 0.0 for j in healthy if len(j.values) > settings.repeats]
    assert at_once and again, "some healthy pairs were cleared at once, others measured again"
    assert median(again) < median(at_once), "the extra repeats went to the pairs nearer the line"


def test_a_round_as_wide_as_the_hosts_measures_every_ring_link_in_two_waves() -> None:
    """With no concurrency set, 64 hosts are cut into 32 pairs at once and their 32 seams in a second
    wave: a slow host shows as two slow neighbouring pairs and is named in the first round."""
    fabric = Fabric(hosts(64), seed=12, slow_hosts={"gpu033": 0.2})
    finding = localize(fabric.hosts, fabric.measure, Settings(), clock=fabric.clock)
    assert named(finding) == {("host", ("gpu033",))}
    assert fabric.concurrency_seen == 32
    step = finding.steps[0]
    assert step.waves == 2 and len(step.judged) == 64
    assert {edge(*j.task.group) for j in step.judged} == set(ring_edges(tuple(fabric.hosts)))
    assert finding.rounds == 1


def test_settings_refuse_what_cannot_work() -> None:
    with pytest.raises(ValueError, match="repeats"):
        Settings(repeats=1)
    with pytest.raises(ValueError, match="detect_deficit"):
        Settings(detect_deficit=1.5)


def test_a_slow_link_beside_a_slow_host_is_named_in_the_second_round() -> None:
    """gpu020's two ring pairs are both slow (its link to gpu019, and slow gpu021), so the first round
    clears neither gpu020 nor gpu021. The link gpu019↔gpu020, whose other end is fast elsewhere, is
    measured again in the second round alongside gpu020's partners, not in a third round after them."""
    fabric = Fabric(
        hosts(64), seed=4, noise=0.01, slow_hosts={"gpu021": 0.2}, slow_links={edge("gpu019", "gpu020"): 0.2}
    )
    finding = localize(fabric.hosts, fabric.measure, Settings(), clock=fabric.clock)
    assert named(finding) == {("host", ("gpu021",)), ("link", ("gpu019", "gpu020"))}
    assert any(note.startswith("link gpu019↔gpu020 accused") for note in finding.steps[1].notes)


def test_the_extra_repeats_of_a_round_go_to_open_groups_sharing_no_host() -> None:
    """Open groups that share a host are measured in turn, one wave each, the least measured first: a
    wave never waits on a second wave of the same repeat."""
    tasks = [Task(g, "split") for g in (("a", "b"), ("b", "c"), ("d", "e"), ("e", "f"))]
    assert next_wave(tasks, [0, 1, 2, 3], [5, 4, 4, 5], 4) == [1, 2]
    assert next_wave(tasks, [0, 3], [5, 4, 4, 5], 4) == [0, 1]
    assert next_wave(tasks, [0, 2], [5, 4, 4, 5], 1) == [1]
