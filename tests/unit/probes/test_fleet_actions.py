"""The action of each fleet verdict, chosen from what the host's figures say (docs/actions.md): on the
fleet probe's real output from the lent 2× H200 machine (tests/support/fleet.py), one host made slow."""

from __future__ import annotations

from diagnose.core.model import CheckResult
from diagnose.probes import fleet_judge as fleet
from diagnose.probes.fleet import HostFigures, judge_fleet
from tests.support.fleet import host, settings


def _odd(hosts: list[HostFigures], check_id: str, **values: float) -> CheckResult:
    judgement = judge_fleet(hosts, settings(**values), {})
    (odd,) = [c for c in judgement.checks if c.id == check_id and c.host is not None]
    return odd


def test_host_to_device_copies_slow_on_every_gpu_are_the_hosts_setting() -> None:
    hosts = [host(f"gpu{i:02d}") for i in range(1, 17)]
    hosts[6] = host("gpu07", h2d=0.9)
    odd = _odd(hosts, "fleet.h2d")
    assert odd.host == "gpu07" and odd.status == "FAIL" and odd.action == "check_config"


def test_host_to_device_copies_slow_on_one_gpu_are_its_pcie_link() -> None:
    hosts = [host(f"gpu{i:02d}") for i in range(1, 17)]
    slow = hosts[6]
    slow.detail["h2d"][1]["gbps"] *= 0.5
    slow.values["h2d"] = min(r["gbps"] for r in slow.detail["h2d"])
    odd = _odd(hosts, "fleet.h2d")
    assert odd.host == "gpu07" and odd.action == "reseat_or_replace_cable"


def test_slow_peer_copies_reset_the_gpus_and_a_fleet_short_of_the_profile_is_configuration() -> None:
    hosts = [host(f"gpu{i:02d}") for i in range(1, 17)]
    hosts[3] = host("gpu04", peer=0.8)
    assert _odd(hosts, "fleet.nvlink").action == "reset_gpu"
    short = judge_fleet([host(f"gpu{i:02d}") for i in range(1, 9)], settings(min_peer_copy_gbps=450), {})
    (summary,) = [c for c in short.checks if c.id == "fleet.nvlink"]
    assert summary.status == "FAIL" and summary.host is None and summary.action == "check_config"


def test_the_rule_by_hand() -> None:
    assert fleet.host_action("fleet.h2d", [55.0, 54.8, 20.1, 55.2]) == "reseat_or_replace_cable"
    assert fleet.host_action("fleet.h2d", [40.0, 41.0, 39.5]) == "check_config"
    assert fleet.host_action("fleet.h2d", [20.0]) == "check_config"  # one GPU: no sibling to tell by
    assert fleet.host_action("fleet.memcpy", [9.0]) == "check_config"
    assert fleet.host_action("fleet.busbw", [100.0]) == "reset_gpu"
