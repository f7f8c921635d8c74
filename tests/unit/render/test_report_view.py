"""What the report shows, before any rendering (diagnose.render.view)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from diagnose.render.load import clean_tree, normalize
from diagnose.render.view import build_cover, build_report
from diagnose.render.view_benchmarks import build_benchmarks
from diagnose.render.view_environment import build_environment
from diagnose.render.view_findings import build_matrix
from tests.support.paths import FIXTURES

RESULTS = FIXTURES / "results"


def _load(name: str) -> dict[str, Any]:
    return normalize(clean_tree(json.loads((RESULTS / name).read_text())))


def test_cover_counts_nodes_gpus_and_statuses() -> None:
    cover = build_cover(_load("cluster_failures.json"))
    assert (cover.nodes, cover.reachable, cover.gpus) == (8, 7, 56)
    assert cover.verdict == "FAIL"
    assert cover.counts["FAIL"] == 8 and cover.counts["WARN"] == 2
    assert cover.operator == "mlopez@ctl01"
    assert cover.started == "2025-03-14 02:15:00 UTC"
    assert cover.duration == "8 min 41 s"
    assert cover.unreachable == "gpu07"


def test_operator_falls_back_to_the_login_user(monkeypatch: Any) -> None:
    results = _load("h200_local.json")
    monkeypatch.setenv("USER", "alice")
    assert build_cover(results).operator == "alice"


def test_missing_verdict_is_derived_and_said_so() -> None:
    results = _load("cluster_failures.json")
    del results["verdict"]
    cover = build_cover(results)
    assert cover.verdict == "FAIL" and "did not record a verdict" in cover.verdict_note


def test_findings_come_worst_first_with_evidence_excerpts() -> None:
    report = build_report(_load("cluster_failures.json"), RESULTS)
    statuses = [f.status for f in report.findings]
    assert statuses == sorted(statuses, key=["FAIL", "ERROR", "WARN"].index)
    port = next(f for f in report.findings if f.check_id == "ib.port_state")
    (line,) = port.lines
    assert line.hosts == "gpu03" and "mlx5_2" in line.message
    assert "Reseat" in port.remediation
    host, path, anchor = line.evidence[0]
    assert (host, path) == ("gpu03", "raw/gpu03/ibstat.txt") and anchor
    quoted = {a: ex for a, ex, _users in report.evidence.excerpts}
    assert "State: Down" in (quoted[anchor].text or "")


def test_a_finding_line_quotes_its_first_host_and_names_the_next_by_path(tmp_path: Path) -> None:
    """Hosts on one line share check, message, observed and expected: a second quote repeats the first."""
    hosts = ["gpu01", "gpu02", "gpu03", "gpu04"]
    for host in hosts:
        (tmp_path / "raw" / host).mkdir(parents=True)
        (tmp_path / "raw" / host / "ibstat.txt").write_text("CA 'mlx5_2'\n\tPort 1:\n\t\tState: Down\n")
    checks = [
        {
            "id": "ib.port_state",
            "host": h,
            "status": "FAIL",
            "checklist": "1",
            "message": "mlx5_2 port 1 Down",
            "observed": {"mlx5_2": "Down"},
            "expected": "Active",
            "evidence": f"raw/{h}/ibstat.txt",
        }
        for h in hosts
    ]
    results = normalize(
        {"verdict": "FAIL", "hosts": [{"name": h, "reachable": True} for h in hosts], "checks": checks}
    )
    report = build_report(results, tmp_path)
    (finding,) = report.findings
    (line,) = finding.lines
    assert [(host, anchor is not None) for host, _path, anchor in line.evidence] == [
        ("gpu01", True),
        ("gpu02", False),
        ("gpu03", False),
    ]
    assert [path for _host, path, _anchor in line.evidence][1] == "raw/gpu02/ibstat.txt"
    assert line.evidence_more == 1
    assert [ex.path for _a, ex, _users in report.evidence.excerpts] == ["raw/gpu01/ibstat.txt"]
    assert not report.evidence.omitted


def _grid(n_hosts: int, bad: dict[str, str]) -> dict[str, Any]:
    hosts = [f"n{i:03d}" for i in range(1, n_hosts + 1)]
    checks = [
        {
            "id": cid,
            "host": h,
            "checklist": "1",
            "status": bad.get(h, "PASS") if cid == "ib.port_state" else "PASS",
        }
        for h in hosts
        for cid in ("host.reachable", "ib.port_state", "ib.link_rate")
    ]
    return normalize({"hosts": [{"name": h, "reachable": True} for h in hosts], "checks": checks})


def test_matrix_folds_identical_hosts_and_puts_trouble_first() -> None:
    matrix = build_matrix(_grid(512, {"n007": "FAIL", "n300": "FAIL", "n100": "WARN"}))
    assert matrix.columns == ["host.reachable", "ib.port_state", "ib.link_rate"]
    assert [(r.hosts, r.host_count, r.worst) for r in matrix.rows] == [
        ("n[007,300]", 2, "FAIL"),
        ("n100", 1, "WARN"),
        ("n[001-006,008-099,101-299,301-512]", 509, "PASS"),
    ]
    assert matrix.rows[0].cells == ["PASS", "FAIL", "PASS"]


def test_unreachable_host_has_empty_cells() -> None:
    matrix = build_matrix(_load("cluster_failures.json"))
    row = next(r for r in matrix.rows if r.hosts == "gpu07")
    assert row.cells[0] == "FAIL" and set(row.cells[1:]) == {""}


def test_environment_flags_values_that_differ_from_the_majority() -> None:
    env = build_environment(_load("cluster_failures.json"))
    assert env.mismatched == ["NCCL", "torch"]
    odd = next(r for r in env.rows if r.hosts == "gpu04")
    flagged = [value for value, differs in odd.values if differs]
    assert flagged == ["2.21.5", "2.4.1+cu124"]
    assert env.missing == "gpu07"
    p2p = next(v for v in env.nccl_vars if v.name == "NCCL_P2P_DISABLE")
    assert not p2p.uniform and ("1", "gpu06", 1) in p2p.values
    assert next(v for v in env.nccl_vars if v.name == "NCCL_SOCKET_IFNAME").uniform


def test_benchmark_view_has_transport_straggler_and_curve() -> None:
    report = build_report(_load("cluster_failures.json"), RESULTS)
    bench = report.benchmarks[0]
    assert bench.inter_node == "NET/IB" and bench.gdrdma == "yes"
    assert bench.straggler and bench.straggler[0].startswith("gpu05 (FAIL): gpu05 is slow")
    assert report.benchmarks[1].straggler == []  # the pair search was about all_reduce only
    assert bench.normal == (242.2, 327.8)
    assert len(bench.rows) == 24 and bench.rows[0].size == "1 KiB"
    assert any(r.below for r in bench.rows) and not any(r.below for r in report.benchmarks[1].rows)


def test_the_benchmark_view_shows_the_verdict_and_figures_the_run_recorded() -> None:
    results = _load("cluster_failures.json")
    entry = results["benchmarks"][0]
    entry["status"], entry["message"] = "PASS", "as judged when it ran"
    (bench, _) = build_benchmarks(results)
    assert (bench.status, bench.message) == ("PASS", "as judged when it ran")
    assert bench.reference == "expected 285.0 GB/s · normal range 242–328 GB/s from 64 MiB"
    del entry["judged_from_bytes"]  # an older results.json: the size the verdict read from is not recorded
    (bench, _) = build_benchmarks(results)
    assert bench.normal == (242.2, 327.8) and bench.judged_from == "" and not any(r.below for r in bench.rows)
    assert bench.reference == "expected 285.0 GB/s · normal range 242–328 GB/s"
    del entry["normal_range_gbps"]  # older still: no range is made up from today's tolerance
    (bench, _) = build_benchmarks(results)
    assert bench.normal is None and bench.reference == "expected 285.0 GB/s"


def test_history_trend_from_the_history_module_becomes_runs_and_series(tmp_path: Path) -> None:
    from diagnose import history
    from diagnose.render.html import render_html

    db = tmp_path / "history.sqlite"
    base = json.loads((RESULTS / "cluster_failures.json").read_text())
    for night, scale in enumerate((1.0, 1.02, 0.8), start=1):
        doc = json.loads(json.dumps(base))
        doc["run"]["id"] = f"night-{night}"
        doc["run"]["started"] = f"2025-03-{10 + night}T02:15:00+00:00"
        doc["verdict"] = "PASS" if night < 3 else "FAIL"
        for bench in doc["benchmarks"]:
            for row in bench["rows"]:
                row["busbw_gbps"] = round(row["busbw_gbps"] * scale, 2)
        history.record_run(db, doc, tmp_path)
    doc["history"] = {"trend": history.trend_for_report(db, doc)}
    report = build_report(normalize(clean_tree(doc)), RESULTS)
    assert report.history is not None
    assert [run.run_id for run in report.history.runs] == ["night-1", "night-2", "night-3"]
    assert report.history.runs[-1].verdict == "FAIL"
    assert set(report.history.busbw) == {"all_gather", "all_reduce"}
    large = report.history.busbw["all_reduce"]["≥64MiB"]
    assert large[2] is not None and large[0] is not None and large[2] < large[0]
    html = render_html(report)
    assert html.count("<svg") == 2 + len(report.benchmarks) and "night-2" in html
