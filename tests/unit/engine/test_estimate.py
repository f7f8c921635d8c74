"""The duration a dry run announces (diagnose/engine/estimate.py), stage by stage, against the figures it
cites: command timeouts, the localization's time model, bench/perftest_scale.py's table, the H100 stress runs."""

from __future__ import annotations

from typing import Any

import pytest

from diagnose.checks import ib_port_state, net_port_range
from diagnose.config.playbook import BenchmarkPlan, NightlyPlan
from diagnose.core.hosts import Host
from diagnose.core.vars import Vars
from diagnose.engine.estimate import KILL_GRACE_S, estimate, host_stage, sweep, total

CHECKS = [ib_port_state.CHECK, net_port_range.CHECK]  # ibstat 15 s, the port range 20 s


def hosts(count: int, **values: Any) -> list[Host]:
    return [Host(name=f"n{i}", vars=Vars(values, host=f"n{i}")) for i in range(1, count + 1)]


def plan(**changes: Any) -> BenchmarkPlan:
    base: dict[str, Any] = dict(
        enabled=True, workload="dense", collectives=("all_reduce",), min_bytes=1 << 20, max_bytes=1 << 30,
        step_factor=2, warmup_iters=5, iters=20, tool="torch", straggler_isolation=True, timeout_s=None,
    )  # fmt: skip
    return BenchmarkPlan(**{**base, **changes})


def test_host_stage_waves_of_forks_bounded_by_every_command_at_its_timeout() -> None:
    stage = host_stage(hosts(70), CHECKS, forks=32)
    assert stage.typical_s == 3 * 5.0  # 70 hosts in 3 waves
    assert stage.upper_s == pytest.approx(3 * (15 + 20 + 2 * KILL_GRACE_S))


def test_the_sweep_is_costed_at_the_profile_busbw_and_grows_with_the_sizes() -> None:
    fabric = hosts(16, line_rate_gbps=400, expected_hca_count=8, expected_gpu_count=8)
    small = sweep(plan(max_bytes=1 << 24), fabric)
    large = sweep(plan(max_bytes=8 << 30), fabric)
    assert "320 GB/s busbw (80% of 8 × 400 Gb/s)" in large.basis
    assert 10 < small.typical_s < large.typical_s
    # the sizes above 16 MiB (32 MiB .. 8 GiB, about 16 GiB), 28 passes each at 320 GB/s and all_reduce's
    # 2(n-1)/n over 128 ranks: about 3 s
    added = sum(1 << e for e in range(25, 34))
    assert large.typical_s - small.typical_s == pytest.approx(28 * 2 * 127 / 128 * added / 320e9)
    slow = sweep(plan(), hosts(2, expected_gpu_count=0))
    assert "gloo over TCP assumed" in slow.basis  # 1 MiB .. 1 GiB (2 GiB) × 28 passes at 1 GB/s, 2 ranks
    assert slow.typical_s == pytest.approx(10 + 0.2 + 28 * sum(1 << e for e in range(20, 31)) / 1e9)
    assert sweep(plan(timeout_s=60), fabric).upper_s == 10 + 60 * 11
    gloo = hosts(16, line_rate_gbps=400, expected_hca_count=8, bench_backend="gloo")
    assert "1 GB/s busbw (bench_backend gloo" in sweep(plan(), gloo).basis, "the profile's figures are NCCL's"


def test_perftest_matches_the_scale_bench_and_stress_adds_its_minutes() -> None:
    fabric = hosts(64, expected_hca_count=8, memtest_seconds=30, burnin_minutes=10)
    stages = {s.stage: s for s in estimate(fabric, CHECKS, plan(perftest=True, stress=True), 32)}
    assert stages["perftest"].typical_s / 60 == pytest.approx(
        2.1, abs=0.1
    )  # docs/benchmarks.md: 2.1 min, 64 × 8 rails
    assert stages["perftest"].upper_s == 1200
    assert stages["GPU stress"].typical_s == pytest.approx(14 + 15 + 30 + 600)
    single = {s.stage for s in estimate(hosts(1), CHECKS, plan(perftest=True), 32)}
    assert "perftest" not in single, "one host: the stage SKIPs"


def test_stages_in_run_order_localization_outside_the_total() -> None:
    every = plan(fleet_probes=True, training_probe=True, kv_transfer=True, perftest=True, stress=True)
    stages = estimate(
        hosts(8, expected_hca_count=8), CHECKS, every, 32, nightly=NightlyPlan(3600, None, None, 10)
    )
    assert [s.stage for s in stages] == [
        "host stage", "collective sweep", "localization", "fleet probes", "training probe", "KV transfer",
        "perftest", "GPU stress", "nightly budget",
    ]  # fmt: skip
    typical, upper = total(stages)
    assert typical == pytest.approx(
        sum(s.typical_s for s in stages if s.stage not in ("localization", "nightly budget"))
    )
    assert upper is None, "the extras have hang budgets, not a bound"
    assert [s.stage for s in estimate(hosts(8), CHECKS, every, 32, skip_benchmarks=True)] == ["host stage"]
    bounded = estimate(hosts(2), CHECKS, plan(timeout_s=30, straggler_isolation=False), 32)
    assert total(bounded)[1] == pytest.approx(35 + 2 * KILL_GRACE_S + 10 + 30 * 11)


def test_one_rank_skips_the_sweep_and_the_paired_extras_as_the_run_does() -> None:
    every = plan(fleet_probes=True, training_probe=True, kv_transfer=True, stress=True)
    one_gpu = [s.stage for s in estimate(hosts(1, expected_gpu_count=1), CHECKS, every, 32)]
    assert one_gpu == ["host stage", "fleet probes", "GPU stress"]
    two_gpus = [s.stage for s in estimate(hosts(1, expected_gpu_count=2), CHECKS, every, 32)]
    assert "collective sweep" in two_gpus and "KV transfer" in two_gpus
