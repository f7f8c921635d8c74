"""What diagnose did to nodes, shown where the run is read: the terminal's summary, the report's chapter and
the Prometheus gauge, from ``quarantine`` and ``bug_report`` lists built the way diagnose/quarantine/ and
node-check write them (the steps of diagnose.k8s.nodes, recorded through diagnose.quarantine.cap.record),
added to the real run document tests/fixtures/results/h200_local.json."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from diagnose.commands.run import summary_lines
from diagnose.k8s import nodes as k8s_nodes
from diagnose.quarantine.cap import WITHHELD, Candidate, Cap, cap_finding, record
from diagnose.render.acted import acted_lines, node_actions
from diagnose.render.prometheus import render_prometheus
from diagnose.render.render import render_from_dict
from diagnose.render.view_quarantine import build_quarantine
from tests.support.paths import FIXTURES

RUN = FIXTURES / "results" / "h200_local.json"
NOW = "2026-11-25T18:00:00Z"


def _logged(node: str, steps: list[k8s_nodes.Step], checks: list[str]) -> list[dict[str, Any]]:
    """As diagnose.quarantine.kubernetes logs each step it carried out."""
    why = ", ".join(checks) if checks else "checks passed"
    return [
        record(
            "kubernetes",
            node,
            s.step,
            s.state,
            by=s.by,
            why=why,
            detail=s.detail,
            hosts=[node],
            checks=checks,
        )
        for s in steps
    ]


def acted_run() -> dict[str, Any]:
    """gpu03 and gpu04 cordoned and tainted for gpu.xid, gpu07 withheld by a cap of 2, gpu01 lifted, gpu05
    left as its operator cordoned it; bug reports from gpu03 (cut) and gpu04 (timed out, nothing kept)."""
    results = json.loads(RUN.read_text())
    entries: list[dict[str, Any]] = []
    for node in ("gpu03", "gpu04"):
        state = k8s_nodes.NodeState(node, unschedulable=False)
        entries += _logged(node, k8s_nodes.quarantine_steps(state, ["gpu.xid"], "r1", NOW, "m"), ["gpu.xid"])
    for step in ("taint", "cordon"):
        entries.append(
            record("kubernetes", "gpu07", step, WITHHELD, why="gpu.memory", detail="beyond the quarantine cap",
                   hosts=["gpu07"], checks=["gpu.memory"])
        )  # fmt: skip
    lifted = k8s_nodes.NodeState(
        "gpu01",
        unschedulable=True,
        taints=((k8s_nodes.TAINT_KEY, "gpu.xid", k8s_nodes.TAINT_EFFECT),),
        ours={"cordoned": True},
    )
    entries += _logged("gpu01", k8s_nodes.lift_steps(lifted, "m", NOW), [])
    entries += _logged("gpu05", k8s_nodes.lift_steps(k8s_nodes.NodeState("gpu05", True), "m", NOW), [])
    results["quarantine"] = entries
    taken = [Candidate("gpu03", ("gpu.xid",)), Candidate("gpu04", ("gpu.xid",))]
    results["checks"].append(
        cap_finding(
            taken, [Candidate("gpu07", ("gpu.memory",))], Cap(2), 20, "cordoned and tainted"
        ).to_dict()
    )
    results["bug_report"] = [
        {"host": "gpu03", "checks": ["gpu.xid"], "evidence": "raw/gpu03/nvidia-bug-report.log.gz",
         "timeout_s": 300.0, "seconds": 71.2, "bytes": 64 << 20, "size": 90 << 20, "truncated": True,
         "state": "truncated", "detail": f"the log has {90 << 20} bytes: its first {64 << 20} kept"},
        {"host": "gpu04", "checks": ["gpu.xid"], "evidence": None, "timeout_s": 300.0, "seconds": 300.0,
         "state": "timed_out", "detail": "stopped after 300 s (bug_report_timeout_s)"},
    ]  # fmt: skip
    return results


def test_each_node_folds_to_one_outcome() -> None:
    outcomes = {a.node: (a.outcome, a.verbs) for a in node_actions(acted_run())}
    assert outcomes == {
        "gpu03": ("out", "cordoned and tainted"),
        "gpu04": ("out", "cordoned and tainted"),
        "gpu07": ("withheld", "withheld"),
        "gpu01": ("lifted", "lifted"),
        "gpu05": ("left", "left to its operator"),
    }


def test_the_terminal_says_what_was_done_in_at_most_three_lines() -> None:
    lines = acted_lines(acted_run())
    assert lines == [
        "diagnose: cordoned and tainted gpu[03-04] (gpu.xid); withheld gpu07 (quarantine cap 2 reached: "
        "see quarantine.cap); lifted gpu01",
        "diagnose: left gpu05 as an operator set it",
        "diagnose: bug report from gpu03: raw/gpu03/nvidia-bug-report.log.gz (cut at 64 MiB); "
        "no bug report from gpu04 (timed out)",
    ]
    out = Path("/runs/x")
    summary = summary_lines(acted_run(), out, [out / "results.json"])
    assert summary[-4:] == [*lines, "  /runs/x/results.json"]


def test_a_refused_step_and_a_kept_cordon_are_named() -> None:
    results = {
        "checks": [],
        "quarantine": [
            record("kubernetes", "gpu09", "annotate", "done", checks=["gpu.xid"]),
            record("kubernetes", "gpu09", "taint", "failed", detail="forbidden", checks=["gpu.xid"]),
            record(
                "kubernetes", "gpu02", "cordon", "kept", detail="as an earlier run left it, beyond the cap"
            ),
            record("slurm", "gpu11", "drain", "done", why="diagnose: gpu.xid", checks=["gpu.xid"]),
            record("kubernetes", "gpu12", "taint", "done", checks=["gpu.xid"]),
            record("kubernetes", "gpu12", "cordon", "left", by="operator", checks=["gpu.xid"]),
        ],
    }
    assert acted_lines(results) == [
        "diagnose: kept cordoned gpu02; drained gpu11 (gpu.xid); tainted gpu12 (gpu.xid; cordoned by an operator)",
        "diagnose: could not taint gpu09 (gpu.xid)",
    ]


def test_a_run_that_acted_on_no_node_prints_and_renders_nothing_of_it(tmp_path: Path) -> None:
    results = json.loads(RUN.read_text())
    assert acted_lines(results) == [] and build_quarantine(results) is None
    assert acted_lines(results | {"quarantine": [], "bug_report": []}) == []
    lines = summary_lines(results, Path("/r"), [])
    assert results["verdict"] == "PASS" and len(lines) == 2
    (written,) = render_from_dict(results, {"html"}, tmp_path)
    assert 'id="quarantine"' not in written.read_text()
    assert "diagnose_quarantined_nodes" not in render_prometheus(results).decode()


def test_the_report_chapter_lists_the_nodes_and_links_the_bug_report(tmp_path: Path) -> None:
    (written,) = render_from_dict(acted_run(), {"html"}, tmp_path)
    html = written.read_text()
    assert re.search(r"<h2>\d+ Nodes diagnose acted on: cordons, drains, bug reports</h2>", html)
    assert re.search(r'<a href="#quarantine"><span class="toc-n">\d+</span>', html)
    chapter = html.split('<section class="chapter" id="quarantine">')[1].split("</section>")[0]
    assert "2 taken out, 1 withheld (cap), 1 lifted, 1 left to its operator." in chapter
    rows = re.findall(r"<tr>\s*<td class=\"mono\">(gpu\d+)", chapter)
    assert rows == ["gpu03", "gpu04", "gpu07", "gpu01", "gpu05", "gpu03", "gpu04"]
    assert '<a href="raw/gpu03/nvidia-bug-report.log.gz">raw/gpu03/nvidia-bug-report.log.gz</a>' in chapter
    assert "64 MiB of 90 MiB (cut)" in chapter and "stopped after 300 s (bug_report_timeout_s)" in chapter
    assert "uncordon left by operator: unschedulable, not by diagnose" in chapter


def test_an_evidence_path_outside_raw_is_shown_not_linked() -> None:
    results = {
        "bug_report": [{"host": "h", "state": "collected", "evidence": "../../etc/passwd", "bytes": 1}]
    }
    view = build_quarantine(results)
    assert view is not None and view.bug_reports[0].link is None
    assert view.bug_reports[0].evidence == "../../etc/passwd"


def test_prometheus_counts_the_nodes_by_scheduler_and_outcome() -> None:
    text = render_prometheus(acted_run()).decode()
    gauges = sorted(line for line in text.splitlines() if line.startswith("diagnose_quarantined_nodes{"))
    assert gauges == [
        'diagnose_quarantined_nodes{scheduler="kubernetes",state="left"} 1.0',
        'diagnose_quarantined_nodes{scheduler="kubernetes",state="lifted"} 1.0',
        'diagnose_quarantined_nodes{scheduler="kubernetes",state="out"} 2.0',
        'diagnose_quarantined_nodes{scheduler="kubernetes",state="withheld"} 1.0',
    ]
    assert "# TYPE diagnose_quarantined_nodes gauge" in text


def test_several_bug_reports_name_the_cut_and_the_partial_ones() -> None:
    reports = [
        {"host": "g-xid", "state": "collected", "evidence": "raw/g-xid/nvidia-bug-report.log.gz", "bytes": 9},
        {"host": "g-big", "state": "truncated", "evidence": "raw/g-big/nvidia-bug-report.log.gz",
         "bytes": 4096, "size": 9000, "truncated": True},
        {"host": "g-hang", "state": "timed_out", "evidence": "raw/g-hang/nvidia-bug-report.log.gz", "bytes": 20},
        {"host": "g-old", "state": "missing", "evidence": None},
    ]  # fmt: skip
    assert acted_lines({"bug_report": reports}) == [
        "diagnose: bug reports from g-big, g-hang, g-xid: raw/<host>/nvidia-bug-report.log.gz (g-big cut at "
        "4 KiB; g-hang timed out: partial); no bug report from g-old (missing)"
    ]
    view = build_quarantine({"bug_report": reports})
    assert view is not None and [r.status for r in view.bug_reports] == ["PASS", "WARN", "WARN", "ERROR"]


def test_a_large_quarantine_shows_the_first_rows_and_counts_the_rest(tmp_path: Path) -> None:
    entries = [record("slurm", f"n{i:04d}", "drain", "done", checks=["gpu.xid"]) for i in range(450)]
    view = build_quarantine({"quarantine": entries})
    assert view is not None and len(view.nodes) == 200 and view.more_nodes == 250
    assert view.nodes[0].node == "n0000" and view.counts == {"taken out": 450}
    assert acted_lines({"quarantine": entries}) == ["diagnose: drained n[0000-0449] (gpu.xid)"]
    results = json.loads(RUN.read_text()) | {"quarantine": entries}
    (written,) = render_from_dict(results, {"html"}, tmp_path)
    assert "250 more nodes in results.json's quarantine list." in written.read_text()
