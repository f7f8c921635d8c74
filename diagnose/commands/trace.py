"""``diagnose trace``: a user's torch.profiler traces (one per rank) judged as checklist section 4.

The I/O around the pure parts: read each trace (:func:`diagnose.trace.analyze.analyze_trace`), collect the
thresholds (profile < ``-e``) and the fabric baseline (``--fabric`` results.json of a run, or ``-e
train_fabric_busbw_gbps=``), judge (:func:`diagnose.trace.judge.judge_training`, and the user job's own
anti-patterns with :func:`diagnose.trace.judge.judge_patterns`) and write results.json
through the same results store as a run, so ``diagnose report`` re-renders it and the report fills
section 4 and marks the sections no trace can answer NOT COVERED.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from diagnose.config.extra_vars import parse_extra_vars
from diagnose.config.profile_files import load_profile
from diagnose.core.errors import ConfigError
from diagnose.core.model import CheckResult
from diagnose.core.redact import redact_argv
from diagnose.core.vars import Vars
from diagnose.engine.results import ResultsStore
from diagnose.engine.run_ids import find_results, make_run_dir, new_run_id, run_header
from diagnose.inference.serving import judge_serving, parse_serving, serving_check, serving_record
from diagnose.render.load import read_results
from diagnose.trace.analyze import RankAnalysis, analyze_trace
from diagnose.trace.judge import (
    FabricBaseline,
    baseline_from_benchmarks,
    judge_patterns,
    judge_training,
    training_record,
)
from diagnose.trace.reader import TraceFormatError

SOURCE = "user trace"
#: The playbook a trace's results name, and the tail of its default run folder (``<id>-trace``).
SOURCE_NAME = "trace"


@dataclass
class TraceOptions:
    """What the command line holds."""

    traces: list[str]
    out: str | None = None
    extra_vars: list[str] = field(default_factory=list)
    profile: str | None = None
    fabric: str | None = None  # a results.json whose all_reduce benchmark is the fabric baseline
    serving: str | None = None  # a `vllm bench serve --save-result` JSON judged against serving_* SLOs
    argv: list[str] = field(default_factory=list)


@dataclass
class TraceOutcome:
    out_dir: Path
    results_path: Path
    document: dict[str, Any]
    analyses: list[RankAnalysis]


def _variables(options: TraceOptions) -> Vars:
    values: dict[str, Any] = {}
    if options.profile:
        values.update(load_profile(options.profile).vars)
        values["diagnose_profile"] = options.profile
    values.update(parse_extra_vars(options.extra_vars))
    return Vars(values)


def _baseline(options: TraceOptions, host_vars: Vars, analyses: list[RankAnalysis]) -> FabricBaseline | None:
    """The fabric to judge against: a run's all_reduce benchmark, overridden by ``-e`` values."""
    grad_bytes = host_vars.int("train_grad_bytes")
    baseline = None
    if options.fabric:
        try:
            path = find_results(options.fabric)
        except ConfigError as exc:
            raise ConfigError(f"--fabric {exc}") from None
        try:
            document = read_results(path)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"--fabric {path}: not a readable results.json: {exc}") from None
        baseline = baseline_from_benchmarks(document.get("benchmarks") or [], grad_bytes)
        if baseline is None:
            raise ConfigError(f"--fabric {path}: holds no all_reduce benchmark with measured rows")
    busbw = host_vars.float("train_fabric_busbw_gbps")
    if busbw is not None:
        ranks = max((a.world_size or 0 for a in analyses), default=0) or len(analyses)
        baseline = FabricBaseline(busbw, grad_bytes, baseline.ranks if baseline else ranks, 0)
    elif baseline is not None and grad_bytes is not None:
        baseline.grad_bytes = grad_bytes
    return baseline


def _out_dir(options: TraceOptions, run_id: str) -> Path:
    try:
        return make_run_dir(run_id, Path(SOURCE_NAME), options.out)
    except OSError as exc:
        raise ConfigError(f"--out: cannot create the folder: {exc.strerror or exc}") from None


def analyze_all(paths: list[str]) -> list[RankAnalysis]:
    """Every trace, in the order given (the rank when a trace does not name its own); the first
    unreadable one stops everything with a ConfigError naming it."""
    analyses = []
    for index, name in enumerate(paths):
        path = Path(name)
        if not path.is_file():
            raise ConfigError(f"{name}: no such trace file")
        try:
            analyses.append(analyze_trace(path, fallback_rank=index))
        except TraceFormatError as exc:
            raise ConfigError(str(exc)) from None
    ranks = [a.rank for a in analyses]
    duplicated = sorted({r for r in ranks if ranks.count(r) > 1})
    if duplicated:
        raise ConfigError(
            f"traces name the same rank more than once ({', '.join(map(str, duplicated))}): give one "
            "trace per rank"
        )
    return analyses


def _serving(path: str, host_vars: Vars) -> tuple[dict[str, Any], CheckResult]:
    """The inference record and ``infer.serving`` check of a serving benchmark's saved result."""
    try:
        facts = parse_serving(json.loads(Path(path).read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--serving {path}: {exc}") from None
    slos = (host_vars.float("serving_ttft_p99_ms"), host_vars.float("serving_tpot_p99_ms"))
    verdict = judge_serving(facts, *slos)
    return serving_record(facts, verdict, str(Path(path).resolve())), serving_check(verdict)


def run_trace(options: TraceOptions) -> TraceOutcome:
    """Judge the traces and write results.json; ConfigError (exit 2) before anything is written."""
    if not options.traces and not options.serving:
        raise ConfigError("give at least one trace file, or --serving FILE")
    host_vars = _variables(options)
    analyses = analyze_all(options.traces)
    checks: list[CheckResult] = []
    if analyses:
        checks = judge_training(analyses, host_vars, _baseline(options, host_vars, analyses), SOURCE)
        checks += judge_patterns(analyses, SOURCE)
    serving = _serving(options.serving, host_vars) if options.serving else None
    started = datetime.now(timezone.utc)
    run_id = new_run_id(started)
    out_dir = _out_dir(options, run_id)
    argv = ["diagnose", *redact_argv(options.argv)]
    header = run_header(run_id, started, None, SOURCE_NAME, options.profile, argv)
    header["inventory"] = None  # no hosts were reached: the traces are the whole input
    header["cluster"] = (
        ", ".join(sorted({a.host_name for a in analyses if a.host_name})) or socket.gethostname()
    )
    header["traces"] = [str(Path(t).resolve()) for t in options.traces]
    store = ResultsStore(out_dir / "results.json", header)
    for analysis in sorted(analyses, key=lambda a: a.rank if a.rank is not None else -1):
        store.add_record(
            "training",
            training_record(analysis, analysis.host_name, SOURCE, str(Path(analysis.path).resolve())),
        )
    if serving is not None:
        store.add_record("inference", serving[0])
        checks.append(serving[1])
    store.add_checks(checks)
    document = store.finish(finished=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    return TraceOutcome(out_dir, out_dir / "results.json", document, analyses)
