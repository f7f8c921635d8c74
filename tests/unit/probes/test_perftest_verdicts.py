"""The per-NIC benchmark's verdicts through its real driver (diagnose.probes.perftest_campaign) on a
modelled fabric (tests/support/perftest.py: Fabric): every pair on a rail runs at its slower NIC's pace and
its cable's, in both directions; healthy NDR ports write at 391 Gb/s.
"""

from __future__ import annotations

from diagnose.core.model import CheckResult
from diagnose.probes import fleet_judge
from diagnose.probes.perftest_campaign import Campaign, Outcome
from diagnose.probes.perftest_settings import Settings
from tests.support.perftest import HEALTHY_GBPS, Fabric, rails_for


def campaign(fabric: Fabric, hosts: int = 6, latency: bool = False, **settings: object) -> Outcome:
    names = [f"node{i}" for i in range(1, hosts + 1)]
    return Campaign(
        rails_for(names),
        Settings(**settings),
        fleet_judge.Thresholds(),
        fabric,
        latency=latency,  # type: ignore[arg-type]
    ).run(names)


def findings(outcome: Outcome, status: str | None = None) -> list[CheckResult]:
    return [
        c for c in outcome.conclusion.checks if c.status != "PASS" and (status is None or c.status == status)
    ]


def nic_record(outcome: Outcome, host: str, rail: int) -> dict:
    return next(
        r for r in outcome.conclusion.records if r["kind"] == "nic" and (r["host"], r["rail"]) == (host, rail)
    )


def test_healthy_fabric_stays_quiet_and_measures_every_nic() -> None:
    outcome = campaign(Fabric())
    assert findings(outcome) == []
    summary = next(c for c in outcome.conclusion.checks if c.host is None)
    assert summary.status == "PASS" and "12 NICs on 6 hosts" in summary.message
    assert outcome.rounds == 1 and outcome.launches == 3
    assert {r["verdict"] for r in outcome.conclusion.records if r["kind"] == "nic"} == {"PASS"}


def test_a_slow_nic_is_named_by_host_hca_and_rail_and_its_partner_cleared() -> None:
    fabric = Fabric(nic={("node4", 1): 0.5})
    outcome = campaign(fabric)
    [failed] = findings(outcome)
    assert (failed.id, failed.host, failed.status) == ("ib.write_bw", "node4", "FAIL")
    assert "mlx5_1 (rail 1)" in failed.message and "slow with 2 of 2 other partners" in failed.message
    assert failed.observed == [{"rail": 1, "hca": "mlx5_1", "gbps": 195.6}]
    assert nic_record(outcome, "node4", 1)["verdict"] == "FAIL"
    assert nic_record(outcome, "node3", 1)["verdict"] == "PASS"  # its first-round partner, fast with others
    assert nic_record(outcome, "node3", 1)["gbps"] == HEALTHY_GBPS
    # node3 and node4 each met two other hosts, in rounds where every host is busy once.
    for chosen in fabric.rounds[1:]:
        busy = [h for pair in chosen for h in pair]
        assert len(busy) == len(set(busy))
    assert outcome.rounds == 1 + len(fabric.rounds[1:])


def test_a_slow_link_between_two_fast_nics_is_named_as_a_link() -> None:
    outcome = campaign(Fabric(link={("node1", "node2", 0): 0.6}))
    [failed] = findings(outcome)
    assert (failed.host, failed.status) == (None, "FAIL")
    assert failed.message.startswith("the link node1 mlx5_0 ↔ node2 mlx5_0 (rail 0) is slow")
    assert (
        "the pair alone is slow" in failed.message and "while each host is fast with others" in failed.message
    )
    assert failed.observed["hosts"] == ["node1", "node2"]
    assert any(r["kind"] == "link" for r in outcome.conclusion.records)
    assert nic_record(outcome, "node1", 0)["verdict"] == "PASS"


def test_two_hosts_cannot_tell_the_nic_from_the_link_and_say_so() -> None:
    outcome = campaign(Fabric(nic={("node2", 0): 0.5}), hosts=2)
    [failed] = findings(outcome)
    assert failed.status == "FAIL" and "NIC or link not told apart" in failed.message
    assert "no other host with a healthy pair" in failed.message


def test_a_rail_short_on_every_pair_is_one_rail_wide_finding_not_every_nic() -> None:
    nic = {(f"node{i}", 0): 0.8 for i in range(1, 7)}
    outcome = campaign(Fabric(nic=nic))
    [failed] = findings(outcome)
    assert failed.host is None and "rail-wide shortfall" in failed.message


def test_rails_together_below_their_sum_alone_warn_of_contention() -> None:
    outcome = campaign(Fabric(together=0.6))
    warned = findings(outcome, "WARN")
    assert len(warned) == 3 and all("shared bottleneck" in c.message for c in warned)


def test_a_pair_that_never_connected_is_an_error_naming_it() -> None:
    outcome = campaign(Fabric(failing={"node6"}))
    errors = findings(outcome, "ERROR")
    assert errors and all("node5" in c.message and "node6" in c.message for c in errors)
    assert "Couldn't connect" in errors[0].message


def test_latency_above_the_p99_bound_fails_naming_the_rail() -> None:
    outcome = campaign(Fabric(latency_us=9.5), latency=True, latency_p99_us=5.0)
    failed = [c for c in findings(outcome, "FAIL") if c.id == "ib.latency" and c.host is None]
    assert any("p99 9.5 µs above 5 µs" in c.message and "(rail 1)" in c.message for c in failed)
    assert campaign(Fabric(), latency=True).conclusion.checks[-1].status == "PASS"


def test_the_budget_stops_rounds_that_cannot_end_in_time_and_says_so() -> None:
    names = [f"node{i}" for i in range(1, 5)]
    now = [0.0]
    outcome = Campaign(
        rails_for(names),
        Settings(duration_s=5),
        fleet_judge.Thresholds(),
        Fabric(),
        clock=lambda: now[0],
        deadline=10.0,
    ).run(names)
    assert outcome.rounds == 0 and outcome.readings == []
    assert any("past the time budget" in c.message for c in findings(outcome, "WARN"))
