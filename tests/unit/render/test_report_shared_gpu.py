"""Benchmarks measured beside a process diagnose did not start: marked in results.json and said in the report.

The run's results of tests/fixtures/results/h200_local.json (one local all_reduce), with the facts
gpu.processes keeps for a host where the lent H100's matmul process ran (tests/fixtures/captured/
compute_apps/h100x1_580_matmul_hog.txt).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from diagnose.benchmarks.shared_gpu import mark_shared, shared_hosts
from diagnose.parsers.compute_apps import parse_compute_apps
from diagnose.render.load import clean_tree, normalize
from diagnose.render.render import render_from_dict
from diagnose.render.view_benchmarks import build_benchmarks
from tests.support.paths import CAPTURED, FIXTURES

HOG = parse_compute_apps((CAPTURED / "compute_apps/h100x1_580_matmul_hog.txt").read_text())


def _results() -> dict[str, Any]:
    return normalize(clean_tree(json.loads((FIXTURES / "results" / "h200_local.json").read_text())))


def test_only_hosts_with_foreign_processes_are_shared() -> None:
    facts = {
        "localhost": {"gpu.processes": {"processes": HOG}},
        "node2": {"gpu.processes": {"processes": []}},
    }
    assert shared_hosts({**facts, "node3": {}}) == {"localhost": HOG}


def test_benchmarks_and_records_of_a_shared_host_are_marked_and_the_rest_left_alone() -> None:
    shared = {"localhost": HOG}
    bench = _results()["benchmarks"][0]
    untouched = copy.deepcopy(bench)
    assert mark_shared(copy.deepcopy(bench), {}) == untouched
    marked = mark_shared(bench, shared)
    assert marked["shared_gpu"] is True and marked["shared_gpu_hosts"] == ["localhost"]
    assert mark_shared({"host": "localhost", "metric": "h2d"}, shared)["shared_gpu"] is True
    assert "shared_gpu" not in mark_shared({"host": "node2", "metric": "h2d"}, shared)


def test_the_report_says_the_figures_describe_a_shared_gpu(tmp_path: Path) -> None:
    results = _results()
    mark_shared(results["benchmarks"][0], {"localhost": HOG})
    (view,) = build_benchmarks(results)
    assert view.shared_gpu == (
        "Measured while compute processes diagnose did not start held GPUs of localhost (see gpu.processes): "
        "these figures describe a shared GPU, not the node."
    )
    (plain,) = build_benchmarks(_results())
    assert plain.shared_gpu == ""
    html = render_from_dict(results, {"html"}, tmp_path)
    text = next(p for p in html if p.suffix == ".html").read_text()
    assert "these figures describe a shared GPU, not the node." in text
