"""One count of a run's results, and its coverage (diagnose.render.tally), on real results files.

Issue 23 saw one run counted four ways: 10 PASS on the terminal (checks + benchmarks), 9 in the report and
in Prometheus (checks only) and 52 JUnit test cases (checks × hosts + benchmarks, all statuses). These tests
render one real results.json into all four and read the numbers back from what each one wrote.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from diagnose.commands.run import summary_lines
from diagnose.render.html import render_html
from diagnose.render.junit import render_junit
from diagnose.render.load import clean_tree, normalize
from diagnose.render.prometheus import render_prometheus
from diagnose.render.tally import (
    LIMITED_BELOW,
    Coverage,
    coverage_line,
    coverage_of,
    results_of,
    skip_cause,
)
from diagnose.render.view import build_cover, build_report
from tests.support.paths import FIXTURES

RESULTS = FIXTURES / "results"
STATUSES = ("PASS", "WARN", "FAIL", "ERROR", "SKIP")
# Real runs (a lent H200 box, two and four H200 nodes, this CPU-only VM), a hand-made cluster with faults
# whose benchmarks also stand as bench.<collective> rows, and a hostile file with an unknown status and a
# benchmark no row stands for.
COUNTED = (
    "h200x4_real_moe.json",
    "h200x2_acceptance_extras.json",
    "cpu_only_local.json",
    "cluster_failures.json",
    "hostile.json",
)


def _raw(name: str) -> dict[str, Any]:
    return json.loads((RESULTS / name).read_text())


def _terminal(document: dict[str, Any]) -> dict[str, int]:
    first = summary_lines(document, Path("/runs/x"), [])[0]
    tally = first.rsplit(" — ", 2)[1]
    return {s: int(n) for n, s in re.findall(r"(\d+) (PASS|WARN|FAIL|ERROR|SKIP)\b", tally)}


def _report(document: dict[str, Any]) -> dict[str, int]:
    html = render_html(build_report(normalize(clean_tree(document)), RESULTS))
    counts = html.split('<table class="counts">')[1].split("</table>")[0]
    return {
        s: int(n) for n, s in re.findall(r'<span class="n">(\d+)</span><span class="l">(\w+)</span>', counts)
    }


def _prometheus(document: dict[str, Any]) -> dict[str, int]:
    text = render_prometheus(normalize(clean_tree(document))).decode()
    return {s: int(float(n)) for s, n in re.findall(r'^diagnose_checks\{status="(\w+)"\} (\S+)$', text, re.M)}


def _junit(document: dict[str, Any]) -> dict[str, int]:
    root = ET.fromstring(render_junit(normalize(clean_tree(document))))
    tests, failures, errors, skipped = (
        int(root.get(a) or 0) for a in ("tests", "failures", "errors", "skipped")
    )
    assert len(list(root.iter("testcase"))) == tests
    # JUnit knows no WARN: a WARN passes (its message kept in system-out), so passes are PASS + WARN.
    return {"PASSED": tests - failures - errors - skipped, "FAIL": failures, "ERROR": errors, "SKIP": skipped}


@pytest.mark.parametrize("name", COUNTED)
def test_terminal_report_prometheus_and_junit_count_the_same_results(name: str) -> None:
    document = _raw(name)
    expected = coverage_of(document).counts
    assert sum(expected.values()) == len(results_of(document))
    nonzero = {s: n for s, n in expected.items() if n}
    assert _terminal(document) == nonzero
    assert _report(document) == expected
    assert _prometheus(document) == {s: expected[s] for s in ("FAIL", "ERROR", "WARN", "PASS", "SKIP")}
    assert _junit(document) == {
        "PASSED": expected["PASS"] + expected["WARN"],
        "FAIL": expected["FAIL"],
        "ERROR": expected["ERROR"],
        "SKIP": expected["SKIP"],
    }


def test_a_benchmark_counts_once_as_its_bench_row() -> None:
    document = _raw("h200x4_real_moe.json")
    bench_rows = [c for c in document["checks"] if c["id"].startswith("bench.")]
    assert len(document["benchmarks"]) == 4 and len(bench_rows) >= 4
    assert len(results_of(document)) == len(document["checks"])
    hostile = _raw("hostile.json")
    (orphan,) = results_of(hostile)[len(hostile["checks"]) :]
    assert orphan["id"].startswith("bench.all_reduce") and orphan["status"] == "FAIL"
    counts = coverage_of(hostile).counts
    assert counts["ERROR"] == 2, (
        "ib.link_rate's ERROR and the unknown status MAYBE, which could not be judged"
    )


def test_cpu_only_run_is_a_pass_on_what_was_measured() -> None:
    """A real default run on this VM (no GPU, no fabric): PASS, exit 0, and it says how little it covered."""
    document = _raw("cpu_only_local.json")
    assert document["verdict"] == "PASS" and document["run"]["profile"] == "cpu-testbed"
    recorded = document["coverage"]
    # Recorded before results.json counted ``shown``: there was none to count.
    assert {"shown": 0, **recorded} == coverage_of(document).to_dict(), (
        "the record and the report count alike"
    )
    assert recorded["limited"] and recorded["measured"] < LIMITED_BELOW * recorded["total"]
    assert recorded["measured"] + recorded["skipped"] + recorded["unjudged"] == recorded["total"]
    assert list(recorded["by_reason"])[:2] == ["no GPU", "no fabric"]

    first, line = summary_lines(document, Path("/runs/x"), [])
    assert first.startswith("diagnose: PASS, limited coverage (no NVIDIA GPU")
    measured, total = recorded["measured"], recorded["total"]
    assert line == (
        f"diagnose: PASS on what was measured: {measured} of {total} results "
        f"({measured * 100 // total} %, limited coverage: under 50 %); "
        f"{recorded['skipped']} skipped: "
        + ", ".join(f"{cause} {n}" for cause, n in recorded["by_reason"].items())
    )

    cover = build_cover(normalize(clean_tree(document)))
    assert cover.verdict == "PASS" and cover.limited and cover.coverage == line.removeprefix("diagnose: ")
    assert "NOT COVERED by this run" in cover.checklist_coverage
    html = render_html(build_report(normalize(clean_tree(document)), RESULTS))
    cover_html = html.split('<section class="cover"')[1].split('id="contents"')[0]
    assert 'class="verdict limited"' in cover_html and "st-pass" not in cover_html.split("<table")[0]
    assert cover.coverage in cover_html and "what was skipped is not accepted" in cover_html
    prom = render_prometheus(normalize(clean_tree(document))).decode()
    assert "diagnose_coverage_limited{} 1.0" in prom and 'diagnose_skipped{cause="no GPU"}' in prom


def test_an_old_file_without_coverage_gets_it_counted_from_its_rows() -> None:
    document = _raw("cpu_only_local.json")
    recorded = document.pop("coverage")
    assert coverage_of(document).to_dict() == {"shown": 0, **recorded}
    assert build_cover(normalize(clean_tree(document))).limited


def test_real_gpu_runs_pass_with_their_coverage_stated() -> None:
    for name in ("h200_local.json", "h200x4_real_moe.json", "h200x2_real_health.json"):
        document = _raw(name)
        coverage = coverage_of(document)
        assert document["verdict"] == "PASS" and not coverage.limited, name
        line = coverage_line("PASS", coverage)
        assert line.startswith(f"{coverage.measured} of {coverage.total} results measured"), line
        assert "no fabric" in line, "no HCA on the lent machines: their fabric checks are skipped"


def test_limited_is_under_half_and_only_qualifies_a_pass() -> None:
    def coverage(measured: int, skipped: int) -> Coverage:
        return Coverage({"PASS": measured, "WARN": 0, "FAIL": 0, "ERROR": 0, "SKIP": skipped})

    assert not coverage(5, 5).limited and coverage(4, 5).limited and coverage(0, 0).limited
    assert coverage_line("FAIL", coverage(1, 9)).startswith("1 of 10 results measured (10 %)")
    assert coverage_line("INCOMPLETE", coverage(1, 9)).startswith("1 of 10 results measured before the run")
    assert coverage_line("PASS", coverage(499, 501)).startswith(
        "PASS on what was measured: 499 of 1000 results (49 %, limited coverage"
    ), "rounded down: never 50 % while under half"


@pytest.mark.parametrize(
    ("message", "cause"),
    [
        (
            "not measured: one host without GPU (profile cpu-testbed expects no GPU ...): no fabric to measure",
            "no GPU",
        ),
        (
            "ibstat is not installed on localhost; profile single-node-nvlink expects no RDMA fabric",
            "no fabric",
        ),
        (
            "no HCA expected: /dev/infiniband holds only rdma_cm, no uverbs device; expected_hca_count=0",
            "no fabric",
        ),
        ("localhost is not a Kubernetes pod; see ib.devices", "not a pod"),
        (
            "one rank in all (gpu1, one GPU): a collective over one rank moves nothing between ranks",
            "one rank",
        ),
        ("one host: no fleet to judge it against; recorded memory copy 67.4 GB/s", "one host"),
        ("fewer than two hosts reported versions: nothing to compare", "one host"),
        ("no NVSwitch fabric on n1: fabric.state is N/A on every GPU", "no NVLink"),
        (
            "lspci is not installed on localhost (Debian package pciutils), so ACS cannot be read",
            "tool missing",
        ),
        ("no prefill/decode groups named (set kv_prefill_gpus and kv_decode_gpus)", "not configured"),
        ("no host reported HCA firmware, VBIOS or transceiver firmware", "other"),
        (None, "other"),
    ],
)
def test_skip_causes_from_real_messages(message: str | None, cause: str) -> None:
    assert skip_cause(message) == cause


def test_a_pass_that_judged_nothing_is_shown_not_counted_as_pass() -> None:
    """Ranks that exchanged data over gloo show the sweep works; its bandwidth judges nothing of a GPU fabric.
    Such a PASS (``judged: false``) is neither a PASS nor measured, in every count that is printed."""
    document = {
        "verdict": "PASS",
        "run": {"id": "r1", "started": "2026-11-28T18:00:00+00:00", "profile": "cpu-testbed"},
        "hosts": [{"name": "node1", "reachable": True}],
        "checks": [
            {"id": "host.os", "host": "node1", "checklist": "H", "status": "PASS", "message": "Ubuntu 24.04"},
            {
                "id": "bench.all_reduce",
                "host": None,
                "checklist": "3",
                "status": "PASS",
                "judged": False,
                "message": "all_reduce over gloo on CPU hosts: the ranks can talk; its bandwidth is not judged",
            },
            {
                "id": "gpu.topology",
                "host": "node1",
                "checklist": "1",
                "status": "SKIP",
                "message": "CPU host",
            },
        ],
    }
    coverage = coverage_of(document)
    assert (coverage.counts["PASS"], coverage.shown, coverage.measured, coverage.total) == (1, 1, 1, 3)
    assert coverage.to_dict()["shown"] == 1
    assert _terminal(document) == {"PASS": 1, "SKIP": 1}
    assert "1 PASS, 1 shown, 1 SKIP" in summary_lines(document, Path("/runs/x"), [])[0]
    assert "1 shown working, no figure judged" in coverage_line("PASS", coverage)
    assert _prometheus(document)["PASS"] == 1
    assert "\ndiagnose_shown{} 1" in render_prometheus(normalize(clean_tree(document))).decode()
    assert _junit(document) == {"PASSED": 1, "FAIL": 0, "ERROR": 0, "SKIP": 2}
