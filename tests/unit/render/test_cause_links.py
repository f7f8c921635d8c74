"""One fault, one cause: results measured while a root condition stood are listed under it, over real runs."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

from diagnose.cli import main
from diagnose.core.model import CheckResult
from diagnose.engine.results import ResultsStore
from diagnose.render.causes import cause_lines, causes_json, causes_of

RESULTS = Path(__file__).parents[2] / "fixtures" / "results"


def _load(name: str) -> dict[str, Any]:
    return json.loads((RESULTS / name).read_text())


def _by_check(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["check"]: c for c in causes_json(document)}


def test_a_foreign_process_explains_the_slow_gemm_and_hbm_it_was_measured_beside() -> None:
    """The lent H100 beside a hogging process: three FAIL rows, one cause."""
    (cause,) = causes_json(_load("h100_stress_hog.json"))
    assert cause["check"] == "gpu.processes" and cause["status"] == "FAIL"
    assert cause["hosts"] == ["localhost"] and cause["message"].startswith("localhost: 1 compute process")
    assert cause["consequences"] == [
        {"id": "gpu.gemm", "host": "localhost", "status": "FAIL"},
        {"id": "gpu.hbm", "host": "localhost", "status": "FAIL"},
    ]
    assert set(cause) == {"status", "check", "hosts", "message", "action", "consequences"}


def test_a_slow_link_explains_the_straggler_and_the_cluster_busbw_and_nothing_else_is_blamed() -> None:
    document = _load("cluster_failures.json")
    causes = _by_check(document)
    link = causes["ib.link_rate"]
    assert link["hosts"] == ["gpu05"]
    assert [(c["id"], c["host"]) for c in link["consequences"]] == [
        ("bench.straggler", "gpu05"),
        ("bench.all_reduce", None),
    ]
    # unrelated findings stay causes of their own, each explaining nothing
    for other in ("host.reachable", "ib.port_state", "nccl.env", "nccl.version", "gpu.gpudirect"):
        assert causes[other]["consequences"] == [], other
    assert "bench.straggler" not in causes and "bench.all_reduce" not in causes
    # every non-PASS row is either a cause's own or one consequence, never both, never lost
    rows = [c for c in document["checks"] if c["status"] in ("FAIL", "ERROR", "WARN")]
    listed = sum(len(c.rows) + len(c.consequences) for c in causes_of(document))
    assert listed == len(rows)
    assert document["verdict"] == "FAIL"  # the document's verdict is not touched


def test_an_unreachable_host_never_explains_a_measurement_it_took_no_part_in() -> None:
    causes = _by_check(_load("cluster_failures.json"))
    assert causes["host.reachable"]["hosts"] == ["gpu07"] and causes["host.reachable"]["consequences"] == []


def test_a_tcp_fallback_explains_the_busbw_below_its_floor() -> None:
    causes = _by_check(_load("h200x4_two_halves_socket.json"))
    assert causes["nccl.transport"]["consequences"] == [
        {"id": "bench.all_reduce", "host": None, "status": "FAIL"}
    ]
    assert causes["gpu.topology"]["consequences"] == []


def test_the_straggler_search_names_the_host_the_cluster_busbw_failed_for() -> None:
    (cause,) = causes_json(_load("h200x4_localize_gpu3.json"))
    assert cause["check"] == "bench.straggler" and cause["hosts"] == ["gpu3"]
    assert [c["id"] for c in cause["consequences"]] == ["bench.all_reduce"]


def test_a_warning_root_counts_at_its_worst_consequence_and_comes_first() -> None:
    document = _load("h100_stress_hog.json")
    for row in document["checks"]:
        if row["id"] == "gpu.processes":
            row["status"] = "WARN"
    (cause,) = causes_of(document)
    assert cause.status == "FAIL" and [r["id"] for r in cause.rows] == ["gpu.processes"]


def test_a_root_on_another_host_explains_nothing_on_this_one() -> None:
    document = copy.deepcopy(_load("h100_stress_hog.json"))
    for row in document["checks"]:
        if row["id"] == "gpu.processes":
            row["host"] = "elsewhere"
    assert _by_check(document)["gpu.processes"]["consequences"] == []
    assert {"gpu.gemm", "gpu.hbm"} <= set(_by_check(document))


def test_the_terminal_lists_the_consequences_under_their_cause() -> None:
    lines = cause_lines(causes_of(_load("h100_stress_hog.json")), "results.json")
    assert "gpu.processes" in lines[0] and not any("gpu.processes" in line for line in lines[1:-1])
    assert lines[-1].strip() == "+2 consequences (gpu.gemm, gpu.hbm)"


def test_the_run_records_its_causes_when_it_finishes(tmp_path: Path) -> None:
    store = ResultsStore(tmp_path / "results.json", {"id": "r"})
    store.add_check(
        CheckResult(
            "gpu.processes", "n1", "H", "FAIL", message="n1: 1 compute process diagnose did not start"
        )
    )
    store.add_check(CheckResult("gpu.gemm", "n1", "H", "FAIL", message="n1: GPU 0 bf16 300 TFLOP/s"))
    assert "causes" not in json.loads((tmp_path / "results.json").read_text())
    store.finish(finished="now")
    on_disk = json.loads((tmp_path / "results.json").read_text())
    assert [(c["check"], [x["id"] for x in c["consequences"]]) for c in on_disk["causes"]] == [
        ("gpu.processes", ["gpu.gemm"])
    ]


def test_report_format_json_adds_causes_to_a_run_recorded_before_them(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(RESULTS / "h100_stress_hog.json", run / "results.json")
    assert "causes" not in json.loads((run / "results.json").read_text())
    assert main(["report", str(run / "results.json"), "--format", "json"]) == 0
    document = json.loads((run / "results.json").read_text())
    assert document["causes"] == causes_json(_load("h100_stress_hog.json"))
    assert document["checks"] == _load("h100_stress_hog.json")["checks"]


def test_a_results_file_holding_lone_surrogates_gets_its_causes_html_junit_and_prom(tmp_path: Path) -> None:
    """hostile.json's host names hold lone surrogates (bytes that were not UTF-8, escaped as ``\\udcff``):
    they have no UTF-8 form, so writing the causes back used to raise; they stay escapes, the same values."""
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(RESULTS / "hostile.json", run / "results.json")
    assert main(["report", str(run / "results.json"), "--format", "json,html,junit,prom"]) == 0
    document = json.loads((run / "results.json").read_text(encoding="utf-8"))
    assert document["causes"] == causes_json(_load("hostile.json"))
    assert document["checks"] == _load("hostile.json")["checks"]
    assert {p.name for p in run.iterdir()} >= {"report.html", "junit.xml", "diagnose.prom"}
