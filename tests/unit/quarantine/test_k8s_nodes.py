"""The Kubernetes node policy (pure): what a node object says, the steps a failing or healthy node gets, and
the cordon stage over a kubectl that refuses a change (RBAC without patch on nodes)."""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Sequence
from typing import Any

import pytest

from diagnose.core.hosts import Host
from diagnose.core.vars import Vars
from diagnose.k8s.nodes import ANNOTATION, TAINT_KEY, lift_steps, node_state, quarantine_steps, taint_value
from diagnose.quarantine.kubernetes import CordonStage, node_findings
from tests.support.paths import FIXTURES

NODE = json.loads((FIXTURES / "k8s" / "gpu-node.json").read_text())
NOW = "2026-11-25T17:00:00Z"


def node(
    unschedulable: bool = False, taints: list[dict[str, str]] | None = None, ours: Any = None
) -> dict[str, Any]:
    obj = copy.deepcopy(NODE)
    if unschedulable:
        obj["spec"]["unschedulable"] = True
    if taints:
        obj["spec"]["taints"] = taints
    if ours is not None:
        obj["metadata"]["annotations"][ANNOTATION] = ours if isinstance(ours, str) else json.dumps(ours)
    return obj


def test_node_state_reads_the_fixture() -> None:
    state = node_state(NODE)
    assert (state.name, state.unschedulable, state.taints, state.ours, state.condition) == (
        "gpu-node-a", False, (), None, None,
    )  # fmt: skip
    broken = node_state(node(ours="{not json"))
    assert broken.ours == {}  # present but unreadable: still diagnose's, lifted on a healthy run


def test_taint_value_is_a_label_value() -> None:
    assert taint_value("gpu.xid") == "gpu.xid"
    assert taint_value("custom.site::test_fan") == "custom.site_test_fan"
    assert len(taint_value("x" * 100)) == 63
    assert taint_value("") == "failed"


def test_fresh_failing_node_gets_annotation_first_then_taint_cordon_condition() -> None:
    steps = quarantine_steps(
        node_state(NODE), ["gpu.xid", "ib.port_state"], "20261125T170000Z-ab12", NOW, "m"
    )
    assert [s.step for s in steps] == ["annotate", "taint", "cordon", "condition"]
    assert all(s.state == "done" and s.by == "diagnose" for s in steps)
    note = json.loads(steps[0].argv[-1].partition("=")[2])
    assert note == {"cordoned": True, "taint": f"{TAINT_KEY}=gpu.xid:NoSchedule", "run": "20261125T170000Z-ab12",
                    "checks": ["gpu.xid", "ib.port_state"], "since": NOW}  # fmt: skip
    assert steps[1].argv == ("taint", "node", "gpu-node-a", f"{TAINT_KEY}=gpu.xid:NoSchedule", "--overwrite")
    assert steps[2].argv == ("cordon", "gpu-node-a")
    patch = json.loads(steps[3].argv[-1])["status"]["conditions"][0]
    assert (patch["type"], patch["status"], patch["reason"]) == ("DiagnoseHealthy", "False", "ChecksFailed")


def test_operator_cordon_is_not_claimed_and_an_earlier_quarantine_is_kept() -> None:
    operator = quarantine_steps(node_state(node(unschedulable=True)), ["gpu.xid"], "r", NOW, "m")
    assert json.loads(operator[0].argv[-1].partition("=")[2])["cordoned"] is False
    assert (operator[2].step, operator[2].state, operator[2].by, operator[2].argv) == (
        "cordon",
        "left",
        "operator",
        (),
    )
    held = node(True, [{"key": TAINT_KEY, "value": "gpu.xid", "effect": "NoSchedule"}],
                {"cordoned": True, "taint": f"{TAINT_KEY}=gpu.xid:NoSchedule", "since": "2026-11-01T00:00:00Z"})  # fmt: skip
    steps = quarantine_steps(node_state(held), ["gpu.xid"], "r2", NOW, "m")
    assert [(s.step, s.state) for s in steps] == [("annotate", "done"), ("taint", "kept"), ("cordon", "kept"),
                                                  ("condition", "done")]  # fmt: skip
    assert json.loads(steps[0].argv[-1].partition("=")[2])["since"] == "2026-11-01T00:00:00Z"


def test_lift_undoes_only_what_the_annotation_says() -> None:
    ours = node(True, [{"key": TAINT_KEY, "value": "gpu.xid", "effect": "NoSchedule"},
                       {"key": "maintenance", "value": "x", "effect": "NoSchedule"}], {"cordoned": True})  # fmt: skip
    steps = lift_steps(node_state(ours), "m", NOW)
    assert [s.argv[:1] for s in steps] == [("patch",), ("uncordon",), ("taint",), ("annotate",)]
    assert steps[2].argv[-1] == f"{TAINT_KEY}:NoSchedule-"
    assert steps[-1].argv[-1] == f"{ANNOTATION}-"
    claimed_not = lift_steps(node_state(node(True, None, {"cordoned": False})), "m", NOW)
    assert [(s.step, s.state) for s in claimed_not] == [("condition", "done"), ("uncordon", "left"),
                                                        ("unannotate", "done")]  # fmt: skip
    assert [(s.step, s.by) for s in lift_steps(node_state(node(True)), "m", NOW)] == [
        ("uncordon", "operator")
    ]
    assert lift_steps(node_state(NODE), "m", NOW) == []


def pod(name: str, node_name: str) -> Host:
    return Host(
        name, ["pods"], Vars({"ansible_connection": "kubectl", "diagnose_k8s_node": node_name}, host=name)
    )


def test_findings_skip_checks_about_the_pod_and_need_every_pod_judged() -> None:
    hosts = [pod("p1", "n1"), pod("p2", "n1"), pod("p3", "n2"), pod("p4", "n3")]
    rows = [
        {"id": "host.reachable", "host": "p1", "status": "PASS"},
        {"id": "gpu.xid", "host": "p1", "status": "FAIL"},
        {"id": "k8s.resources", "host": "p3", "status": "FAIL"},
        {"id": "host.reachable", "host": "p3", "status": "PASS"},
        {"id": "host.reachable", "host": "p4", "status": "FAIL"},
    ]
    found = node_findings(hosts, rows)
    assert found["n1"].failed == ["gpu.xid"] and found["n1"].hosts == ["p1", "p2"]
    assert found["n2"].failed == [] and found["n2"].healthy
    assert not found["n3"].healthy  # a pod that could not be entered says nothing either way


class Kubectl:
    """Answers reads with the fixture node, refuses every change with kubectl's Forbidden line."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
        self.calls.append(list(argv))
        if "get" in argv:
            return subprocess.CompletedProcess(list(argv), 0, json.dumps(NODE), "")
        said = (
            'Error from server (Forbidden): nodes "gpu-node-a" is forbidden: User "ci" cannot patch resource'
        )
        return subprocess.CompletedProcess(list(argv), 1, "", said + "\n")


def test_a_refused_change_is_recorded_and_stops_that_nodes_steps() -> None:
    kubectl = Kubectl()
    stage = CordonStage([pod("p1", "gpu-node-a")], "r", run=kubectl, clock=lambda: NOW)
    finding = stage.act([{"id": "gpu.xid", "host": "p1", "status": "FAIL"}])
    assert finding is not None and finding.status == "PASS"
    writes = [c for c in kubectl.calls if "get" not in c]
    assert len(writes) == 1  # the annotation was refused: nothing else was tried
    assert [(r["step"], r["state"]) for r in stage.records] == [
        ("annotate", "failed"), ("taint", "failed"), ("cordon", "failed"), ("condition", "failed"),
    ]  # fmt: skip
    assert "is forbidden" in stage.records[0]["detail"] and "not tried" in stage.records[1]["detail"]


def test_nodes_are_read_in_chunks_and_an_unknown_one_is_recorded() -> None:
    calls: list[list[str]] = []

    def kubectl(argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
        calls.append(list(argv))
        names = [a for a in argv[argv.index("nodes") + 1 : argv.index("-o")] if a != "gone"]
        items = [{**NODE, "metadata": {**NODE["metadata"], "name": n}} for n in names]
        missing = 'Error from server (NotFound): nodes "gone" not found\n' if "gone" in argv else ""
        return subprocess.CompletedProcess(
            list(argv), 1 if missing else 0, json.dumps({"kind": "List", "items": items}), missing
        )

    hosts = [pod(f"p{i}", f"n{i}") for i in range(5)] + [pod("px", "gone")]
    stage = CordonStage(hosts, "r", run=kubectl, clock=lambda: NOW, read_chunk=4)
    finding = stage.act([{"id": "host.reachable", "host": h.name, "status": "PASS"} for h in hosts])
    assert finding is not None and finding.status == "PASS"
    assert len(calls) == 2  # six nodes, four per read; no node carries the annotation, so nothing to lift
    assert stage.records == [
        {"scheduler": "kubernetes", "node": "gone", "step": "read", "state": "failed", "by": "diagnose",
         "detail": "node gone not found"},
    ]  # fmt: skip


def test_cordon_without_any_pod_is_a_usage_error() -> None:
    from diagnose.core.errors import ConfigError
    from diagnose.quarantine.kubernetes import check_cordon_request

    with pytest.raises(ConfigError, match="no host of the run is a pod"):
        check_cordon_request([Host("n1", [], Vars({"ansible_connection": "ssh"}, host="n1"))])
    check_cordon_request([pod("p1", "n1")])
