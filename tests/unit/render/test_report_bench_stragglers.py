"""A benchmark's straggler lines at scale: a pair search over thousands of hosts may name hundreds, each one a
``bench.straggler`` result the findings and the matrix already carry. The benchmark lists the worst first, a
dozen at most, and counts the rest (158 lines filled a page and a half of the PDF per collective)."""

from __future__ import annotations

import json

from diagnose.render.load import clean_tree, normalize
from diagnose.render.view_benchmarks import STRAGGLER_LINES, build_benchmarks
from tests.support.paths import FIXTURES


def _with_stragglers(statuses: list[str]) -> dict:
    results = json.loads((FIXTURES / "results" / "h200_local.json").read_text())
    collective = results["benchmarks"][0]["collective"]
    results["checks"] += [
        {
            "id": "bench.straggler",
            "host": f"gpu{i:03d}",
            "status": status,
            "message": f"gpu{i:03d} is 30 % slow in {collective}: slow with 2 distinct partners",
        }
        for i, status in enumerate(statuses)
    ]
    return normalize(clean_tree(results))


def test_hundreds_of_stragglers_are_listed_worst_first_and_the_rest_counted() -> None:
    statuses = ["WARN"] * 150 + ["FAIL"] * 8
    (bench,) = build_benchmarks(_with_stragglers(statuses))
    listed, rest = bench.straggler[:-1], bench.straggler[-1]
    assert len(listed) == STRAGGLER_LINES
    assert [line.split(" (")[1][:4] for line in listed] == ["FAIL"] * 8 + ["WARN"] * (STRAGGLER_LINES - 8)
    assert listed[0].startswith("gpu150 (FAIL): gpu150 is 30 % slow")
    assert rest.startswith(f"and {len(statuses) - STRAGGLER_LINES} more hosts the pair search judged in ")
    assert "bench.straggler result under the findings and in the matrix" in rest


def test_a_few_stragglers_are_all_listed_with_no_count() -> None:
    (bench,) = build_benchmarks(_with_stragglers(["FAIL", "WARN", "FAIL"]))
    assert [line.split(" (")[0] for line in bench.straggler] == ["gpu000", "gpu002", "gpu001"]
