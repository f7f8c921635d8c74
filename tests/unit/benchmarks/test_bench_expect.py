"""The busbw expectation curve and the verdicts built on it."""

from __future__ import annotations

import pytest

from diagnose.benchmarks.expect import (
    expected_busbw,
    fabric_efficiency,
    judge_busbw,
    large_message_busbw,
    nvlink_domain_of,
)
from diagnose.config.profile_files import load_profile
from diagnose.core.errors import ConfigError
from diagnose.core.vars import Vars
from diagnose.parsers.nccl_log import parse_nccl_log, summarize_transport
from tests.support.paths import FACTS

NDR400_8 = Vars({"line_rate_gbps": 400, "expected_hca_count": 8, "nvlink_busbw_gbps": 360})


@pytest.mark.parametrize(("nodes", "share"), [(2, 0.85), (8, 0.68), (125, 0.39)])
def test_seed_points_are_reproduced(nodes: int, share: float) -> None:
    assert fabric_efficiency(nodes) == pytest.approx(share)


def test_curve_is_linear_in_log_nodes_between_seeds() -> None:
    assert fabric_efficiency(4) == pytest.approx((0.85 + 0.68) / 2)  # log 4 is halfway from log 2 to log 8
    assert fabric_efficiency(16) < 0.68
    assert fabric_efficiency(16) > fabric_efficiency(64) > 0.39


def test_is_156_gbps_at_125_nodes_normal() -> None:
    """The question from the issue: on 8 × 400 Gb/s per host, 125 nodes, yes — it is the expected value."""
    expectation = expected_busbw("all_reduce", 125, 8, NDR400_8)
    assert expectation.expected_gbps == pytest.approx(156.0)
    status, message = judge_busbw("all_reduce", 156.0, 1 << 30, 125, expectation, "nccl")
    assert status == "PASS"
    assert "within the normal range 133–179 GB/s" in message
    assert "125 nodes" in message


def test_below_the_normal_range_fails_and_says_the_range() -> None:
    expectation = expected_busbw("all_reduce", 2, 8, NDR400_8)
    assert expectation.expected_gbps == pytest.approx(340.0)
    status, message = judge_busbw("all_reduce", 250.0, 4 << 30, 2, expectation, "nccl")
    assert status == "FAIL"
    assert "below the normal range 289–391 GB/s" in message


def test_one_node_uses_the_nvlink_figure() -> None:
    expectation = expected_busbw("all_gather", 1, 8, NDR400_8)
    assert expectation.expected_gbps == 360
    assert "nvlink_busbw_gbps" in expectation.basis


def test_all_to_all_is_bounded_by_one_ranks_share_of_the_fabric() -> None:
    expectation = expected_busbw("all_to_all", 2, 8, NDR400_8)
    # 50 GB/s per rank × 85 % × (16-1)/(16-8)
    assert expectation.expected_gbps == pytest.approx(50 * 0.85 * 15 / 8, abs=0.1)


def test_gloo_is_never_failed_on_bandwidth() -> None:
    expectation = expected_busbw("all_reduce", 2, 1, NDR400_8)
    status, message = judge_busbw("all_reduce", 0.2, 1 << 26, 2, expectation, "gloo")
    assert status == "PASS"
    assert "not representative" in message


def test_no_fabric_in_the_profile_is_not_judged() -> None:
    expectation = expected_busbw("all_reduce", 2, 8, Vars({"expected_hca_count": 0}))
    status, message = judge_busbw("all_reduce", 20.0, 1 << 30, 2, expectation, "nccl")
    assert status == "WARN"
    assert "not judged" in message


def test_large_message_busbw_ignores_small_rows() -> None:
    rows = [
        {"bytes": 1 << 20, "busbw_gbps": 999.0},
        {"bytes": 64 << 20, "busbw_gbps": 300.0},
        {"bytes": 256 << 20, "busbw_gbps": 338.5},
    ]
    assert large_message_busbw(rows) == (338.5, 256 << 20)
    assert large_message_busbw(rows[:1]) == (None, None)


def test_an_operator_figure_per_node_count() -> None:
    """A fabric without a datasheet (host sockets between two hosts of one lent machine: 4.6 GB/s at 2
    nodes) gets its own figure per node count; other counts keep the profile's (NVLink inside one node)."""
    for value in ({2: 4.6}, {"2": "4.6"}, "2:4.6", "1:360, 2:4.6"):
        host_vars = Vars({**NDR400_8, "expected_busbw_all_reduce_gbps": value})
        two = expected_busbw("all_reduce", 2, 2, host_vars)
        assert (two.expected_gbps, two.basis) == (4.6, "set by expected_busbw_all_reduce_gbps for 2 nodes")
        one = expected_busbw("all_reduce", 1, 2, host_vars)
        assert one.expected_gbps == 360
    eight = expected_busbw("all_reduce", 8, 8, Vars({**NDR400_8, "expected_busbw_all_reduce_gbps": {2: 4.6}}))
    assert eight.basis.startswith("68% of 8 × 400 Gb/s"), "a count the table does not name: the profile's"
    flat = expected_busbw("all_reduce", 8, 8, Vars({**NDR400_8, "expected_busbw_all_reduce_gbps": 150}))
    assert (flat.expected_gbps, flat.basis) == (150, "set by expected_busbw_all_reduce_gbps")
    with pytest.raises(ConfigError, match="expected_busbw_all_reduce_gbps for host n1 must map node counts"):
        expected_busbw("all_reduce", 2, 2, Vars({"expected_busbw_all_reduce_gbps": "2:fast"}, "n1"))


def test_a_small_expected_figure_keeps_its_decimal() -> None:
    """The lent 4x H200 split into two hosts, 4.5 GB/s expected between them: the verdict said "normal range
    4–5 GB/s (expected ≈ 4 GB/s)"."""
    host_vars = Vars({"expected_busbw_all_reduce_gbps": {2: 4.5}})
    status, message = judge_busbw(
        "all_reduce", 3.3, 512 << 20, 2, expected_busbw("all_reduce", 2, 2, host_vars), "nccl"
    )
    assert status == "FAIL"
    assert message == (
        "all_reduce busbw 3.3 GB/s at 512 MiB on 2 nodes: below the normal range 3.8–5.2 GB/s (expected ≈ 4.5 "
        "GB/s, set by expected_busbw_all_reduce_gbps for 2 nodes)"
    )


def mnnvl_summary(log: str) -> dict:
    return summarize_transport([parse_nccl_log(log)])


def two_trays(domain: int) -> str:
    """The one-tray GB200 log of tests/facts/nccl_log/gb200_mnnvl_one_tray (its format and fabric line) as
    rank 0 of a communicator over two trays: 8 ranks, 2 nodes, ``domain`` GPUs in NCCL's NVLink domain. Composed:
    no published log of a multi-tray communicator names its domain size."""
    log = (FACTS / "nccl_log" / "gb200_mnnvl_one_tray" / "input.log").read_text()
    return (
        log.replace("nvlDomainSize 4", f"nvlDomainSize {domain}")
        .replace("cliqueSize 4", f"cliqueSize {domain}")
        .replace("nRanks 4 nNodes 1", "nRanks 8 nNodes 2")
    )


GB200 = Vars(dict(load_profile("gb200-nvl72").vars))


def test_ranks_in_one_nvlink_domain_are_judged_as_that_domain_not_as_a_fabric() -> None:
    domain = nvlink_domain_of(mnnvl_summary(two_trays(8)), 2, 8)
    assert domain == 8
    expectation = expected_busbw("all_reduce", 2, 4, GB200, domain)
    assert expectation.expected_gbps == 680
    assert expectation.basis == (
        "NVLink domain of 8 GPUs on 2 trays (multi-node NVLink): the profile's nvlink_domain_busbw_gbps = 680 GB/s"
    )
    status, message = judge_busbw("all_reduce", 520.0, 1 << 30, 2, expectation, "nccl")
    assert status == "FAIL" and "below the normal range 578–782 GB/s" in message
    # The same figure judged as a fabric of two nodes: the GB200 profile leaves the fabric to the fleet.
    assert not expected_busbw("all_reduce", 2, 4, GB200).judged


def test_a_fabric_collective_is_not_an_nvlink_domain_one() -> None:
    one_tray = (FACTS / "nccl_log" / "gb200_mnnvl_one_tray" / "input.log").read_text()
    off = (FACTS / "nccl_log" / "gb200_mnnvl_disabled_by_env" / "input.log").read_text()
    assert nvlink_domain_of(mnnvl_summary(one_tray), 1, 4) is None, "one node is the node's own figure"
    assert nvlink_domain_of(mnnvl_summary(off.replace("nNodes 1", "nNodes 2")), 2, 8) is None
    assert nvlink_domain_of(mnnvl_summary(two_trays(72)), 20, 80) is None, "80 ranks span two racks"
    assert nvlink_domain_of(None, 2, 8) is None
    assert nvlink_domain_of(mnnvl_summary(two_trays(72)), 18, 72) == 72


def test_a_profile_without_a_domain_figure_says_so() -> None:
    expectation = expected_busbw("all_reduce", 18, 4, Vars({}), 72)
    assert not expectation.judged
    assert expectation.basis == (
        "NVLink domain of 72 GPUs on 18 trays (multi-node NVLink): the profile sets no nvlink_domain_busbw_gbps"
    )
