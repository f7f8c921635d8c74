"""How long a run will take, estimated from its plan before any host is touched (``diagnose run --check``).

An operator books a maintenance window from this, so each stage gives a *typical* figure, measured on real
runs, and where the run has one an *upper bound* (the command timeouts, a stage's own budget). It is an
estimate, and each stage says what it stands on:

* host stage: hosts in waves of ``--forks``; each host's batch runs its commands one after another, so the
  sum of their timeouts (plus the kill grace) bounds a wave. Typical: 5 s a wave, the host stage of a lent
  2× H200's default run (17 s in all with its sweep).
* collective sweep: one torchrun launch for every collective (diagnose/benchmarks/stage.py), costed by the
  localization's time model (diagnose/localize/timing.py: 10 s a launch, 0.1 s a node) plus, per size,
  warm-up, timed and validation passes moving bytes × the bus factor at the busbw the profile expects
  (``nvlink_busbw_gbps`` on one node, 80 % of ``line_rate_gbps`` × ``expected_hca_count`` between nodes;
  without either 20 GB/s, PCIe, or 1 GB/s, gloo over TCP, on hosts without GPUs). The upper bound is the
  playbook's ``timeout_s`` per size. One host with one GPU (or none) has no pair of ranks: the sweep, the
  training probe and the KV transfer SKIP there, and cost nothing.
* extras after the sweep, from runs on lent GPUs (tests/fixtures/results/): fleet probes 10 s; the
  training probe 12 s per DDP bucket size; KV transfer 30 s; GPU stress 15 s of GEMM, HBM and bitwise
  checks plus ``memtest_seconds`` plus ``burnin_minutes``, and 14 s of launch (H100 stress runs: 120.8 s
  wall for 104.9 s of phases, 115.7 for 103.4); per-NIC perftest by bench/perftest_scale.py's model: a
  first round in which each pair measures every rail both ways and together, ``perftest_duration_s`` +
  0.6 s a step, the later rounds 24 % more, capped by ``perftest_budget_s``.
* localization runs only when a collective is found short on more than two hosts: not in the total; its
  bound is about 2 × log2(nodes) launches of the time model.

Pure: plain values in, :class:`StageEstimate` rows out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from diagnose.config.playbook import BenchmarkPlan, NightlyPlan
from diagnose.core.check import Check
from diagnose.core.hosts import Host
from diagnose.core.units import bus_factor, counted
from diagnose.engine.host_batch import commands_of
from diagnose.localize.timing import TimeModel
from diagnose.probes.perftest_settings import settings_from as perftest_settings
from diagnose.probes.stress import DEFAULT_MEMTEST_S
from diagnose.probes.training import ProbeSettings

#: Typical seconds of one wave of host batches (a lent 2× H200's default run, host stage).
HOST_WAVE_S = 5.0
#: Seconds past a command's timeout the batch lets it be killed in (diagnose/connectors/base.py).
KILL_GRACE_S = 2.0
#: busbw assumed when no profile figure applies: PCIe between GPUs (a Gen4 x16 path's order), or gloo over
#: TCP on the test beds' order of magnitude for hosts without GPUs.
FALLBACK_GPU_BUSBW_GBPS = 20.0
FALLBACK_CPU_BUSBW_GBPS = 1.0
#: Share of the per-node line rate a healthy inter-node all_reduce reaches.
INTER_NODE_SHARE = 0.8
#: Passes of each size beyond warm-up and timed iterations: one untimed, the validation launch's two.
EXTRA_PASSES = 3
#: The extras that need a pair of ranks, as the sweep does.
PAIRED_EXTRAS = ("training probe", "KV transfer")
FLEET_S = 10.0
TRAINING_PHASE_S = 12.0
KV_S = 30.0
#: GPU stress on a lent H100: GEMM, HBM and bitwise phases took 14.8 s, and the launch 15.9 s beyond the
#: phases (120.8 s wall for 104.9 s of phases; 12.3 s in an earlier run).
STRESS_FIXED_S = 15.0
STRESS_LAUNCH_S = 14.0
#: bench/perftest_scale.py's measured per-step overhead; its stage lasted 1.24 × its first round (2.1 and
#: 1.7 min at 5 s a step on 64 and 1,024 hosts × 8 rails), the later rounds being small.
PERFTEST_STEP_S = 0.6
PERFTEST_LATENCY_STEP_S = 0.5
PERFTEST_STAGE_PER_FIRST_ROUND = 1.24


@dataclass(frozen=True)
class StageEstimate:
    """One stage's time: typical seconds, an upper bound where one exists, and what the figures stand on.
    ``counted`` is false for a stage that runs only on a finding (localization)."""

    stage: str
    typical_s: float
    upper_s: float | None
    basis: str
    counted: bool = True


def host_stage(hosts: Sequence[Host], checks: Sequence[Check], forks: int) -> StageEstimate:
    """Waves of ``forks`` hosts; a wave's bound is its slowest host's batch, every command at its timeout."""
    waves = math.ceil(len(hosts) / max(forks, 1)) if hosts else 0
    bound = max(
        (sum(c.timeout + KILL_GRACE_S for c in commands_of(checks, h.vars)) for h in hosts),
        default=0.0,
    )
    return StageEstimate(
        "host stage",
        waves * HOST_WAVE_S,
        waves * bound,
        f"{counted(len(hosts), 'host')} in {counted(waves, 'wave')} of --forks {forks}; bound: every command at its timeout",
    )


def sweep_busbw(first: Host, nodes: int) -> tuple[float, str]:
    """The busbw the sweep's transfer time is costed at, and where it comes from."""
    if first.vars.str("bench_backend") == "gloo":  # the profile's figures are NCCL's
        return FALLBACK_CPU_BUSBW_GBPS, "bench_backend gloo: TCP assumed"
    if nodes > 1:
        rate, hcas = first.vars.float("line_rate_gbps"), first.vars.int("expected_hca_count")
        if rate and hcas:
            return rate * hcas / 8 * INTER_NODE_SHARE, f"{INTER_NODE_SHARE:.0%} of {hcas} × {rate:g} Gb/s"
    else:
        nvlink = first.vars.float("nvlink_busbw_gbps")
        if nvlink:
            return nvlink, "nvlink_busbw_gbps"
    if first.vars.int("expected_gpu_count") == 0:
        return FALLBACK_CPU_BUSBW_GBPS, "no profile figure: gloo over TCP assumed"
    return FALLBACK_GPU_BUSBW_GBPS, "no profile figure: PCIe between GPUs assumed"


def one_rank(hosts: Sequence[Host]) -> str | None:
    """Why the sweep, the training probe and the KV transfer SKIP on these hosts as far as the variables
    tell (one host without GPUs, or one GPU in all: no pair of ranks), or None."""
    if len(hosts) != 1:
        return None
    values = hosts[0].vars
    if values.int("expected_gpu_count") == 0:
        return "one host without GPU: no fabric to measure"
    if (values.int("bench_gpus_per_host") or values.int("expected_gpu_count")) == 1:
        return "one rank in all: no pair of ranks to measure"
    return None


def ranks_per_host(first: Host) -> int:
    """The ranks each host starts: ``bench_gpus_per_host``, else the profile's GPU count, else one."""
    return first.vars.int("bench_gpus_per_host") or first.vars.int("expected_gpu_count") or 1


def sweep(plan: BenchmarkPlan, hosts: Sequence[Host]) -> StageEstimate:
    nodes, model = len(hosts), TimeModel()
    busbw, source = sweep_busbw(hosts[0], nodes)
    ranks = max(nodes * ranks_per_host(hosts[0]), 2)
    passes = plan.warmup_iters + plan.iters + EXTRA_PASSES
    transfer = sum(
        passes * size * bus_factor(c, ranks) / (busbw * 1e9)
        for c in plan.collectives
        for size in plan.sizes()
    )
    typical = model.launch_s + model.per_node_s * nodes + transfer
    upper = (
        model.launch_s + plan.timeout_s * len(plan.sizes()) * len(plan.collectives)
        if plan.timeout_s
        else None
    )
    return StageEstimate(
        "collective sweep",
        typical,
        upper,
        f"one launch ({model.launch_s:g} s + {model.per_node_s:g} s a node) and {passes} passes a size at "
        f"{busbw:g} GB/s busbw ({source})",
    )


def localization(plan: BenchmarkPlan, hosts: Sequence[Host]) -> StageEstimate | None:
    """The search for a slow host or link, when the sweep could trigger it."""
    if not plan.straggler_isolation or len(hosts) <= 2:
        return None
    model = TimeModel()
    busbw, _source = sweep_busbw(hosts[0], len(hosts))
    launches = 2 * math.ceil(math.log2(len(hosts)))
    each = model.launch_seconds(max(len(hosts) // 2, 1), busbw, ranks_per_host(hosts[0]))
    return StageEstimate(
        "localization",
        launches * each,
        None,
        f"only if a collective is short: about {launches} launches of {each:.0f} s (time model)",
        counted=False,
    )


def extras(plan: BenchmarkPlan, hosts: Sequence[Host]) -> list[StageEstimate]:
    """The benchmarks after the sweep that the plan switches on, in the order they run."""
    first = hosts[0]
    rows = []
    if plan.fleet_probes:
        rows.append(StageEstimate("fleet probes", FLEET_S, None, "lent 2× H200 runs, all hosts at once"))
    if plan.training_probe:
        caps = len(ProbeSettings.from_vars(first.vars).bucket_caps)
        rows.append(
            StageEstimate(
                "training probe",
                caps * TRAINING_PHASE_S,
                None,
                f"{counted(caps, 'bucket size')} × {TRAINING_PHASE_S:g} s",
            )
        )
    if plan.kv_transfer:
        rows.append(StageEstimate("KV transfer", KV_S, None, "lent 2× H200 runs"))
    if plan.perftest and len(hosts) > 1:  # one host: the stage SKIPs, it has no partner
        settings = perftest_settings(first.vars)
        rails = first.vars.int("expected_hca_count") or 1
        steps = 2 * rails + 2
        first_round = steps * (settings.duration_s + PERFTEST_STEP_S)
        if plan.perftest_latency:
            first_round += rails * (PERFTEST_LATENCY_STEP_S + PERFTEST_STEP_S)
        typical = min(PERFTEST_STAGE_PER_FIRST_ROUND * first_round, settings.budget_s)
        rows.append(
            StageEstimate(
                "perftest",
                typical,
                settings.budget_s,
                f"a first round of {steps} steps at {settings.duration_s} s + {PERFTEST_STEP_S:g} s, the rest "
                f"{PERFTEST_STAGE_PER_FIRST_ROUND - 1:.0%} more (bench/perftest_scale.py); bound: perftest_budget_s",
            )
        )
    if plan.stress:
        memtest = first.vars.float("memtest_seconds", DEFAULT_MEMTEST_S) or 0.0
        burnin = (first.vars.float("burnin_minutes", 0.0) or 0.0) * 60.0
        rows.append(
            StageEstimate(
                "GPU stress",
                STRESS_LAUNCH_S + STRESS_FIXED_S + memtest + burnin,
                None,
                f"launch and GEMM/HBM/SDC phases (H100 runs) + memtest {memtest:g} s + burn-in {burnin:g} s",
            )
        )
    return rows


def estimate(
    hosts: Sequence[Host],
    checks: Sequence[Check],
    plan: BenchmarkPlan | None,
    forks: int,
    skip_benchmarks: bool = False,
    nightly: NightlyPlan | None = None,
) -> list[StageEstimate]:
    """Every stage the run would go through, in order, each with its estimate."""
    stages = [host_stage(hosts, checks, forks)]
    if plan is not None and plan.enabled and not skip_benchmarks and hosts:
        alone = one_rank(hosts)
        if alone is None:
            stages.append(sweep(plan, hosts))
        found = localization(plan, hosts)
        if found is not None:
            stages.append(found)
        stages += [s for s in extras(plan, hosts) if alone is None or s.stage not in PAIRED_EXTRAS]
    if nightly is not None:
        stages.append(
            StageEstimate(
                "nightly budget", 0.0, nightly.time_budget_s, "time_budget_s stops the run", counted=False
            )
        )
    return stages


def total(stages: Sequence[StageEstimate]) -> tuple[float, float | None]:
    """The typical total of the counted stages, and their summed bound (None when a stage has none)."""
    counted = [s for s in stages if s.counted]
    uppers = [s.upper_s for s in counted]
    upper = None if any(u is None for u in uppers) else sum(u for u in uppers if u is not None)
    return sum(s.typical_s for s in counted), upper
