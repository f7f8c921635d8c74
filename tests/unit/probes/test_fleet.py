"""Hosts against their peers (diagnose.probes.fleet_judge): median, MAD, robust z, odd hosts, fleet-wide shortfalls.

Figures are built around what the lent H200 machine measured (tests/fixtures/captured/fleet_probe: pinned
host→device copies 55.4 GB/s per GPU on PCIe Gen5 x16, the 10 samples of one figure within 0.4 % of each
other), with a fixed pseudo-random spread per fleet so every case is the same on every run.
"""

from __future__ import annotations

import random

import pytest

from diagnose.probes import fleet_judge as fleet

H2D = 55.4  # GB/s, h200x2_256mib.jsonl


def spread_fleet(count: int, centre: float, spread_pct: float, seed: int) -> dict[str, float]:
    """``count`` hosts within ± ``spread_pct`` % of ``centre``."""
    rng = random.Random(seed)
    return {
        f"node{i:02d}": centre * (1 + rng.uniform(-spread_pct, spread_pct) / 100) for i in range(1, count + 1)
    }


def test_uniform_fleet_accuses_nobody_not_even_half_a_percent_off() -> None:
    values = dict.fromkeys((f"node{i:02d}" for i in range(1, 16)), H2D)
    values["node16"] = H2D * 0.995
    verdict = fleet.judge("h2d", values, floor=40.0)
    assert verdict.mad == 0.0 and verdict.mad_used == pytest.approx(0.005 * H2D)
    assert verdict.odd == [] and verdict.flagged() == []
    low = next(h for h in verdict.hosts if h.host == "node16")
    assert low.robust_z == pytest.approx(fleet.Z_SCALE * (-0.005 * H2D) / (0.005 * H2D), abs=0.01)
    assert verdict.status == "PASS" and "0 odd hosts" in verdict.message
    assert "clears the profile floor 40.0 GB/s" in verdict.message


def test_one_host_eight_percent_low_among_sixteen_above_the_floor_is_named() -> None:
    values = spread_fleet(16, H2D, 0.4, seed=1)
    values["node07"] = H2D * 0.92
    floor = 40.0
    assert all(v > floor for v in values.values()), "every host clears the fixed floor"
    verdict = fleet.judge("h2d", values, floor=floor)
    assert [h.host for h in verdict.odd] == ["node07"]
    (named,) = verdict.flagged()
    assert named.host == "node07" and named.status == "FAIL" and not named.below_floor
    assert named.deviation_pct == pytest.approx(-8.0, abs=0.5)
    assert named.robust_z < -fleet.DEFAULT_MAD_K
    assert verdict.status == "PASS", "the fleet as a whole is fine: the odd host has its own verdict"
    assert "1 odd host (node07 -8." in verdict.message


def test_fleet_wide_shortfall_is_one_cluster_finding_not_sixteen_host_failures() -> None:
    # A profile written for Gen5 judging a Gen4 fleet: every host at ~26 GB/s against a 40 GB/s floor.
    values = spread_fleet(16, 26.0, 0.5, seed=2)
    verdict = fleet.judge("h2d", values, floor=40.0)
    assert verdict.shortfall and verdict.status == "FAIL"
    assert verdict.flagged() == [], "no host is blamed for what every host shares"
    assert "cluster-wide shortfall" in verdict.message and "16 of 16 hosts below it" in verdict.message


def test_an_odd_host_in_a_short_fleet_is_still_named() -> None:
    values = spread_fleet(16, 26.0, 0.5, seed=3)
    values["node03"] = 13.0  # and one of them also trained at x8
    verdict = fleet.judge("h2d", values, floor=40.0)
    assert verdict.status == "FAIL" and verdict.shortfall
    assert [(h.host, h.status) for h in verdict.flagged()] == [("node03", "FAIL")]


def test_noisy_fleet_does_not_accuse_its_noise_but_names_a_real_outlier() -> None:
    values = spread_fleet(24, 300.0, 12.0, seed=4)  # busbw of a noisy shared cluster
    values["node05"] = 300.0 * 0.86  # inside the noise
    verdict = fleet.judge("busbw.all_reduce", values)
    assert verdict.mad is not None and verdict.mad > 0.04 * 300.0
    assert verdict.odd == []
    values["node06"] = 300.0 * 0.55
    verdict = fleet.judge("busbw.all_reduce", values)
    assert [h.host for h in verdict.odd] == ["node06"]
    assert "no floor" in verdict.message


def test_min_rel_dev_keeps_a_quiet_fleet_from_accusing_a_small_gap() -> None:
    values = spread_fleet(16, 388.0, 0.2, seed=5)  # peer copies: very uniform
    values["node11"] = 388.0 * 0.97
    assert fleet.judge("peer", values).odd == [], "3 % is below fleet_min_rel_dev_pct (5 %)"
    strict = fleet.Thresholds(mad_k=3.5, min_rel_dev_pct=1.0)
    assert [h.host for h in fleet.judge("peer", values, thresholds=strict).odd] == ["node11"]


def test_faster_than_the_fleet_is_never_odd() -> None:
    values = spread_fleet(8, H2D, 0.3, seed=6)
    values["node02"] = H2D * 1.4
    assert fleet.judge("h2d", values).flagged() == []


def test_below_the_floor_but_within_the_spread_is_a_warning() -> None:
    values = spread_fleet(16, 41.0, 1.0, seed=7)
    values["node09"] = 39.5
    verdict = fleet.judge("h2d", values, floor=40.0)
    assert not verdict.shortfall
    (host,) = verdict.flagged()
    assert host.host == "node09" and host.status == "WARN" and not host.odd
    assert "floor may be tight" in host.why


def test_two_hosts_cannot_say_which_one_is_odd() -> None:
    verdict = fleet.judge("h2d", {"node1": H2D, "node2": H2D * 0.8}, floor=40.0)
    assert verdict.weak and verdict.odd == [] and verdict.flagged() == []
    assert verdict.status == "WARN"
    assert "two hosts cannot say which one is odd: node2 is 20.0 % below node1" in verdict.message
    close = fleet.judge("h2d", {"node1": H2D, "node2": H2D * 0.99})
    assert close.status == "PASS"
    # Jitter a healthy pair shows from run to run (host copies swing by ±10 %) is no warning.
    jitter = fleet.judge("memcpy", {"node1": 80.0, "node2": 72.0})
    assert jitter.status == "PASS" and "node2 is 10.0 % below node1" in jitter.message


def test_three_hosts_name_an_odd_one_as_a_weak_warning() -> None:
    verdict = fleet.judge("h2d", {"a": 55.4, "b": 55.1, "c": 30.0})
    (host,) = verdict.flagged()
    assert host.host == "c" and host.status == "WARN" and "weak verdict" in host.why
    assert "weak verdict: fewer than 4 hosts" in verdict.message


def test_one_host_is_no_fleet() -> None:
    verdict = fleet.judge("h2d", {"node1": H2D})
    assert verdict.status == "SKIP" and verdict.hosts == ()
    assert "fewer than two hosts" in verdict.message and "node1 55.4 GB/s" in verdict.message


def test_robust_statistics_by_hand() -> None:
    values = [10.0, 11.0, 12.0, 13.0, 50.0]
    centre = fleet.median(values)
    assert centre == 12.0
    assert fleet.mad(values, centre) == 1.0  # |dev| = 2, 1, 0, 1, 38
    assert fleet.robust_z(10.0, centre, 1.0) == pytest.approx(-1.349)
