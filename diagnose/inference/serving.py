"""A serving benchmark's result (``vllm bench serve --save-result``) judged against the deployment's SLOs.

KV-transfer numbers say what the fabric can do; what users feel is time to first token (TTFT: queueing,
prefill and, in disaggregated serving, the KV handoff) and time per output token (TPOT: decode). vLLM's
client writes one JSON object per run: the run's settings (``date``, ``endpoint_type`` or ``backend``,
``model_id``, ``num_prompts``, ``request_rate``, ``max_concurrency``), totals (``duration``,
``completed``, ``failed``, ``request_throughput``, ``output_throughput``) and, per latency metric
(``ttft``, ``tpot``, ``itl``, ``e2el``), ``mean_<m>_ms``, ``median_<m>_ms``, ``std_<m>_ms`` and one
``p<N>_<m>_ms`` per percentile asked with ``--metric-percentiles`` (99 by default). Older clients
(benchmarks/benchmark_serving.py) write the same keys without ``failed`` and ``endpoint_type``.

Pure: :func:`parse_serving` (the JSON object → facts) and :func:`judge_serving` (facts and SLOs → verdict),
checklist section 5 (``infer.serving``). The SLO variables are ``serving_ttft_p99_ms`` and
``serving_tpot_p99_ms`` (playbook ``vars``, profile or ``-e``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from diagnose.catalog.stage_ids import INFER_SERVING
from diagnose.core.model import CheckResult, worst

CHECK_ID = INFER_SERVING
CHECKLIST = "5"
METRICS = ("ttft", "tpot", "itl", "e2el")
_STAT = re.compile(r"(?P<stat>mean|median|std|p\d+(?:\.\d+)?)_(?P<metric>ttft|tpot|itl|e2el)_ms\Z")
_SETTINGS = ("date", "model_id", "num_prompts", "request_rate", "burstiness", "max_concurrency")
_TOTALS = (
    "duration",
    "completed",
    "failed",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
)


@dataclass(frozen=True)
class ServingVerdict:
    status: str
    message: str
    observed: dict[str, Any]
    expected: dict[str, float] | None


def parse_serving(document: Any) -> dict[str, Any]:
    """Facts of one saved result; ValueError when the object is not one."""
    if not isinstance(document, Mapping):
        raise ValueError("a vLLM bench serve result is one JSON object")
    metrics: dict[str, dict[str, float]] = {}
    for key, value in document.items():
        match = _STAT.match(str(key))
        if match and isinstance(value, int | float) and not isinstance(value, bool):
            metrics.setdefault(match["metric"], {})[match["stat"]] = float(value)
    if "completed" not in document or "ttft" not in metrics:
        raise ValueError(
            "not a vLLM bench serve result: no 'completed' count or no TTFT statistics (mean_ttft_ms, ...)"
        )
    facts: dict[str, Any] = {key: document.get(key) for key in (*_SETTINGS, *_TOTALS)}
    facts["backend"] = document.get("endpoint_type") or document.get("backend")
    facts["metrics"] = {m: metrics[m] for m in METRICS if m in metrics}
    return facts


def _p99(facts: Mapping[str, Any], metric: str) -> float | None:
    return (facts["metrics"].get(metric) or {}).get("p99")


def judge_serving(
    facts: Mapping[str, Any], ttft_p99_ms: float | None, tpot_p99_ms: float | None
) -> ServingVerdict:
    """``infer.serving``: p99 TTFT and TPOT against their SLOs; failed requests are named."""
    completed = int(facts.get("completed") or 0)
    failed = int(facts.get("failed") or 0)
    model = facts.get("model_id") or "the model"
    rate = facts.get("request_rate")
    load = f"{completed} requests" + (f" at {rate} req/s" if rate not in (None, "inf") else " at full rate")
    if facts.get("max_concurrency"):
        load += f", concurrency {facts['max_concurrency']}"
    observed = {
        "completed": completed,
        "failed": failed,
        "request_throughput": facts.get("request_throughput"),
        "ttft_p99_ms": _p99(facts, "ttft"),
        "tpot_p99_ms": _p99(facts, "tpot"),
    }
    slos = {"ttft": ttft_p99_ms, "tpot": tpot_p99_ms}
    expected = {f"{m}_p99_ms": v for m, v in slos.items() if v is not None} or None
    if completed == 0:
        return ServingVerdict("FAIL", f"{model}: no request completed ({failed} failed)", observed, expected)
    problems: list[tuple[str, str]] = []
    parts: list[str] = []
    for metric, slo in slos.items():
        value = _p99(facts, metric)
        name = metric.upper()
        if value is None:
            if slo is not None:
                problems.append(
                    (
                        "ERROR",
                        f"p99 {name} is not in the file (run the benchmark with --metric-percentiles 99)",
                    )
                )
            continue
        shown = f"p99 {name} {value:.1f} ms"
        if slo is None:
            parts.append(shown)
        elif value > slo:
            problems.append(("FAIL", f"{shown} over its SLO of {slo:g} ms"))
        else:
            parts.append(f"{shown} (SLO {slo:g} ms)")
    if failed:
        problems.append(("WARN", f"{failed} of {completed + failed} requests failed"))
    throughput = facts.get("request_throughput")
    if throughput is not None:
        parts.append(f"{throughput:.2f} req/s")
    head = f"{model}, {load}: "
    if problems:
        status = worst([s for s, _ in problems])
        return ServingVerdict(status, head + "; ".join([m for _, m in problems] + parts), observed, expected)
    if expected is None:
        return ServingVerdict(
            "SKIP",
            head
            + ", ".join(parts)
            + " — no SLO set (serving_ttft_p99_ms, serving_tpot_p99_ms): shown, not judged",
            observed,
            None,
        )
    return ServingVerdict("PASS", head + ", ".join(parts), observed, expected)


def serving_record(facts: Mapping[str, Any], verdict: ServingVerdict, source: str) -> dict[str, Any]:
    """The ``inference`` entry of results.json for one serving result."""
    return {"kind": "serving", "file": source, **facts, "status": verdict.status, "message": verdict.message}


def serving_check(verdict: ServingVerdict) -> CheckResult:
    """The ``infer.serving`` check of one verdict (checklist section 5, cluster-wide)."""
    return CheckResult(
        CHECK_ID,
        None,
        CHECKLIST,
        verdict.status,
        observed=verdict.observed,
        expected=verdict.expected,
        message=verdict.message,
    )
