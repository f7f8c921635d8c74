"""``diagnose run --k8s-cordon`` against the fake API server of tests/support/kubekit.py: a node under a pod
whose checks FAIL is annotated, tainted, cordoned and given a DiagnoseHealthy=False condition; a later healthy
run lifts exactly that; an operator's cordon and taint are never touched; beyond the quarantine cap nodes are
reported, not cordoned, with one cluster-wide finding. Every kubectl command line diagnose built is handed to
Debian's real kubectl parser.

Pods enter real sshd test hosts (tests/support/testbed.py): one healthy 8x H100 NDR node and one with
mlx5_9 Down (tests/support/hostkit.py), so ib.port_state FAILs in every pod that enters it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.hostkit import PROFILE, healthy_h100, port_down
from tests.support.kubekit import FakeCluster, FakeNode, FakePod, parses_with_real_kubectl, real_kubectl
from tests.support.paths import REPO
from tests.support.testbed import TestBed, TestHost

pytestmark = pytest.mark.integration

OPERATOR_TAINT = {"key": "maintenance", "value": "psu-swap", "effect": "NoSchedule"}
OUR_TAINT = "diagnose.health/unhealthy"
ANNOTATION = "diagnose.health/quarantine"
WRITES = ("cordon", "uncordon", "taint", "annotate", "patch")


def inventory(work: Path, bed: TestBed, name: str, extra: str) -> Path:
    path = work / f"{name}.yaml"
    path.write_text(
        "all:\n  vars:\n"
        f"    ansible_user: root\n    ansible_ssh_private_key_file: {bed.client_key}\n"
        f"    diagnose_known_hosts_file: {bed.known_hosts}\n    diagnose_profile: {PROFILE}\n{extra}"
        "  children:\n    trainers:\n      vars:\n"
        "        diagnose_k8s_selector: app=nccl-train\n        diagnose_k8s_namespace: ml\n"
    )
    return path


def diagnose(work: Path, cluster: FakeCluster, inv: Path, out: str, *flags: str) -> dict[str, Any]:
    playbook = work / "ports.yaml"
    playbook.write_text("name: ports\ndescription: ports\nchecks: [host.reachable, ib.port_state]\n")
    done = subprocess.run(
        [sys.executable, "-m", "diagnose.cli", "run", "-i", str(inv), "--playbook", str(playbook),
         "-o", str(work / out), "--format", "json", *flags],
        cwd=work, env={**cluster.env(), "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr[-3000:]
    results = json.loads((work / out / "results.json").read_text())
    return {"done": done, "results": results}


def pods(healthy: TestHost, faulty: TestHost, layout: dict[str, tuple[str, bool]]) -> list[FakePod]:
    return [
        FakePod(name, faulty if bad else healthy, node, labels={"app": "nccl-train"})
        for name, (node, bad) in layout.items()
    ]


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestBed, TestHost, TestHost, Path]]:
    work = tmp_path_factory.mktemp("k8s-quarantine")
    with TestBed(work / "bed") as test_bed:
        healthy, faulty = test_bed.add_many([healthy_h100("k-ok"), port_down("k-bad")])
        yield test_bed, healthy, faulty, work


@pytest.fixture(scope="module")
def lifecycle(bed: tuple[TestBed, TestHost, TestHost, Path]) -> dict[str, Any]:
    """Run 1 with faults on node-b (schedulable) and node-d (cordoned and tainted by an operator), node-c
    cordoned by an operator and healthy; then both faults repaired and run 2."""
    test_bed, healthy, faulty, work = bed
    layout = {"train-a": ("node-a", False), "train-b": ("node-b", True), "train-c": ("node-c", False),
              "train-d": ("node-d", True)}  # fmt: skip
    nodes = [
        FakeNode("node-a"),
        FakeNode("node-b"),
        FakeNode("node-c", unschedulable=True),
        FakeNode("node-d", unschedulable=True, taints=[dict(OPERATOR_TAINT)]),
    ]
    cluster = FakeCluster(test_bed, work / "kube-life", pods(healthy, faulty, layout), nodes=nodes)
    inv = inventory(work, test_bed, "life", "    max_quarantine_pct: 100\n")
    before = {n: cluster.node(n) for n in ("node-a", "node-b", "node-c", "node-d")}
    first = diagnose(work, cluster, inv, "run1", "--k8s-cordon")
    after_first = {n: cluster.node(n) for n in before}
    cluster.enter(test_bed, "train-b", healthy)
    cluster.enter(test_bed, "train-d", healthy)
    second = diagnose(work, cluster, inv, "run2", "--k8s-cordon")
    after_second = {n: cluster.node(n) for n in before}
    return {"cluster": cluster, "work": work, "before": before, "first": first, "after_first": after_first,
            "second": second, "after_second": after_second}  # fmt: skip


def taints(node: dict[str, Any]) -> list[dict[str, str]]:
    return [{k: t[k] for k in ("key", "value", "effect") if k in t} for t in node["spec"].get("taints", [])]


def condition(node: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in node["status"]["conditions"] if c["type"] == "DiagnoseHealthy"), None)


def entries(run: dict[str, Any], node: str) -> dict[str, tuple[str, str]]:
    return {
        e["step"]: (e["state"], e["by"]) for e in run["results"].get("quarantine", []) if e["node"] == node
    }


def test_failing_node_is_annotated_tainted_cordoned_and_conditioned(lifecycle: dict[str, Any]) -> None:
    first = lifecycle["first"]
    assert first["done"].returncode == 1
    node = lifecycle["after_first"]["node-b"]
    assert node["spec"]["unschedulable"] is True
    assert {"key": OUR_TAINT, "value": "ib.port_state", "effect": "NoSchedule"} in taints(node)
    note = json.loads(node["metadata"]["annotations"][ANNOTATION])
    assert note["cordoned"] is True and note["checks"] == ["ib.port_state"]
    assert note["run"] == first["results"]["run"]["id"]
    assert note["taint"] == f"{OUR_TAINT}=ib.port_state:NoSchedule"
    cond = condition(node)
    assert cond is not None and (cond["status"], cond["reason"]) == ("False", "ChecksFailed")
    assert "ib.port_state" in cond["message"] and "train-b" in cond["message"]
    assert entries(first, "node-b") == {
        "annotate": ("done", "diagnose"), "taint": ("done", "diagnose"), "cordon": ("done", "diagnose"),
        "condition": ("done", "diagnose"),
    }  # fmt: skip
    cap = [c for c in first["results"]["checks"] if c["id"] == "quarantine.cap"]
    assert len(cap) == 1 and cap[0]["status"] == "PASS" and cap[0]["host"] is None


def test_an_operators_cordon_and_taint_are_left_alone(lifecycle: dict[str, Any]) -> None:
    node = lifecycle["after_first"]["node-d"]
    assert node["spec"]["unschedulable"] is True
    assert OPERATOR_TAINT in taints(node)
    note = json.loads(node["metadata"]["annotations"][ANNOTATION])
    assert note["cordoned"] is False  # it was unschedulable before diagnose came
    assert entries(lifecycle["first"], "node-d")["cordon"] == ("left", "operator")
    # A healthy node an operator cordoned is not touched at all.
    assert lifecycle["after_first"]["node-c"] == lifecycle["before"]["node-c"]
    assert entries(lifecycle["first"], "node-c") == {"uncordon": ("left", "operator")}
    assert lifecycle["after_first"]["node-a"] == lifecycle["before"]["node-a"]


def test_a_later_healthy_run_lifts_only_what_diagnose_set(lifecycle: dict[str, Any]) -> None:
    second = lifecycle["second"]
    assert second["done"].returncode == 0, second["done"].stdout[-2000:]
    node_b = lifecycle["after_second"]["node-b"]
    assert not node_b["spec"].get("unschedulable")
    assert taints(node_b) == []
    assert ANNOTATION not in node_b["metadata"]["annotations"]
    cond = condition(node_b)
    assert cond is not None and (cond["status"], cond["reason"]) == ("True", "ChecksPassed")
    assert entries(second, "node-b") == {
        "condition": ("done", "diagnose"), "uncordon": ("done", "diagnose"), "untaint": ("done", "diagnose"),
        "unannotate": ("done", "diagnose"),
    }  # fmt: skip
    node_d = lifecycle["after_second"]["node-d"]
    assert node_d["spec"]["unschedulable"] is True  # the operator's cordon stays
    assert [t for t in taints(node_d) if t["key"] != "node.kubernetes.io/unschedulable"] == [OPERATOR_TAINT]
    assert ANNOTATION not in node_d["metadata"]["annotations"]
    assert entries(second, "node-d")["uncordon"] == ("left", "operator")
    assert lifecycle["after_second"]["node-c"] == lifecycle["before"]["node-c"]


def test_every_command_line_parses_with_the_real_kubectl(lifecycle: dict[str, Any], tmp_path: Path) -> None:
    kubectl = real_kubectl()
    calls = [c for c in lifecycle["cluster"].calls() if any(w in c for w in (*WRITES, "node", "nodes"))]
    assert {next(w for w in c if not w.startswith("-")) for c in calls} >= {"get", "cordon", "uncordon", "taint",
                                                                             "annotate", "patch"}  # fmt: skip
    for argv in calls:
        ok, said = parses_with_real_kubectl(kubectl, ["kubectl", *argv], tmp_path)
        assert ok, (argv, said)


def test_without_the_flag_no_node_is_changed(bed: tuple[TestBed, TestHost, TestHost, Path]) -> None:
    test_bed, healthy, faulty, work = bed
    cluster = FakeCluster(test_bed, work / "kube-off", pods(healthy, faulty, {"off-b": ("node-x", True)}))
    run = diagnose(work, cluster, inventory(work, test_bed, "off", ""), "off")
    assert run["done"].returncode == 1
    assert not [c for c in cluster.calls() if any(w in c for w in WRITES)]
    assert "quarantine" not in run["results"]


def test_beyond_the_cap_nodes_are_reported_not_cordoned(
    bed: tuple[TestBed, TestHost, TestHost, Path],
) -> None:
    test_bed, healthy, faulty, work = bed
    layout = {"cap-1": ("gpu-1", True), "cap-2": ("gpu-2", True), "cap-3": ("gpu-3", True),
              "cap-4": ("gpu-4", False)}  # fmt: skip
    cluster = FakeCluster(test_bed, work / "kube-cap", pods(healthy, faulty, layout))
    run = diagnose(
        work, cluster, inventory(work, test_bed, "cap", "    max_quarantine: 2\n"), "cap", "--k8s-cordon"
    )
    assert [cluster.node(n)["spec"].get("unschedulable", False) for n in ("gpu-1", "gpu-2", "gpu-3", "gpu-4")] == [
        True, True, False, False,
    ]  # fmt: skip
    assert ANNOTATION not in cluster.node("gpu-3")["metadata"]["annotations"]
    assert entries(run, "gpu-3") == {"taint": ("withheld", "diagnose"), "cordon": ("withheld", "diagnose")}
    cap = [c for c in run["results"]["checks"] if c["id"] == "quarantine.cap"]
    assert len(cap) == 1 and cap[0]["status"] == "FAIL" and cap[0]["host"] is None
    assert cap[0]["observed"]["taken"] == ["gpu-1", "gpu-2"] and cap[0]["observed"]["withheld"] == ["gpu-3"]
    assert "2 cordoned and tainted, 1 reported only (gpu-3)" in cap[0]["message"]
    assert "shared cause" in cap[0]["message"]


def test_a_bad_cap_is_refused_before_any_host_is_touched(
    bed: tuple[TestBed, TestHost, TestHost, Path],
) -> None:
    test_bed, healthy, faulty, work = bed
    cluster = FakeCluster(test_bed, work / "kube-bad", pods(healthy, faulty, {"bad-1": ("node-z", True)}))
    inv = inventory(work, test_bed, "badcap", "    max_quarantine_pct: 150\n")
    done = subprocess.run(
        [sys.executable, "-m", "diagnose.cli", "run", "-i", str(inv), "--k8s-cordon", "-o", str(work / "badcap")],
        cwd=work, env={**cluster.env(), "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert f"{inv}:7:" in done.stderr and "max_quarantine_pct must be between 0 and 100" in done.stderr
    assert not [c for c in cluster.calls() if any(w in c for w in WRITES)]


def test_check_lists_the_policy_the_eligible_nodes_and_the_cap(
    bed: tuple[TestBed, TestHost, TestHost, Path],
) -> None:
    test_bed, healthy, faulty, work = bed
    layout = {f"plan-{i}": (f"gpu-{i % 3}", i == 0) for i in range(5)}
    cluster = FakeCluster(test_bed, work / "kube-plan", pods(healthy, faulty, layout))
    inv = inventory(work, test_bed, "plan", "    max_quarantine: 1\n    collect_bug_report: true\n")
    done = subprocess.run(
        [sys.executable, "-m", "diagnose.cli", "run", "-i", str(inv), "--k8s-cordon", "--check"],
        cwd=work, env={**cluster.env(), "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "\nacting on nodes:\n" in text
    assert f"the taint {OUR_TAINT}=<check>:NoSchedule" in text
    assert "  eligible: 3 nodes under 5 pods: gpu-0, gpu-1, gpu-2\n" in text
    assert "  quarantine cap: at most 1 of 3 selected nodes (max_quarantine 1); beyond it" in text
    assert "  bug reports: nvidia-bug-report.sh on each of 5 hosts with collect_bug_report" in text
    assert "at most 5 min 00 s and 64 MiB each" in text
    assert not [c for c in cluster.calls() if any(w in c for w in WRITES)]


def test_the_summary_says_what_was_done_to_the_nodes(lifecycle: dict[str, Any]) -> None:
    """diagnose/render/acted.py on the real runs: after the causes, what was cordoned, left and lifted."""
    first = lifecycle["first"]["done"].stdout.splitlines()
    assert (
        "diagnose: cordoned and tainted node-b (ib.port_state); tainted node-d (ib.port_state; cordoned by an "
        "operator)" in first
    )
    assert "diagnose: left node-c as an operator set it" in first
    second = lifecycle["second"]["done"].stdout.splitlines()
    assert "diagnose: lifted node-b, node-d" in second
