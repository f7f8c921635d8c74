"""Real runs across two hosts carved out of one lent 4× H200 (tests/fixtures/gpu_runs/h200x4-two-hosts-2026-11-27,
README.md there; docs/validation.md, issue 34): healthy, a foreign matmul loop on one host's GPU, and SIGINT
during the cross-node all_reduce. Each claim is made again from what the run recorded, so a change of the
judges or the causes that would have told the operator otherwise fails here. What only the harness saw (the
processes left in each host) no product code can make again: that test is marked ``record`` and is not
counted among the product's tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from diagnose.checks import gpu_processes
from diagnose.commands.run import interrupted_lines, summary_lines
from diagnose.config.profile_files import load_profile
from diagnose.core.model import CommandOutput
from diagnose.core.vars import Vars
from diagnose.engine.results import verdict_of
from diagnose.render.causes import causes_json
from tests.support.terminal import agrees_with_capture

CAPTURED = Path(__file__).resolve().parents[2] / "fixtures" / "gpu_runs" / "h200x4-two-hosts-2026-11-27"
PROFILE = "single-node-nvlink"


def _load(name: str) -> dict[str, Any]:
    return json.loads((CAPTURED / name).read_text())


def _not_pass(document: dict[str, Any]) -> list[tuple[str, str | None]]:
    return [(c["id"], c.get("host")) for c in document["checks"] if c["status"] in ("FAIL", "WARN", "ERROR")]


def test_two_hosts_healthy_pass_with_nothing_false_and_nccl_crosses_between_them() -> None:
    document = _load("healthy_results.json")
    assert document["verdict"] == "PASS" and _not_pass(document) == [] and causes_json(document) == []
    assert sorted(h["name"] for h in document["hosts"]) == ["node1", "node2"]
    (bench,) = document["benchmarks"]
    assert (bench["nodes"], bench["ranks"], bench["status"], bench["expected_busbw_gbps"]) == (
        2,
        4,
        "PASS",
        4.5,
    )
    assert bench["transport"] == {"inter_node": "NET/Socket", "intra_node": ["P2P/CUMEM"], "gdrdma": False}
    pairs = {(r["scope"], tuple(r["transport"])) for r in document["inference"]}
    assert pairs == {("intra-node", ("P2P/CUMEM",)), ("inter-node", ("NET/Socket",))}
    harness = _load("healthy_harness.json")
    assert (harness["rc"], harness["left_running"]) == (0, {"node1": [], "node2": []})
    out = Path("/var/tmp/g/healthy/run")
    printed = summary_lines(document, out, [out / n for n in ("results.json", "report.html", "junit.xml")])
    captured = (CAPTURED / "healthy_terminal.txt").read_text().splitlines()
    start = next(i for i, line in enumerate(captured) if line.startswith("diagnose: PASS"))
    assert agrees_with_capture(
        printed, [line for line in captured[start:] if not line.startswith("gpuhosts:")]
    )


def test_a_foreign_process_no_host_can_list_is_one_cause_on_its_host_and_nothing_on_the_other() -> None:
    """Recorded before gpu.processes read a busy GPU with no visible process: its rows are judged again from the
    raw outputs the run kept, and the causes made again from the rows."""
    document = _load("hog_results.json")
    before = causes_json(document)
    assert before[0]["check"] == "gpu.gemm" and "gpu.processes" not in {c["check"] for c in before}, (
        "what the run printed: no root"
    )
    for row in document["checks"]:
        if row["id"] == "gpu.processes":
            raw = CAPTURED / "hog_raw" / row["host"]
            outputs = {
                name: CommandOutput(stdout=(raw / f"{name}.txt").read_text(), exit_code=0)
                for name in ("compute_apps", "gpu_query", "gpu_visibility")
            }
            host_vars = Vars({**load_profile(PROFILE).vars, "diagnose_profile": PROFILE}, host=row["host"])
            outcome = gpu_processes.judge(gpu_processes.parse(outputs, host_vars), host_vars)
            row.update(status=outcome.status, message=outcome.message, observed=outcome.observed)
    (cause,) = causes_json(document)
    assert (cause["check"], cause["hosts"], cause["status"]) == ("gpu.processes", ["node2"], "FAIL")
    under = {(c["id"], c["host"]) for c in cause["consequences"]}
    assert {
        ("gpu.gemm", "node2"),
        ("gpu.hbm", "node2"),
        ("fleet.busbw", None),
        ("bench.all_reduce", None),
    } <= under
    assert [key for key in _not_pass(document) if key[1] == "node1"] == [], "node1 is accused of nothing"


def test_sigint_during_the_cross_node_all_reduce_stops_both_hosts_and_exits_130() -> None:
    """The lines the operator read after Ctrl-C made again from what the run recorded of its stop (``stopped``,
    no ``not_stopped``), and the verdict from its rows: an interrupted run is never PASS, whatever it found."""
    document = _load("sigint_results.json")
    run = document["run"]
    assert run["interrupted"] is True and "not_stopped" not in run
    assert verdict_of(document["checks"], document["benchmarks"], run["interrupted"]) == document["verdict"]
    assert document["verdict"] == "INCOMPLETE"
    assert verdict_of(document["checks"], document["benchmarks"]) == "PASS", "nothing failed before the stop"
    printed = interrupted_lines(Path("/var/tmp/g/sigint/run/results.json"), run["stopped"], [])
    captured = (CAPTURED / "sigint_terminal.txt").read_text().splitlines()
    start = next(i for i, line in enumerate(captured) if line.startswith("diagnose: interrupted"))
    assert printed == [line for line in captured[start:] if not line.startswith("gpuhosts:")]
    assert printed[1:3] == [
        "diagnose: stopped torchrun (main) on node1: 4 processes stopped",
        "diagnose: stopped torchrun (main) on node2: 4 processes stopped",
    ]
    assert printed[-1] == "diagnose: everything started on the hosts was stopped"


@pytest.mark.record
def test_sigint_left_no_process_of_the_run_in_either_host() -> None:
    """A record of the run, not a test of diagnose: the signal, the exit status and the processes left are
    what the harness did and saw in each host afterwards."""
    harness = _load("sigint_harness.json")
    assert harness["rc"] == 130 and harness["left_running"] == {"node1": [], "node2": []}
    assert [a["action"] for a in harness["actions"]] == ["sigint"]
