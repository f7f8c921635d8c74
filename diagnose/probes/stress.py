"""GPU stress: every GPU of every host under load at once — GEMM, HBM, memory test, bitwise agreement, burn-in.

An extra of the benchmark stage (``benchmarks.stress: true``, :mod:`diagnose.probes.registry`). Each host
runs :mod:`diagnose.shipped.stress` in a single-node torchrun launch of its own (one rank per GPU), all
hosts at the same time, so the stage takes as long as one host; the launch is followed, stopped on
success, failure, hang or timeout, and on Ctrl-C like every launch (:mod:`diagnose.launchers.base`).
The figures are read by :mod:`diagnose.probes.stress_figures` and judged by
:mod:`diagnose.probes.stress_judge` (gpu.gemm, gpu.hbm, gpu.memtest, gpu.sdc) and
:mod:`diagnose.probes.stress_burnin` (gpu.burnin); this module measures and emits: one check per host and
id (plus a cluster-wide gpu.sdc line across hosts), and results.json ``stress`` records — per GPU and
metric, and per host a ``stage`` record with each phase's seconds.

Variables (per host): ``burnin_minutes`` (0: no burn-in; the acceptance playbooks set 10),
``memtest_seconds`` (pattern passes, default 30), the tolerances ``gemm_max_below_ref_pct`` and
``hbm_max_below_ref_pct`` under the measured references of :mod:`diagnose.probes.stress_skus` (and their
overrides ``gpu_ref_*``, :mod:`diagnose.probes.stress_floor`), ``memtest_min_fraction`` and
``burnin_max_drop_pct``. A host the host stage found sharing its GPUs
with foreign compute processes (gpu.processes) is still measured; every verdict and record says so.

On hosts without GPU (gloo) the program runs on torch CPU with small sizes, at most
:data:`CPU_MEMTEST_S` of memory test and :data:`CPU_BURNIN_S` of burn-in, and every verdict is a SKIP
with its numbers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from diagnose.benchmarks.setup import Setup, startup_timeout_s
from diagnose.benchmarks.shared_gpu import shared_hosts
from diagnose.catalog.stage_ids import GPU_GEMM, GPU_HBM, STRESS, STRESS_NO_TORCH
from diagnose.config.host_settings import parse_bench_env
from diagnose.core.hosts import Host
from diagnose.core.model import SEVERITY, CheckResult
from diagnose.launchers.base import LaunchSpec, launch_in_parallel
from diagnose.launchers.torchrun import launch
from diagnose.probes import stress_burnin, stress_judge, stress_sdc
from diagnose.probes.stress_figures import HostStress, describe_process, host_stress
from diagnose.shipped import stress as program

SECTION = "stress"
DEFAULT_MEMTEST_S = 30.0
CPU_MEMTEST_S = 1.0
CPU_BURNIN_S = 2.0
#: Seconds a phase row may take beyond its own length before the program counts as hung: a GPU phase
#: takes seconds; a CPU test host shares two cores with everything else.
ROW_SLACK_S = {"cuda": 120.0, "cpu": 600.0}
#: How the launch "ended" on a host whose Python cannot import torch: it was never started.
NO_TORCH = STRESS_NO_TORCH


def row_budget(device: str, memtest_s: float) -> Callable[[str, int], float]:
    """Seconds the next row may take: its own length (memory test, a burn-in minute) plus the slack."""
    slack = ROW_SLACK_S[device]

    def budget(phase: str, _minute: int) -> float:
        if phase == "memtest":
            return memtest_s + slack
        return (program.BURNIN_CHUNK_S if phase == "burnin" else 0.0) + slack

    return budget


def durations(host: Host, device: str) -> tuple[float, float]:
    """(memory test seconds, burn-in seconds) for this host; a CPU host's are capped."""
    memtest = host.vars.float("memtest_seconds", DEFAULT_MEMTEST_S) or 0.0
    burnin = (host.vars.float("burnin_minutes", 0.0) or 0.0) * 60.0
    if device == "cpu":
        return min(memtest, CPU_MEMTEST_S), min(burnin, CPU_BURNIN_S)
    return memtest, burnin


class Stress:
    """The stress program on every host at once, then the verdicts."""

    def __init__(self, stage: Any, setup: Setup) -> None:
        self.stage = stage
        self.ctx = stage.ctx
        self.setup = setup
        self.device = "cuda" if setup.backend == "nccl" else "cpu"

    def spec(self, index: int, host: Host) -> LaunchSpec:
        memtest_s, burnin_s = durations(host, self.device)
        phases = [p for p in program.PHASES if p != "burnin" or burnin_s > 0]
        args = ["--device", self.device, "--phases", ",".join(phases)]
        args += ["--memtest-s", f"{memtest_s:g}", "--burnin-s", f"{burnin_s:g}"]
        return LaunchSpec(
            run_id=self.ctx.run_id,
            tag=f"stress-{index}",
            hosts=[host],
            connections=self.ctx.connections,
            nproc=self.setup.nproc,
            backend=self.setup.backend,
            program_args=args,
            expected_rows=program.expected_rows(phases, burnin_s),
            row_budget_s=row_budget(self.device, memtest_s),
            out_dir=self.ctx.out_dir,
            startup_timeout_s=startup_timeout_s(self.stage.first),
            deadline=self.ctx.deadline,
            host_env={host.name: parse_bench_env(host.vars.get("bench_env"))},
            program=Path(program.__file__),
            told=self.ctx.told,
            planned_s={"memtest": memtest_s or None, "burnin": burnin_s or None}.get,
        )

    def measure(self, index: int, host: Host) -> tuple[HostStress, float]:
        """One host's launch, read into figures; and its wall time."""
        # On a CPU host the stress programs only show they run: nothing of theirs is judged (durations()).
        missing = self.stage.torch_missing([host], judged=self.device == "cuda")
        if missing is not None:
            return HostStress(host.name, device=self.device, status=NO_TORCH, message=missing), 0.0
        deadline = self.ctx.deadline
        if deadline is not None and time.monotonic() > deadline:
            message = "the run's time budget ran out before the GPU stress"
            return HostStress(host.name, device=self.device, status="failed", message=message), 0.0
        began = time.monotonic()
        outcome = launch(self.spec(index, host))
        figures = host_stress(
            host.name,
            outcome.start,
            outcome.rows,
            outcome.status,
            outcome.message,
            outcome.in_progress[0] if outcome.in_progress else None,
        )
        if not figures.phases:  # the program never said what it would run: every phase was asked for
            figures.phases = list(program.PHASES)
        figures.evidence = outcome.evidence.get(f"{host.name}:out.txt")
        processes = shared_hosts(self.ctx.facts).get(host.name, [])
        figures.foreign = [describe_process(p) for p in processes if isinstance(p, Mapping)]
        return figures, time.monotonic() - began

    def run(self) -> None:
        hosts = list(self.setup.hosts)
        measured = launch_in_parallel(lambda pair: self.measure(*pair), list(enumerate(hosts)), 256)
        figures = [f for f, _ in measured]
        for host, (item, wall) in zip(hosts, measured, strict=True):
            self.ctx.emit_record(SECTION, stage_record(item, wall, durations(host, self.device)))
        for judgement in judge_all(figures, {h.name: h for h in hosts}):
            for record in judgement.records:
                self.ctx.emit_record(SECTION, record)
            for check in sorted(judgement.checks, key=lambda c: (c.host is None, -SEVERITY[c.status])):
                self.ctx.emit_check(with_evidence(check, figures))


def stage_record(item: HostStress, wall: float, asked: tuple[float, float]) -> dict[str, Any]:
    """Per host: how the launch ended and how long each phase took (the stage's speed, measured)."""
    return {
        "host": item.host,
        "gpu": None,
        "metric": "stage",
        "device": item.device or None,
        "gpus": len(item.gpus),
        "names": sorted({g.name for g in item.gpus}),
        "torch": item.start.get("torch"),
        "cuda": item.start.get("cuda"),
        "status": item.status,
        "message": item.message,
        "seconds": item.seconds,
        "wall_s": round(wall, 1),
        "memtest_s": asked[0],
        "burnin_minutes": asked[1] / 60.0,
        **({"foreign_processes": item.foreign} if item.foreign else {}),
    }


def unlaunched_verdict(item: HostStress) -> tuple[str, str]:
    """The status and message of every stress check on a host the program never started on: ERROR, but for
    a CPU host without torch. A CPU host's verdicts are SKIP whatever it measures (not judged against a GPU),
    so one that cannot run the program loses no verdict: `diagnose run` on a laptop without the bench extra
    stays a truthful PASS. A GPU host without torch cannot be judged: ERROR."""
    if item.cpu and item.status == NO_TORCH:
        return "SKIP", f"{stress_judge.CPU_NOTE}; not measured either: {item.message}"
    return "ERROR", f"not measured: {item.message}"


def judge_all(figures: list[HostStress], hosts: dict[str, Host]) -> list[stress_judge.Judgement]:
    """Every stress verdict, in the order the program measures."""
    settings = {f.host: stress_judge.Settings.of(hosts[f.host].vars) for f in figures}
    minutes = {
        f.host: (hosts[f.host].vars.float("burnin_minutes", 0.0) or 0.0) if "burnin" in f.phases else 0.0
        for f in figures
    }
    drops = {
        f.host: hosts[f.host].vars.float("burnin_max_drop_pct", stress_burnin.DEFAULT_MAX_DROP_PCT)
        or stress_burnin.DEFAULT_MAX_DROP_PCT
        for f in figures
    }
    unlaunched = [f for f in figures if not f.start and f.status != "done"]
    launched = [f for f in figures if f not in unlaunched]
    failed = stress_judge.Judgement(
        checks=[
            CheckResult(check, f.host, stress_judge.CHECKLIST, status, message=message)
            for f in unlaunched
            for status, message in [unlaunched_verdict(f)]
            for check in STRESS
        ]
    )
    return [
        failed,
        stress_judge.judge_throughput(launched, settings, GPU_GEMM),
        stress_judge.judge_throughput(launched, settings, GPU_HBM),
        stress_judge.judge_memtest(launched, settings),
        stress_sdc.judge_sdc(launched),
        stress_burnin.judge_burnin(launched, minutes, drops),
    ]


def with_evidence(check: CheckResult, figures: list[HostStress]) -> CheckResult:
    """The program's output on the host as the check's evidence."""
    item = next((f for f in figures if f.host == check.host), None)
    if item is None or item.evidence is None or check.evidence:
        return check
    return replace(check, evidence=item.evidence)


def run(stage: Any, setup: Setup) -> None:
    """The extra's entry point (:mod:`diagnose.probes.registry`): stress every host, judge, emit."""
    if setup.hosts:
        Stress(stage, setup).run()
