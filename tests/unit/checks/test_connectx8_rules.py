"""The fabric checks on an HGX B300: ConnectX-8 (XDR) rails beside NVLink-switch management ConnectX-7s.

The ibstat outputs are the cases tests/facts/ibstat/b300_cx8_*.json, written in the shape of a published
Dell XE9780 ibstat (their sources say where): seven ConnectX-8 ports all Down, and four ConnectX-7 ports of
the NVLink switch management Active at 100 Gb/s. Those four are InfiniBand like the rails; without the
profile's compute CA types they would count as rails and fail the 800 Gb/s rate, as the last tests show.
"""

from __future__ import annotations

import json
from typing import Any

from diagnose.benchmarks.fabric_nics import wrong_nics
from diagnose.checks import ib_consistency, ib_devices, ib_link_rate, ib_port_state
from diagnose.config.profile_files import load_profile
from diagnose.core.hosts import Host
from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.vars import Vars
from diagnose.parsers.ibv_devinfo import parse_ibv_devinfo
from diagnose.parsers.rdma import hca_model
from tests.support.paths import CAPTURED, FACTS
from tests.support.rulekit import profile

DOWN = "b300_cx8_down_nvlsm_cx7_active"
XDR = "b300_cx8_xdr800_nvlsm_cx7_active"
RAILS_DOWN = ("mlx5_0/1", "mlx5_1/1", "mlx5_6/1", "mlx5_7/1", "mlx5_8/1", "mlx5_9/1", "mlx5_10/1")
NVLSM = ("mlx5_2/1", "mlx5_3/1", "mlx5_4/1", "mlx5_5/1")


def _ibstat(case: str) -> CommandOutput:
    lines = json.loads((FACTS / "ibstat" / f"{case}.json").read_text())["output"]
    return CommandOutput(stdout="\n".join(lines), exit_code=0)


def _judge(module: Any, case: str, vars_: Vars) -> Outcome:
    return module.judge(module.parse({"ibstat": _ibstat(case)}, vars_), vars_)


def test_the_b300_profile_expects_eight_connectx8_rails_at_800() -> None:
    expected = load_profile("b300-8x-xdr800").vars
    assert expected["expected_hca_count"] == 8
    assert expected["expected_link_rate_gbps"] == 800
    assert expected["expected_compute_hca_types"] == ["MT4131"]
    assert hca_model("MT4131") == "ConnectX-8 (MT4131)" and hca_model("MT4129") == "ConnectX-7 (MT4129)"


def test_the_captured_b300_fails_naming_every_down_rail_and_not_counting_the_management_ports() -> None:
    outcome = _judge(ib_port_state, DOWN, profile("b300-8x-xdr800", host="b300-1"))
    assert outcome.status == "FAIL"
    assert outcome.message.startswith("0 of 8 expected InfiniBand ports Active on b300-1")
    listed = ", ".join(f"{port} Down/Disabled" for port in RAILS_DOWN)
    assert f"not Active: {listed};" in outcome.message
    assert "only 7 ConnectX-8 (MT4131) ports present" in outcome.message
    assert "not compute rails: ConnectX-7 (MT4129) mlx5_2/1, mlx5_3/1, mlx5_4/1, mlx5_5/1" in outcome.message
    assert outcome.observed == "0 of 7 InfiniBand ports Active"


def test_the_captured_b300_rate_is_not_satisfied_nor_failed_by_the_management_ports() -> None:
    outcome = _judge(ib_link_rate, DOWN, profile("b300-8x-xdr800", host="b300-1"))
    assert outcome.status == "FAIL"
    assert "no Active compute InfiniBand port on b300-1" in outcome.message
    assert "at 100 Gb/s" not in outcome.message


def test_eight_xdr_rails_pass_at_800_with_the_management_ports_set_aside() -> None:
    vars_ = profile("b300-8x-xdr800", host="b300-2")
    state = _judge(ib_port_state, XDR, vars_)
    rate = _judge(ib_link_rate, XDR, vars_)
    assert state.status == "PASS" and "all 8 InfiniBand ports Active/LinkUp on b300-2" in state.message
    assert rate.status == "PASS" and "all 8 Active InfiniBand ports on b300-2 at 8x 800 Gb/s" in rate.message
    assert all(port in rate.message for port in NVLSM)


def test_without_the_compute_types_the_management_ports_fail_the_xdr_rate() -> None:
    """What the profile's CA types are for: the same healthy host, judged as every IB port a rail."""
    vars_ = profile("b300-8x-xdr800", host="b300-2", expected_compute_hca_types=None)
    rate = _judge(ib_link_rate, XDR, vars_)
    assert rate.status == "FAIL" and "4 InfiniBand ports on b300-2 below 800 Gb/s" in rate.message
    down = _judge(ib_port_state, DOWN, vars_)
    assert down.message.startswith("4 of 8 expected InfiniBand ports Active"), "the NVLSM ports counted"


def test_compute_hca_names_select_the_rails_too() -> None:
    rails = "mlx5_0,mlx5_1,mlx5_[6-9],mlx5_1[01]"
    vars_ = profile(
        "b300-8x-xdr800", host="b300-2", expected_compute_hca_types=None, expected_compute_hcas=rails
    )
    assert _judge(ib_link_rate, XDR, vars_).status == "PASS"
    assert _judge(ib_port_state, XDR, vars_).status == "PASS"


def _blocks(case: str) -> list[str]:
    """The case's CA blocks, each with its lines."""
    return ["CA '" + block for block in _ibstat(case).stdout.split("CA '") if block]


def test_a_host_whose_rails_are_missing_is_told_from_one_of_the_wrong_fabric() -> None:
    text = "".join(block for block in _blocks(XDR) if "MT4129" in block)
    vars_ = profile("b300-8x-xdr800", host="b300-3")
    outcome = ib_port_state.judge(ib_port_state.parse({"ibstat": CommandOutput(stdout=text)}, vars_), vars_)
    assert outcome.status == "FAIL" and outcome.action == "replace_hca"
    assert outcome.message.startswith("no compute InfiniBand port on b300-3; not compute rails: ConnectX-7")


def test_consistency_compares_the_rails_rate_only() -> None:
    vars_ = {h: profile("b300-8x-xdr800", host=h) for h in ("b300-1", "b300-2")}
    facts = {h: {"ib.link_rate": ib_link_rate.parse({"ibstat": _ibstat(XDR)}, v)} for h, v in vars_.items()}
    outcomes = ib_consistency.judge(facts, vars_)
    assert [o.status for o in outcomes] == ["PASS"] * len(outcomes)
    assert any("800" in o.observed and "100" not in o.observed for o in outcomes)


def test_ibv_devinfo_names_the_ca_type_as_ibstat_does() -> None:
    text = (CAPTURED / "ibv_devinfo" / "h100_cx7_ib_8hca.txt").read_text()
    assert {p["ca_type"] for p in parse_ibv_devinfo(text)["ports"]} == {"MT4129"}
    vars_ = profile("b300-8x-xdr800", host="h1")
    facts = ib_devices.parse(
        {
            "dev_infiniband": CommandOutput(stdout="uverbs0\n", exit_code=0),
            "ibv_devinfo": CommandOutput(stdout=text, exit_code=0),
        },
        vars_,
    )
    outcome = ib_devices.judge(facts, vars_)
    assert outcome.status == "FAIL"
    assert outcome.message.startswith("h1 has no compute InfiniBand device; not compute rails: ConnectX-7")


def test_nccl_traffic_over_a_management_connectx7_is_named() -> None:
    """NCCL opens every InfiniBand HCA unless NCCL_IB_HCA says otherwise; topo -m of the XE9780 lists no NIC,
    so the b300 profile's compute CA types are what tells a sweep's NICs from the management ports."""
    vars_ = profile("b300-8x-xdr800", host="b300-2")
    facts = {"b300-2": {"ib.port_state": ib_port_state.parse({"ibstat": _ibstat(XDR)}, vars_)}}
    hosts = [Host("b300-2", vars=vars_)]
    rails = [f"mlx5_{i}:1" for i in (0, 1, 6, 7, 8, 9, 10, 11)]
    assert wrong_nics({"b300-2": rails}, hosts, facts) == []
    (problem,) = wrong_nics({"b300-2": [*rails, "mlx5_2:1"]}, hosts, facts)
    assert problem.startswith("b300-2 sent inter-node traffic over mlx5_2:1, not a compute-fabric NIC")
    assert "from the MT4131 HCAs in ibstat (expected_compute_hca_types)" in problem
