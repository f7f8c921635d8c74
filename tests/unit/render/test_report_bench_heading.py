"""The benchmark chapter's heading names the nodes and ranks the sweep ran on, as results.json records them.

A two-host gloo sweep on the README's CPU hosts printed "— nodes, — ranks" while its own message said "on 2
nodes": the view kept the counts as text, and the report's count filter shows only numbers.
"""

from __future__ import annotations

import json
from pathlib import Path

from diagnose.render.load import clean_tree, normalize
from diagnose.render.render import render_from_dict
from diagnose.render.view_benchmarks import build_benchmarks
from tests.support.paths import FIXTURES


def _results() -> dict:
    return normalize(clean_tree(json.loads((FIXTURES / "results" / "h200_local.json").read_text())))


def test_the_heading_counts_the_nodes_and_ranks_recorded(tmp_path: Path) -> None:
    results = _results()
    (bench,) = build_benchmarks(results)
    assert (bench.nodes, bench.ranks) == (1, 4)
    (html,) = [p for p in render_from_dict(results, {"html"}, tmp_path) if p.suffix == ".html"]
    assert "· 1 node, 4 ranks</span>" in html.read_text()


def test_a_sweep_without_counts_shows_them_missing_not_none(tmp_path: Path) -> None:
    results = _results()
    del results["benchmarks"][0]["nodes"], results["benchmarks"][0]["ranks"]
    (html,) = [p for p in render_from_dict(results, {"html"}, tmp_path) if p.suffix == ".html"]
    assert "· — nodes, — ranks</span>" in html.read_text()


def _gloo_two_hosts() -> dict:
    """The h200 fixture's sweep as the README's two CPU hosts ran it: gloo across 2 nodes, no NCCL log, and
    its bench.all_reduce result a PASS that judged no figure."""
    results = _results()
    bench = results["benchmarks"][0]
    bench.update(backend="gloo", nodes=2, ranks=2, transport={"inter_node": None, "intra_node": None})
    results["checks"] = [c for c in results["checks"] if c.get("id") != "bench.all_reduce"] + [
        {"id": "bench.all_reduce", "host": None, "status": "PASS", "judged": False, "message": "not judged"}
    ]
    return results


def test_a_gloo_sweep_across_hosts_is_shown_not_passed_and_says_it_went_over_tcp(tmp_path: Path) -> None:
    """It read PASS above "between nodes: none (single node or not seen in the log)" for two nodes that
    talked over gloo's TCP, while the tally counted the sweep as shown, not as a PASS."""
    (bench,) = build_benchmarks(_gloo_two_hosts())
    assert bench.status == "SHOWN"
    assert bench.inter_node == "TCP (gloo; NCCL not used)"
    (html,) = [p for p in render_from_dict(_gloo_two_hosts(), {"html"}, tmp_path) if p.suffix == ".html"]
    assert '<span class="st st-skip">SHOWN</span> <span class="mono">all_reduce</span>' in html.read_text()
