"""The action of each ib.write_bw verdict, chosen by the judge from what it told apart (docs/actions.md), on
the modelled fabric of tests/support/perftest.py (every pair runs at its slower NIC's and cable's pace)."""

from __future__ import annotations

from diagnose.core.model import CheckResult
from diagnose.probes import fleet_judge
from diagnose.probes.perftest_campaign import Campaign
from diagnose.probes.perftest_settings import Settings
from tests.support.perftest import Fabric, rails_for


def findings(fabric: Fabric, hosts: int = 6) -> list[CheckResult]:
    names = [f"node{i}" for i in range(1, hosts + 1)]
    outcome = Campaign(rails_for(names), Settings(), fleet_judge.Thresholds(), fabric).run(names)
    return [c for c in outcome.conclusion.checks if c.status != "PASS"]


def test_a_slow_nic_a_slow_link_and_an_unsettled_pair_are_the_cable_first() -> None:
    [nic] = findings(Fabric(nic={("node4", 1): 0.5}))
    assert nic.host == "node4" and nic.action == "reseat_or_replace_cable"
    assert "cable and transceiver first (action: reseat_or_replace_cable)" in str(nic.remediation)
    [link] = findings(Fabric(link={("node1", "node2", 0): 0.6}))
    assert link.message.startswith("the link") and link.action == "reseat_or_replace_cable"
    [pair] = findings(Fabric(nic={("node2", 0): 0.5}), hosts=2)
    assert "not told apart" in pair.message and pair.action == "reseat_or_replace_cable"


def test_a_rail_short_as_a_whole_and_rails_contending_are_settings() -> None:
    [rail] = findings(Fabric(nic={(f"node{i}", 0): 0.8 for i in range(1, 7)}))
    assert "rail-wide shortfall" in rail.message and rail.action == "check_config"
    contended = findings(Fabric(together=0.6))
    assert len(contended) == 3 and {c.action for c in contended} == {"check_config"}


def test_a_healthy_fabric_carries_no_action() -> None:
    names = [f"node{i}" for i in range(1, 7)]
    outcome = Campaign(rails_for(names), Settings(), fleet_judge.Thresholds(), Fabric()).run(names)
    assert {c.action for c in outcome.conclusion.checks} == {None}
