"""How long a run will take, estimated from its plan before any host is touched (``diagnose run --check``).

An operator books a maintenance window from this, so each stage gives a *typical* figure, measured on real
runs, and where the run has one an *upper bound* (the command timeouts, a stage's own budget). It is an
estimate, and each stage says what it stands on. The figures come from three real runs, and
tests/unit/engine/test_estimate.py holds the estimate within 25 % of each: the default run on the 2-core
build machine without GPUs (14.4 s), a lent H100 80GB's (138 s) and a lent 4× H200's (227 s: host stage
12 s, sweep 12, fleet probes 27, training probe 23, KV transfer 34, stress 119;
tests/fixtures/gpu_runs/h200x4-2026-11-27/).

* What scales with a host's GPUs scales with ``bench_gpus_per_host`` or ``expected_gpu_count``; a profile
  that leaves the count open is costed at a full node of 8, and the row says so. Hosts without GPUs
  (``expected_gpu_count`` 0) or told ``bench_backend: gloo`` run the stress on the CPU, as the run does.
* host stage: hosts in waves of ``--forks``; each host's batch runs its commands one after another, so the
  sum of their timeouts (plus the kill grace) bounds a wave. Typical: 2 s a wave without GPUs, 4 s + 2 s a
  GPU with them (nvidia-smi and DCGM queries per GPU; 5.3 s on one H100, 12 s on four H200).
* collective sweep: one torchrun launch for every collective (diagnose/benchmarks/stage.py), costed by the
  localization's time model (diagnose/localize/timing.py: 10 s a launch, 0.1 s a node) plus, per size,
  warm-up, timed and validation passes moving bytes × the bus factor at the busbw the profile expects
  (``nvlink_busbw_gbps`` on one node, 80 % of ``line_rate_gbps`` × ``expected_hca_count`` between nodes;
  without either 20 GB/s, PCIe, or 1 GB/s, gloo over TCP, on hosts without GPUs). The upper bound is the
  playbook's ``timeout_s`` per size. One host with one GPU (or none) has no pair of ranks: the sweep, the
  training probe and the KV transfer SKIP there, and cost nothing.
* fleet probes: 6 s + 5 s a GPU (peer copies grow with the GPUs: 11 s on one H100, 27 s on four H200), 3 s
  on a host without GPUs (one memory copy).
* training probe: 6 s a bucket size for each rank on a host, as the ranks of a host start and compile
  together (12 s with 2 ranks, 23 s with 4).
* KV transfer: 26 s + 2 s a rank on a host (30 s with 2 ranks, 34 s with 4).
* GPU stress: the memory test and burn-in of diagnose/probes/stress.py ``durations`` (on CPU hosts at most
  1 s and 2 s), plus on GPUs 15 s of GEMM, HBM and bitwise phases and 14 s of launch (120.8 s on an H100,
  118.7 s on four H200 with 30 s + 60 s), on CPU hosts 5 s for all of it (6.1 s with its 1 s memory test).
* perftest, per NIC, only where at least two hosts expect a fabric (``expected_hca_count`` above 0), by
  bench/perftest_scale.py's model: a first round in which each pair measures every rail both ways and
  together, ``perftest_duration_s`` + 0.6 s a step, the later rounds 24 % more, capped by
  ``perftest_budget_s``.
* reports: 1 s for JSON, HTML, JUnit and Prometheus, 3 s more for the PDF (CPU time of WeasyPrint on the
  build machine).
* localization runs only when a collective is found short on more than two hosts: not in the total; its
  bound is about 2 × log2(nodes) launches of the time model.

Pure: plain values in, :class:`StageEstimate` rows out.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from diagnose.checks import gpu_dcgm
from diagnose.config.playbook import BenchmarkPlan, NightlyPlan
from diagnose.config.profiles import fabric_expected
from diagnose.core.check import Check
from diagnose.core.hosts import Host
from diagnose.core.units import bus_factor, counted, duration
from diagnose.engine.host_batch import commands_of
from diagnose.localize.timing import TimeModel
from diagnose.probes.perftest_settings import settings_from as perftest_settings
from diagnose.probes.stress import durations
from diagnose.probes.training import ProbeSettings

#: Typical seconds of one wave of host batches: without GPUs (the build machine: 2 s), and with them a base
#: and a share per GPU (one H100: 5.3 s; four H200: 12 s).
HOST_WAVE_CPU_S = 2.0
HOST_WAVE_S = 4.0
HOST_WAVE_PER_GPU_S = 2.0
#: What each DCGM diagnostic level takes on a node, by DCGM's guide (dcgmi-diag: level 1 "seconds", level 2
#: about two minutes, level 3 about 15 minutes, level 4 longer still; gpu.dcgm's budgets are about twice these).
DCGM_TYPICAL_S = {1: 30.0, 2: 120.0, 3: 900.0, 4: 3600.0}
#: GPUs assumed where the profile leaves the count open: a full node, so that a window booked is not short.
ASSUMED_GPUS = 8
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
#: Fleet probes: a base and a share per GPU (11 s on one H100, 27 s on four H200); one memory copy on a CPU.
FLEET_S = 6.0
FLEET_PER_GPU_S = 5.0
FLEET_CPU_S = 3.0
#: Training probe, per bucket size and rank on a host (12 s with 2 ranks of a 2× H200, 23 s with 4).
TRAINING_PER_RANK_S = 6.0
#: KV transfer: a base and a share per rank on a host (30 s with 2 ranks, 34 s with 4).
KV_S = 26.0
KV_PER_RANK_S = 2.0
#: GPU stress on GPUs: GEMM, HBM and bitwise phases 15 s, launch 14 s beyond the phases (H100: 120.8 s wall
#: for 104.9 s of phases; four H200: 118.7 s with a 30 s memory test and 60 s of burn-in). On a CPU host all
#: but the memory test and burn-in took 5 s (6.1 s wall with a 1 s memory test).
STRESS_FIXED_S = 15.0
STRESS_LAUNCH_S = 14.0
STRESS_CPU_S = 5.0
#: Reports: JSON, HTML, JUnit, Prometheus together, and the PDF's own (WeasyPrint's CPU time).
REPORTS_S = 1.0
PDF_S = 3.0
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


def gpus_per_host(first: Host) -> tuple[int, str]:
    """The GPUs a host brings to what scales with them, and how that was read: 0 on hosts without GPUs,
    ``bench_gpus_per_host`` or ``expected_gpu_count``, else :data:`ASSUMED_GPUS`."""
    count = first.vars.int("bench_gpus_per_host") or first.vars.int("expected_gpu_count")
    if first.vars.int("expected_gpu_count") == 0:
        return 0, "no GPU"
    if count:
        return count, counted(count, "GPU")
    return ASSUMED_GPUS, f"GPU count open: {ASSUMED_GPUS} assumed"


def on_cpu(first: Host) -> bool:
    """Whether the stress runs on the CPU, as diagnose/probes/stress.py decides: gloo ranks, no GPUs."""
    return first.vars.str("bench_backend") == "gloo" or first.vars.int("expected_gpu_count") == 0


def host_stage(hosts: Sequence[Host], checks: Sequence[Check], forks: int) -> StageEstimate:
    """Waves of ``forks`` hosts; a wave's bound is its slowest host's batch, every command at its timeout."""
    waves = math.ceil(len(hosts) / max(forks, 1)) if hosts else 0
    bound = max(
        (sum(c.timeout + KILL_GRACE_S for c in commands_of(checks, h.vars)) for h in hosts),
        default=0.0,
    )
    gpus, read = gpus_per_host(hosts[0]) if hosts else (0, "no GPU")
    wave = HOST_WAVE_S + HOST_WAVE_PER_GPU_S * gpus if gpus else HOST_WAVE_CPU_S
    dcgm, dcgm_read = dcgm_s(hosts[0], checks) if hosts and gpus else (0.0, "")
    return StageEstimate(
        "host stage",
        waves * (wave + dcgm),
        waves * bound,
        f"{counted(len(hosts), 'host')} in {counted(waves, 'wave')} of --forks {forks}, {wave:g} s a wave "
        f"({read}){dcgm_read}; bound: every command at its timeout",
    )


def dcgm_s(first: Host, checks: Sequence[Check]) -> tuple[float, str]:
    """DCGM's diagnostics, which the host stage waits for: at level 3 they are most of an acceptance's host
    stage, so a window booked without them would be short. A budget set below the level's length ends it
    there, so the smaller of the two counts."""
    level = gpu_dcgm.level_of(first.vars)
    if not level or not any(c.id == gpu_dcgm.CHECK.id for c in checks):
        return 0.0, ""
    typical = min(DCGM_TYPICAL_S[level], gpu_dcgm.budget_of(first.vars, level))
    return (
        typical,
        f" + DCGM level {level} {duration(typical)} where installed (dcgm_diag_level; DCGM's guide)",
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


def fleet(first: Host) -> StageEstimate:
    """The fleet probes: every host at once, peer copies growing with its GPUs."""
    gpus, read = gpus_per_host(first)
    if not gpus:
        return StageEstimate("fleet probes", FLEET_CPU_S, None, "all hosts at once; one memory copy (no GPU)")
    return StageEstimate(
        "fleet probes",
        FLEET_S + FLEET_PER_GPU_S * gpus,
        None,
        f"all hosts at once; {FLEET_S:g} s + {FLEET_PER_GPU_S:g} s a GPU ({read})",
    )


def perftest(plan: BenchmarkPlan, hosts: Sequence[Host]) -> StageEstimate | None:
    """Per-NIC perftest, where at least two hosts expect a fabric (one alone has no partner)."""
    fabric = [h for h in hosts if fabric_expected(h.vars)]
    if len(fabric) < 2:
        return None
    settings = perftest_settings(fabric[0].vars)
    rails = fabric[0].vars.int("expected_hca_count") or 1
    steps = 2 * rails + 2
    first_round = steps * (settings.duration_s + PERFTEST_STEP_S)
    if plan.perftest_latency:
        first_round += rails * (PERFTEST_LATENCY_STEP_S + PERFTEST_STEP_S)
    return StageEstimate(
        "perftest",
        min(PERFTEST_STAGE_PER_FIRST_ROUND * first_round, settings.budget_s),
        settings.budget_s,
        f"{counted(len(fabric), 'host')} expecting a fabric; a first round of {steps} steps at "
        f"{settings.duration_s:g} s + {PERFTEST_STEP_S:g} s, the rest {PERFTEST_STAGE_PER_FIRST_ROUND - 1:.0%} "
        "more (bench/perftest_scale.py); bound: perftest_budget_s",
    )


def stress(first: Host) -> StageEstimate:
    """GPU stress: its fixed phases and launch, plus the memory test and burn-in the run will ask for."""
    cpu = on_cpu(first)
    memtest, burnin = durations(first, "cpu" if cpu else "cuda")
    fixed = STRESS_CPU_S if cpu else STRESS_LAUNCH_S + STRESS_FIXED_S
    where = "on the CPU, memory test and burn-in capped" if cpu else "on the GPUs"
    return StageEstimate(
        "GPU stress",
        fixed + memtest + burnin,
        None,
        f"{where}: launch and GEMM/HBM/SDC phases {fixed:g} s + memtest {memtest:g} s + burn-in {burnin:g} s",
    )


def extras(plan: BenchmarkPlan, hosts: Sequence[Host]) -> list[StageEstimate]:
    """The benchmarks after the sweep that the plan switches on, in the order they run."""
    first = hosts[0]
    rows = []
    if plan.fleet_probes:
        rows.append(fleet(first))
    ranks = max(gpus_per_host(first)[0] or ranks_per_host(first), 2)
    if plan.training_probe:
        caps = len(ProbeSettings.from_vars(first.vars).bucket_caps)
        rows.append(
            StageEstimate(
                "training probe",
                caps * ranks * TRAINING_PER_RANK_S,
                None,
                f"{counted(caps, 'bucket size')} × {counted(ranks, 'rank')} a host × {TRAINING_PER_RANK_S:g} s",
            )
        )
    if plan.kv_transfer:
        rows.append(
            StageEstimate(
                "KV transfer",
                KV_S + KV_PER_RANK_S * ranks,
                None,
                f"{KV_S:g} s + {KV_PER_RANK_S:g} s × {counted(ranks, 'rank')} a host",
            )
        )
    found = perftest(plan, hosts) if plan.perftest else None
    if found is not None:
        rows.append(found)
    if plan.stress:
        rows.append(stress(first))
    return rows


def reports(formats: Collection[str]) -> StageEstimate | None:
    """Writing the reports asked for; the PDF's layout takes the most."""
    if not formats:
        return None
    pdf = PDF_S if "pdf" in formats else 0.0
    return StageEstimate(
        "reports",
        REPORTS_S + pdf,
        None,
        f"{', '.join(sorted(formats))}: {REPORTS_S:g} s" + (f", the PDF {PDF_S:g} s more" if pdf else ""),
    )


def estimate(
    hosts: Sequence[Host],
    checks: Sequence[Check],
    plan: BenchmarkPlan | None,
    forks: int,
    skip_benchmarks: bool = False,
    nightly: NightlyPlan | None = None,
    formats: Collection[str] = (),
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
    written = reports(formats)
    if written is not None:
        stages.append(written)
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
