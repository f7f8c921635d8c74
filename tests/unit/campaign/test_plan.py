"""What ``campaign next`` plans from a standing: order, batches, the full-scale step and its threshold."""

from __future__ import annotations

from diagnose.campaign import phases as ph
from diagnose.campaign.plan import plan
from diagnose.campaign.standing import ClusterStanding, HostStanding, Standing


def standing_of(*hosts: HostStanding, full_scale: bool = False) -> Standing:
    counts = {
        s: sum(1 for h in hosts if h.state == s)
        for s in ("accepted", "pending", "failed", "repaired", "excluded")
    }
    return Standing(
        "acc",
        ph.Needs((ph.HOST, ph.STRESS, ph.COLLECTIVE), (ph.FULL_SCALE,)),
        list(hosts),
        [ClusterStanding(ph.FULL_SCALE, full_scale, None, "")],
        {"hosts": len(hosts), **counts},
        1,
        None,
        None,
    )


def accepted(name: str) -> HostStanding:
    return HostStanding(name, "accepted")


def test_repaired_then_failed_then_pending_each_with_only_what_it_misses() -> None:
    state = standing_of(
        HostStanding("n1", "pending", (ph.STRESS,)),
        HostStanding("n2", "failed", (ph.HOST, ph.COLLECTIVE)),
        HostStanding("n3", "repaired", (ph.STRESS,)),
        accepted("n4"),
    )
    steps = plan(state, min_fraction=1.0)
    assert [(s.why, s.hosts, s.phases) for s in steps] == [
        ("retest repaired", ("n3",), (ph.HOST, ph.STRESS)),
        ("retest failed", ("n2",), (ph.HOST,)),
        ("pending", ("n1",), (ph.HOST, ph.STRESS)),
    ]


def test_hosts_come_in_batches_and_a_host_already_tried_is_not_planned_again() -> None:
    state = standing_of(*(HostStanding(f"n{i}", "pending", (ph.STRESS,)) for i in range(5)))
    assert [s.hosts for s in plan(state, batch=2, min_fraction=1.0)] == [("n0", "n1"), ("n2", "n3"), ("n4",)]
    assert [s.hosts for s in plan(state, batch=2, min_fraction=1.0, done={"n0", "n1"})] == [
        ("n2", "n3"),
        ("n4",),
    ]


def test_the_full_scale_step_waits_for_the_fraction_and_takes_the_hosts_waiting_for_it() -> None:
    hosts = [accepted(f"n{i}") for i in range(18)] + [
        HostStanding("w1", "pending", (ph.COLLECTIVE,)),
        HostStanding("p1", "pending", (ph.STRESS, ph.COLLECTIVE)),
    ]
    steps = plan(standing_of(*hosts), min_fraction=0.95)
    assert [s.why for s in steps] == ["pending", "full scale"]  # 19 of 20 ready: 95 %
    assert "w1" in steps[-1].hosts and "p1" not in steps[-1].hosts
    assert steps[-1].phases == (ph.HOST, ph.COLLECTIVE)
    fewer = standing_of(*hosts[:17], *hosts[18:], HostStanding("x", "failed", (ph.HOST,)))
    assert [s.why for s in plan(fewer, min_fraction=0.95)] == ["retest failed", "pending"]


def test_nothing_is_planned_for_an_accepted_cluster() -> None:
    assert plan(standing_of(accepted("a"), accepted("b"), full_scale=True)) == []


def test_a_repaired_host_missing_only_a_collective_gets_its_own_host_checks_first() -> None:
    """A host repaired after failing only a collective may have come back with a new GPU or cable: its own
    host checks read the part (and void what it voids) before it joins a full-scale run of every host."""
    hosts = [accepted(f"n{i}") for i in range(3)] + [HostStanding("r", "repaired", (ph.COLLECTIVE,))]
    steps = plan(standing_of(*hosts), min_fraction=0.5)
    assert (steps[0].why, steps[0].hosts, steps[0].phases) == ("retest repaired", ("r",), (ph.HOST,))


def test_a_repaired_host_whose_parts_were_read_since_joins_the_full_scale_step() -> None:
    hosts = [accepted(f"n{i}") for i in range(3)] + [
        HostStanding("r", "repaired", (ph.COLLECTIVE,), checked_since_repair=True)
    ]
    steps = plan(standing_of(*hosts), min_fraction=0.5)
    assert [(s.why, s.hosts) for s in steps] == [("full scale", ("n0", "n1", "n2", "r"))]
