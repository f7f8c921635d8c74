"""The training probe: a short DDP job across the benchmark's hosts, profiled, judged (checklist section 4).

After the collective sweep, :mod:`diagnose.shipped.train_probe` is started exactly as the collectives were
(torchrun over each host's connection, the same hosts, ranks per host and backend) and profiles a few
steps of DDP on a synthetic transformer stack. Every rank's trace comes home as evidence; the analyzer
(:mod:`diagnose.trace`) measures per step compute, communication, exposed communication, the last bucket's
tail, host syncs and input waits, and judges them against the all-reduce bandwidth the sweep just
measured: an all-reduce far slower than the fabric allows is the fabric's fault, an exposed one that runs
at fabric speed is the job's. The probe's own job is healthy, so a failing ``train.*`` check here points
at the cluster (fabric, GPUs, host CPU), never at user code; the same checks judge a user's own traces
through ``diagnose trace``.

Results: the four checks ``train.overlap``, ``train.tail``, ``train.sync``, ``train.input`` and one entry
per rank in results.json's ``training`` list. A probe that failed, hung or brought no trace home makes
all four ERROR with the reason, keeping whatever was measured; one host without GPUs (or one rank) has
no gradient exchange to watch, so they SKIP; on gloo across CPU hosts the job runs and is measured, and
the checks SKIP with the numbers in their message.

Variables (first host; any inventory level, the playbook's ``vars`` or ``-e``):

* ``train_probe_params_m`` model size in millions of parameters (default 480 on GPUs: two blocks of
  width 4096, ≈ 1.9 GB of fp32 gradients; 2 on CPUs);
* ``train_probe_batch`` sequences of 1024 tokens (64 on CPU) per step and rank (default 3 on GPU, 4 on
  CPU): more compute per step hides more communication — raise it where a slow fabric needs more;
* ``train_probe_steps`` profiled steps (default 5 on GPU, 3 on CPU; at most 50);
* ``train_probe_bucket_caps`` more DDP bucket sizes in MB to profile after the default 25 (e.g.
  ``100,400``); the fastest is reported with the checks, the verdicts stay those of the default.
"""

from __future__ import annotations

import re
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from diagnose.benchmarks.setup import Setup, launch_env, startup_timeout_s
from diagnose.catalog.stage_ids import TRAIN_OVERLAP, TRAINING
from diagnose.config.profiles import no_gpu_reason
from diagnose.core.model import CheckResult
from diagnose.core.units import counted, noun_for
from diagnose.launchers.base import LaunchOutcome, LaunchSpec
from diagnose.launchers.torchrun import launch
from diagnose.shipped import train_probe
from diagnose.trace.analyze import RankAnalysis, analyze_trace
from diagnose.trace.judge import CHECKLIST, baseline_from_benchmarks, judge_training, training_record
from diagnose.trace.reader import TraceFormatError

CHECKS = TRAINING
# On gloo the probe's job runs on CPUs and talks TCP, as the collectives on gloo do: it proves the plumbing
# and its numbers are kept, but a CPU job's overlap says nothing about GPU training on this cluster, so
# its verdicts are not given (section 4 stays uncovered rather than passed or failed by a stand-in).
CPU_NOT_JUDGED = "gloo on CPU hosts, not judged (a CPU job says nothing of GPU training's overlap)"
SOURCE = "training probe"
TAG = "train"
FETCH_DIR = "traces"
_TRACE_NAME = re.compile(r"rank(\d+)-bucket([0-9.]+)mb\.trace\.json\.gz\Z")
# Hang budget of one phase: a fixed allowance (start-up, model build, trace export) plus, per step, the
# gradient traffic at a floor bandwidth that only a broken job falls below, and some compute.
PHASE_BASE_S = 120.0
STEP_COMPUTE_S = 10.0
GLOO_FLOOR_GBPS = 0.02
NCCL_FLOOR_GBPS = 1.0


@dataclass
class ProbeSettings:
    """What the probe's variables ask for; None leaves the program's default for the device."""

    params_m: float | None = None
    batch: int | None = None
    steps: int | None = None
    bucket_caps: list[float] = field(default_factory=lambda: [train_probe.DEFAULT_BUCKET_CAP_MB])

    @classmethod
    def from_vars(cls, host_vars: Any) -> ProbeSettings:
        """The settings of the first host (validated when the inventory was read)."""
        extra = train_probe.parse_caps(",".join(host_vars.list("train_probe_bucket_caps", []) or []))
        default = train_probe.DEFAULT_BUCKET_CAP_MB
        return cls(
            params_m=host_vars.float("train_probe_params_m", None),
            batch=host_vars.int("train_probe_batch", None),
            steps=host_vars.int("train_probe_steps", None),
            bucket_caps=[default, *dict.fromkeys(c for c in extra if c != default)],
        )

    def program_args(self, backend: str) -> list[str]:
        args = ["--backend", backend, "--bucket-cap-mb", ",".join(f"{c:g}" for c in self.bucket_caps)]
        for flag, value in (("--params-m", self.params_m), ("--batch", self.batch), ("--steps", self.steps)):
            if value is not None:
                args += [flag, f"{value:g}"]
        return args

    def resolved(self, backend: str) -> dict[str, Any]:
        """Model size and steps as the program will use them on this backend."""
        defaults = train_probe.GPU_DEFAULTS if backend == "nccl" else train_probe.CPU_DEFAULTS
        return {
            "params_m": self.params_m if self.params_m is not None else defaults["params_m"],
            "steps": self.steps if self.steps is not None else defaults["steps"],
            "warmup": defaults["warmup"],
        }


@dataclass
class CapResult:
    """The ranks' analyses of one bucket size, and why any rank has none."""

    cap_mb: float
    analyses: dict[int, RankAnalysis] = field(default_factory=dict)
    evidence: dict[int, str] = field(default_factory=dict)
    hosts: dict[int, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def mean(self, key: str) -> float | None:
        values = [a.summary.get(key) for a in self.analyses.values()]
        known = [v for v in values if isinstance(v, (int, float))]
        return round(statistics.fmean(known), 4) if known else None

    def row(self) -> dict[str, Any]:
        """This bucket size in the sweep: means over the ranks of the per-rank medians."""
        return {
            "bucket_cap_mb": self.cap_mb,
            "ranks": len(self.analyses),
            **{
                k: self.mean(k) for k in ("step_ms", "comm_ms", "exposed_comm_ms", "overlap_ratio", "tail_ms")
            },
        }


def phase_budget(backend: str, grad_bytes: int, settings: dict[str, Any], timeout_s: float | None) -> Any:
    """Seconds one phase (warm-up or profile) may take before the probe counts as hung."""
    if timeout_s:
        return lambda phase, nbytes: float(timeout_s)
    floor = GLOO_FLOOR_GBPS if backend == "gloo" else NCCL_FLOOR_GBPS
    per_step = 2.0 * grad_bytes / (floor * 1e9) + STEP_COMPUTE_S

    def budget(phase: str, nbytes: int) -> float:
        steps = settings["warmup"] if phase == train_probe.PHASES[0] else settings["steps"] + 1
        return PHASE_BASE_S + max(1, steps) * per_step

    return budget


def skip_reason(setup: Setup) -> str | None:
    """Why no gradient exchange can be watched on these hosts, or None."""
    if setup.backend == "gloo" and len(setup.hosts) == 1 and no_gpu_reason(setup.hosts[0].vars):
        return f"one host without GPU ({no_gpu_reason(setup.hosts[0].vars)}): no data-parallel job to profile"
    if len(setup.hosts) * setup.nproc < 2:
        return "one rank: DDP exchanges no gradients, there is no communication to overlap"
    return None


class TrainingProbe:
    """One probe run inside the benchmark stage."""

    def __init__(self, stage: Any, setup: Setup) -> None:
        self.stage = stage
        self.ctx = stage.ctx
        self.setup = setup
        self.first = setup.hosts[0] if setup.hosts else stage.first
        self.settings = ProbeSettings.from_vars(self.first.vars)

    def emit_all(self, status: str, message: str, observed: Any = None) -> None:
        for check_id in CHECKS:
            self.ctx.emit_check(
                CheckResult(check_id, None, CHECKLIST, status, observed=observed, message=message)
            )

    def run(self) -> None:
        ctx, setup = self.ctx, self.setup
        why = skip_reason(setup)
        if why is not None:
            self.emit_all("SKIP", f"{SOURCE} not run: {why}")
            return
        missing = self.stage.torch_missing(setup.hosts)
        if missing is not None:
            self.emit_all("ERROR", f"{SOURCE} not run: {missing}")
            return
        if ctx.deadline is not None and time.monotonic() > ctx.deadline:
            self.emit_all("ERROR", f"{SOURCE} not run: the run's time budget ran out before it")
            return
        outcome = self.launch()
        results = self.analyze(outcome)
        self.report(outcome, results)
        self.stage.report_cleanup(outcome)

    def launch(self) -> LaunchOutcome:
        setup, settings = self.setup, self.settings
        resolved = settings.resolved(setup.backend)
        grad_bytes = train_probe.gradient_bytes(train_probe.model_shape(resolved["params_m"]))
        spec = LaunchSpec(
            run_id=self.ctx.run_id,
            tag=TAG,
            hosts=setup.hosts,
            connections=self.ctx.connections,
            nproc=setup.nproc,
            backend=setup.backend,
            program_args=settings.program_args(setup.backend),
            expected_rows=[
                (phase, train_probe.cap_bytes(cap))
                for cap in settings.bucket_caps
                for phase in train_probe.PHASES
            ],
            row_budget_s=phase_budget(setup.backend, grad_bytes, resolved, self.stage.plan.timeout_s),
            out_dir=self.ctx.out_dir,
            startup_timeout_s=startup_timeout_s(self.first),
            deadline=self.ctx.deadline,
            host_env={h.name: launch_env(h, setup.backend) for h in setup.hosts},
            program=Path(train_probe.__file__),
            fetch_dir=FETCH_DIR,
            told=self.ctx.told,
        )
        return launch(spec)

    def analyze(self, outcome: LaunchOutcome) -> list[CapResult]:
        """Every fetched trace analysed, grouped by bucket size in the order the probe ran them."""
        by_cap = {cap: CapResult(cap) for cap in self.settings.bucket_caps}
        for key, path in sorted(outcome.files.items()):
            host, _, name = key.partition(":")
            match = _TRACE_NAME.match(name)
            if match is None:
                continue
            rank, cap = int(match.group(1)), float(match.group(2))
            result = by_cap.setdefault(cap, CapResult(cap))
            result.hosts[rank] = host
            result.evidence[rank] = str(path.relative_to(self.ctx.out_dir))
            try:
                result.analyses[rank] = analyze_trace(path, fallback_rank=rank)
            except TraceFormatError as exc:
                result.problems.append(f"rank {rank}: unreadable trace ({exc})")
        ranks = len(self.setup.hosts) * self.setup.nproc
        for result in by_cap.values():
            absent = sorted(set(range(ranks)) - set(result.analyses) - set(result.evidence))
            if absent:
                result.problems.append(
                    f"no trace from {noun_for(len(absent), 'rank')} {', '.join(map(str, absent))}"
                )
        return list(by_cap.values())

    def failure(self, outcome: LaunchOutcome, judged: CapResult) -> str | None:
        """Why the probe's verdicts cannot stand, or None."""
        if outcome.status != "done":
            return f"the probe's DDP job did not finish ({outcome.status}): {outcome.message}"
        if judged.problems:
            fetch = f"; fetching: {'; '.join(outcome.fetch_errors)}" if outcome.fetch_errors else ""
            return f"traces missing: {'; '.join(judged.problems)}{fetch}"
        return None

    def report(self, outcome: LaunchOutcome, results: list[CapResult]) -> None:
        judged = results[0]
        start = outcome.start or {}
        grad_bytes = start.get("gradient_bytes")
        record = self.stage.records.get("all_reduce")
        baseline = baseline_from_benchmarks([record] if record else [], grad_bytes)
        sweep = self.sweep(results)
        for rank, analysis in sorted(judged.analyses.items()):
            entry = training_record(analysis, judged.hosts.get(rank), SOURCE, judged.evidence.get(rank))
            entry["bucket_cap_mb"] = judged.cap_mb
            entry["probe"] = {
                k: start.get(k)
                for k in (
                    "parameters",
                    "gradient_bytes",
                    "shape",
                    "batch",
                    "seq",
                    "backend",
                    "gpu",
                    "nccl",
                    "torch",
                )
            }
            entry["fabric"] = {
                "busbw_gbps": baseline.busbw_gbps if baseline else None,
                "allreduce_ms": baseline.allreduce_ms(grad_bytes) if baseline else None,
            }
            if sweep:
                entry["bucket_sweep"] = sweep["rows"]
                entry["best_bucket_cap_mb"] = sweep["best"]
            self.ctx.emit_record("training", entry)
        why = self.failure(outcome, judged)
        if why is not None:
            observed = {str(r): a.summary for r, a in sorted(judged.analyses.items())} or None
            kept = (
                f"; {counted(len(judged.analyses), 'rank trace')} measured {'is' if len(judged.analyses) == 1 else 'are'} kept "
                "in results.json"
                if observed
                else ""
            )
            self.emit_all("ERROR", f"{SOURCE}: {why}{kept}", observed)
            return
        for check in judge_training(list(judged.analyses.values()), self.first.vars, baseline, SOURCE):
            if sweep and check.id == TRAIN_OVERLAP:
                check.message += f"; {sweep['sentence']}"
            if judged.evidence:
                check.evidence = judged.evidence[min(judged.evidence)]
            if self.setup.backend == "gloo" and check.status != "SKIP":
                check.status, check.remediation = "SKIP", None
                check.message = check.message.replace(
                    f"{SOURCE}: ", f"{SOURCE}: {CPU_NOT_JUDGED}; measured: ", 1
                )
            self.ctx.emit_check(check)

    @staticmethod
    def sweep(results: list[CapResult]) -> dict[str, Any] | None:
        """The bucket sizes compared by step time, when more than one was profiled."""
        rows = [r.row() for r in results if r.analyses]
        timed = [row for row in rows if row["step_ms"] is not None]
        if len(results) < 2 or not timed:
            return None
        best = min(timed, key=lambda row: row["step_ms"])
        listing = ", ".join(
            f"{row['bucket_cap_mb']:g} MB {row['step_ms']:.2f} ms/step (exposed {row['exposed_comm_ms'] or 0:.2f} ms)"
            for row in timed
        )
        lost = [f"{r.cap_mb:g} MB" for r in results if not r.analyses]
        sentence = f"bucket_cap_mb sweep: {listing}; best {best['bucket_cap_mb']:g} MB"
        if lost:
            sentence += f" (not measured: {', '.join(lost)})"
        return {"rows": rows, "best": best["bucket_cap_mb"], "sentence": sentence}


def run(stage: Any, setup: Setup) -> None:
    """The extra's entry point (:mod:`diagnose.probes.registry`)."""
    TrainingProbe(stage, setup).run()
