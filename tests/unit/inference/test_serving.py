"""A `vllm bench serve --save-result` JSON judged against TTFT/TPOT SLOs, on real saved results
(tests/fixtures/serving, see SOURCE there)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from diagnose.core.errors import ConfigError
from diagnose.inference.serving import judge_serving, parse_serving, serving_record
from tests.support.paths import FIXTURES

SERVING = FIXTURES / "serving"


def load(name: str) -> dict[str, Any]:
    return parse_serving(json.loads((SERVING / name).read_text()))


def test_a_saved_result_is_read() -> None:
    facts = load("vllm_qwen3vl8b_1qps.json")
    assert facts["completed"] == 200 and facts["failed"] == 0 and facts["backend"] == "openai"
    assert facts["num_prompts"] == 200 and facts["request_rate"] == 1.0 and facts["max_concurrency"] is None
    assert facts["request_throughput"] == pytest.approx(0.98275, rel=1e-4)
    assert facts["metrics"]["ttft"] == pytest.approx(
        {"mean": 95.634, "median": 95.700, "std": 12.713, "p99": 143.326}, rel=1e-4
    )
    assert set(facts["metrics"]) == {"ttft", "tpot", "itl"}
    other = load("vllm_qwen3_8b_p50_p95_p99_e2el.json")
    assert set(other["metrics"]) == {"ttft", "itl", "e2el"}
    assert set(other["metrics"]["e2el"]) == {"mean", "median", "std", "p50", "p95", "p99"}
    assert other["request_rate"] == "inf" and other["max_concurrency"] == 1


def test_within_the_slos_it_passes() -> None:
    verdict = judge_serving(load("vllm_qwen3vl8b_1qps.json"), ttft_p99_ms=200, tpot_p99_ms=50)
    assert verdict.status == "PASS"
    assert verdict.message == (
        "/workspace/shared_assets/models/Qwen/Qwen3-VL-8B-Instruct, 200 requests at 1.0 req/s: "
        "p99 TTFT 143.3 ms (SLO 200 ms), p99 TPOT 31.2 ms (SLO 50 ms), 0.98 req/s"
    )
    assert verdict.expected == {"ttft_p99_ms": 200, "tpot_p99_ms": 50}


def test_over_an_slo_it_fails_and_failed_requests_are_named() -> None:
    verdict = judge_serving(load("vllm_qwen3vl8b_1qps.json"), ttft_p99_ms=120, tpot_p99_ms=None)
    assert verdict.status == "FAIL" and "p99 TTFT 143.3 ms over its SLO of 120 ms" in verdict.message
    failed = judge_serving(load("vllm_qwen25vl3b_one_failed.json"), ttft_p99_ms=200, tpot_p99_ms=50)
    assert failed.status == "WARN" and "1 of 200 requests failed" in failed.message


def test_without_slos_the_numbers_are_shown_not_judged() -> None:
    verdict = judge_serving(load("vllm_qwen3vl8b_1qps.json"), None, None)
    assert (
        verdict.status == "SKIP"
        and "no SLO set" in verdict.message
        and "p99 TTFT 143.3 ms" in verdict.message
    )


def test_an_slo_on_a_metric_the_run_did_not_save_is_an_error() -> None:
    verdict = judge_serving(load("vllm_qwen3_8b_p50_p95_p99_e2el.json"), ttft_p99_ms=100, tpot_p99_ms=30)
    assert verdict.status == "ERROR" and "p99 TPOT is not in the file" in verdict.message
    assert (
        "p99 TTFT 20.2 ms (SLO 100 ms)" in verdict.message
        and "at full rate, concurrency 1" in verdict.message
    )


def test_other_json_is_refused_and_the_record_keeps_the_facts() -> None:
    for document in ([], {"completed": 3}, {"mean_ttft_ms": 3.0}):
        with pytest.raises(ValueError, match="vLLM bench serve result"):
            parse_serving(document)
    facts = load("vllm_qwen3vl8b_1qps.json")
    verdict = judge_serving(facts, 200, 50)
    record = serving_record(facts, verdict, "bench.json")
    assert (
        record["kind"] == "serving" and record["status"] == "PASS" and record["metrics"] == facts["metrics"]
    )


def test_diagnose_trace_serving_writes_section_5(tmp_path: Path) -> None:
    """`diagnose trace --serving FILE`: the result judged with the SLOs of -e, in results.json and the report."""
    from diagnose.commands.trace import TraceOptions, run_trace
    from diagnose.render.render import render

    fixture = str(SERVING / "vllm_qwen3vl8b_1qps.json")
    out = tmp_path / "out"
    outcome = run_trace(
        TraceOptions([], out=str(out), extra_vars=["serving_ttft_p99_ms=120"], serving=fixture)
    )
    document = json.loads(outcome.results_path.read_text())
    assert document["verdict"] == "FAIL"
    (check,) = document["checks"]
    assert (check["id"], check["status"], check["checklist"]) == ("infer.serving", "FAIL", "5")
    (record,) = document["inference"]
    assert record["kind"] == "serving" and record["metrics"]["tpot"]["p99"] == pytest.approx(
        31.2027, rel=1e-4
    )
    html = next(p for p in render(outcome.results_path, {"html"}) if p.suffix == ".html").read_text()
    assert "Serving benchmark" in html and "over its SLO of 120 ms" in html
    with pytest.raises(ConfigError, match=r"--serving .*missing\.json"):
        run_trace(TraceOptions([], out=str(out), serving=str(tmp_path / "missing.json")))


def test_the_command_line_takes_a_serving_file_without_traces(tmp_path: Path) -> None:
    from diagnose.cli import main

    fixture = str(SERVING / "vllm_qwen3vl8b_1qps.json")
    out = tmp_path / "out"
    slos = ["-e", "serving_ttft_p99_ms=200", "-e", "serving_tpot_p99_ms=50"]
    assert main(["trace", "--serving", fixture, *slos, "--out", str(out), "--format", "json"]) == 0
    assert json.loads((out / "results.json").read_text())["checks"][0]["status"] == "PASS"
    assert main(["trace", "--out", str(out)]) == 2  # neither traces nor --serving
