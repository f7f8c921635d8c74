"""The localization chapter of the report, from a record the stage's own code wrote."""

from __future__ import annotations

import json
from typing import Any

from diagnose.benchmarks.expect import Expectation
from diagnose.benchmarks.setup import Setup
from diagnose.benchmarks.straggler import localization_record
from diagnose.core.hosts import Host
from diagnose.core.vars import Vars
from diagnose.localize import Settings, localize
from diagnose.localize.model import ring_edges
from diagnose.render.html import render_html
from diagnose.render.load import clean_tree, normalize
from diagnose.render.view import build_report
from diagnose.render.view_localization import build_localization
from tests.support.paths import FIXTURES

RESULTS = FIXTURES / "results"
TWO = Expectation(340.0, 289.0, 391.0, "two nodes")


def record(names: list[str], slow: dict[str, float]) -> dict[str, Any]:
    ticks = iter(range(10**6))

    def measure(groups: list[list[str]]) -> list[float | None]:
        out: list[float | None] = []
        for group in groups:
            pace = min(1.0 - slow.get(h, 0.0) for h in group)
            assert ring_edges(tuple(group))
            out.append(340.0 * pace * (1.0 + 0.004 * ((next(ticks) % 5) - 2)))
        return out

    settings = Settings()
    finding = localize(names, measure, settings, clock=ticks.__next__)
    setup = Setup("nccl", 8, [Host(n, vars=Vars({})) for n in names], [])
    trigger = {
        "nodes": len(names),
        "busbw_gbps": 180.0,
        "normal_range_gbps": [242.2, 327.8],
        "shortfall": 0.63,
    }
    return localization_record(finding, settings, "all_reduce", setup, trigger, [], TWO)


def results_with(entries: list[dict[str, Any]]) -> dict[str, Any]:
    doc = json.loads((RESULTS / "cluster_failures.json").read_text())
    doc["localization"] = entries
    return normalize(clean_tree(doc))


def test_no_record_no_chapter() -> None:
    assert build_localization({"checks": []}) is None


def test_the_chapter_names_the_host_with_its_numbers_and_the_rounds() -> None:
    names = [f"gpu{i:02d}" for i in range(40)]
    (search,) = build_localization(results_with([record(names, {"gpu05": 0.37})])) or []
    assert search.status == "FAIL" and search.summary.startswith("all_reduce: named host gpu05 (37 % slow)")
    assert (
        search.trigger
        == "all_reduce busbw 180 GB/s on 40 nodes, normal range 242–328 GB/s (×0.63 of the expected)"
    )
    (accused,) = search.accused
    assert (accused.kind, accused.name, accused.deficit) == ("host", "gpu05", "37 %")
    assert len(accused.evidence) == 2 and all(m.verdict == "slow" for m in accused.evidence)
    first = search.steps[0]
    # Twenty pairs and their twenty seams: gpu05 is slow in both of its pairs, the rest is plainly fast.
    assert first.groups == 40 and first.fast_hidden == 38, "a big round lists only what is not plainly fast"
    assert [m.hosts for m in first.shown] == ["gpu04+gpu05", "gpu05+gpu06"]
    html = render_html(build_report(results_with([record(names, {"gpu05": 0.37})]), RESULTS))
    chapter = html[html.index('id="localization"') :]
    assert "Localization: slow host or link" in chapter
    assert "gpu05" in chapter and "convicts" in chapter and "and 38 fast groups" in chapter


def test_a_search_that_found_nothing_says_so() -> None:
    names = [f"gpu{i:02d}" for i in range(8)]
    (search,) = build_localization(results_with([record(names, {})])) or []
    assert search.status == "WARN" and search.accused == []
    assert "no host or link stands out" in search.summary
    assert all(m.verdict == "ok" for step in search.steps for m in step.shown)
