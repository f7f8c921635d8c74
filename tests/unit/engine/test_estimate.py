"""The duration a dry run announces (diagnose/engine/estimate.py), stage by stage, against the figures it
cites: command timeouts, the localization's time model, bench/perftest_scale.py's table, and whole runs
measured on the build machine, a lent H100 and a lent 4× H200."""

from __future__ import annotations

from typing import Any

import pytest

from diagnose.checks import gpu_dcgm, ib_port_state, net_port_range
from diagnose.config.playbook import BenchmarkPlan, NightlyPlan, load_playbook
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
    stage = host_stage(hosts(70, expected_gpu_count=8), CHECKS, forks=32)
    assert stage.typical_s == 3 * (4.0 + 8 * 2.0)  # 70 hosts in 3 waves, 8 GPUs each
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


DEFAULT_PLAN = load_playbook("acceptance").benchmarks
#: Whole default runs (playbook acceptance), what --check is told of them, and the seconds they took.
REAL_RUNS = [
    # the 2-core build machine without GPUs, profile cpu-testbed: `diagnose run -e burnin_minutes=0`
    ("build machine", dict(expected_gpu_count=0, expected_hca_count=0, burnin_minutes=0), {"html", "json", "pdf"}, 14.4),
    # docs/validation.md: a lent H100 80GB, -e burnin_minutes=1 (its results.json has no PDF: no Pango there)
    ("H100", dict(expected_gpu_count=1, expected_hca_count=0, burnin_minutes=1, memtest_seconds=30), {"html", "json"}, 138.0),
    # tests/fixtures/gpu_runs/h200x4-2026-11-27/healthy_*: single-node-nvlink, --format json,html,junit
    ("4× H200", dict(expected_gpu_count=4, expected_hca_count=0, burnin_minutes=1, memtest_seconds=30,
                     nvlink_busbw_gbps=340), {"html", "json", "junit"}, 227.0),
]  # fmt: skip


@pytest.mark.parametrize(
    ("machine", "values", "formats", "measured_s"), REAL_RUNS, ids=[r[0] for r in REAL_RUNS]
)
def test_the_default_run_is_estimated_within_a_quarter_of_what_it_took(
    machine: str, values: dict[str, Any], formats: set[str], measured_s: float
) -> None:
    assert DEFAULT_PLAN is not None
    stages = estimate(hosts(1, **values), CHECKS, DEFAULT_PLAN, 5, formats=formats)
    typical, _upper = total(stages)
    assert typical == pytest.approx(measured_s, rel=0.25), [(s.stage, s.typical_s) for s in stages]


def test_the_4x_h200_run_is_estimated_stage_by_stage() -> None:
    """The stages of the 4× H200 run as its terminal timed them: host stage 12 s, sweep 12, fleet probes 27,
    training probe 23, KV transfer 34, stress 119."""
    assert DEFAULT_PLAN is not None
    measured = {"host stage": 12, "collective sweep": 12, "fleet probes": 27, "training probe": 23,
                "KV transfer": 34, "GPU stress": 119}  # fmt: skip
    stages = {s.stage: s for s in estimate(hosts(1, **REAL_RUNS[2][1]), CHECKS, DEFAULT_PLAN, 5)}
    for stage, seconds in measured.items():
        assert stages[stage].typical_s == pytest.approx(seconds, rel=0.25), stage


def test_a_cpu_host_is_costed_with_the_stress_caps_it_runs_under() -> None:
    stress = {s.stage: s for s in estimate(hosts(2, expected_gpu_count=0, burnin_minutes=10), CHECKS,
                                           plan(stress=True, fleet_probes=True), 5)}  # fmt: skip
    assert stress["GPU stress"].typical_s == 5 + 1 + 2, "memtest at most 1 s, burn-in at most 2 s on a CPU"
    assert stress["fleet probes"].typical_s == 3
    gloo = estimate(hosts(2, expected_gpu_count=8, bench_backend="gloo"), CHECKS, plan(stress=True), 5)
    assert "on the CPU" in gloo[-1].basis, "gloo ranks run the stress on the CPU, as the run does"


def test_perftest_is_budgeted_only_where_two_hosts_expect_a_fabric() -> None:
    on = plan(perftest=True)
    assert "perftest" not in {s.stage for s in estimate(hosts(4, expected_hca_count=0), CHECKS, on, 5)}
    assert "perftest" not in {s.stage for s in estimate(hosts(4), CHECKS, on, 5)}, (
        "no profile: nothing expected"
    )
    fabric = [Host(name=f"f{i}", vars=Vars({"expected_hca_count": 4}, host=f"f{i}")) for i in (1, 2)]
    mixed = [*hosts(3, expected_hca_count=0), fabric[0]]
    assert "perftest" not in {s.stage for s in estimate(mixed, CHECKS, on, 5)}, (
        "one host alone has no partner"
    )
    two = [*mixed, fabric[1]]
    assert (
        "2 hosts expecting a fabric" in {s.stage: s for s in estimate(two, CHECKS, on, 5)}["perftest"].basis
    )


def test_every_basis_says_what_it_stands_on_in_the_operator_s_words() -> None:
    every = plan(fleet_probes=True, training_probe=True, kv_transfer=True, perftest=True, stress=True)
    for values in ({}, {"expected_gpu_count": 0}, {"expected_gpu_count": 4, "expected_hca_count": 8}):
        for stage in estimate(hosts(4, **values), CHECKS, every, 5, formats={"html", "pdf"}):
            assert "lent" not in stage.basis and "None" not in stage.basis, stage
    opened = estimate(hosts(1), CHECKS, plan(fleet_probes=True), 5)
    assert "GPU count open: 8 assumed" in opened[0].basis


def test_dcgm_diagnostics_are_in_the_host_stage_they_hold_up() -> None:
    """The acceptance playbook's dcgm_diag_level 3 keeps every GPU host's batch for about 15 minutes (DCGM's
    guide); the host stage read ~20 s for an 8-GPU node before, and a window booked on it was short."""
    checks = [*CHECKS, gpu_dcgm.CHECK]
    level3 = host_stage(hosts(2, expected_gpu_count=8, dcgm_diag_level=3), checks, 32)
    assert level3.typical_s == pytest.approx(4 + 2 * 8 + 15 * 60)
    assert "DCGM level 3 15 min 00 s where installed (dcgm_diag_level; DCGM's guide)" in level3.basis
    level1 = host_stage(hosts(2, expected_gpu_count=8, dcgm_diag_level=1), checks, 32)
    assert level1.typical_s == pytest.approx(20 + 30)
    # A budget below the level's length ends dcgmi there: the run cannot take longer than that.
    capped = host_stage(
        hosts(2, expected_gpu_count=8, dcgm_diag_level=3, dcgm_diag_timeout_s=300), checks, 32
    )
    assert capped.typical_s == pytest.approx(20 + 300)
    # Off, not selected, or on hosts without GPUs (gpu.dcgm SKIPs there): nothing added.
    for values, selected in (({"expected_gpu_count": 8}, checks), ({"dcgm_diag_level": 3, "expected_gpu_count": 8}, CHECKS),
                             ({"dcgm_diag_level": 3, "expected_gpu_count": 0}, checks)):  # fmt: skip
        stage = host_stage(hosts(2, **values), selected, 32)
        assert "DCGM" not in stage.basis and stage.typical_s < 21, (values, stage)
