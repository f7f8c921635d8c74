"""Pods as targets through a fake kubectl (tests/support/kubekit.py) that enters real sshd test hosts: the same
checks, discovery by label selector, unreachable pods, refused options, Ctrl-C and a benchmark."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.bedhosts import command_lines, wait_until
from tests.support.kubekit import FakeCluster, FakePod, parses_with_real_kubectl, real_kubectl
from tests.support.paths import REPO
from tests.support.playbooks import GLOO_BENCH, PORTS_ONLY, write_playbook
from tests.support.testbed import HostSpec, Reply, TestBed

pytestmark = pytest.mark.integration


def _argv(tmp_path: Path, inventory: Path, text: str, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "diagnose.cli", "run", "-i", str(inventory),
        "--playbook", str(write_playbook(tmp_path, text)), "-o", str(tmp_path / "out"), "--format", "json", *extra,
    ]  # fmt: skip


def run_with(cluster: FakeCluster, tmp_path: Path, inventory: Path, text: str = PORTS_ONLY, *extra: str):  # type: ignore[no-untyped-def]
    env = {**cluster.env(), "PYTHONPATH": str(REPO)}
    argv = _argv(tmp_path, inventory, text, *extra)
    return subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def pods_inventory(path: Path, pods: list[str], **common: object) -> Path:
    hosts = "".join(f"        {p}:\n" for p in pods)
    extra = "".join(f"    {k}: {json.dumps(v)}\n" for k, v in common.items())
    path.write_text(
        f"all:\n  vars:\n    ansible_connection: kubectl\n    ansible_kubectl_namespace: ml\n{extra}"
        f"  children:\n    gpu:\n      hosts:\n{hosts}"
    )
    return path


def results(tmp_path: Path) -> dict:  # type: ignore[type-arg]
    return json.loads((tmp_path / "out" / "results.json").read_text())


def test_checks_run_in_two_pods_as_over_ssh_and_every_command_line_parses(
    testbed: TestBed, tmp_path: Path
) -> None:
    a, b = testbed.add_many([HostSpec("node1"), HostSpec("node2")])
    cluster = FakeCluster(
        testbed, tmp_path / "k", [FakePod("train-0", a, "gpu-node-a"), FakePod("train-1", b, "gpu-node-b")]
    )
    inventory = pods_inventory(
        tmp_path / "inv.yaml", ["train-0", "train-1"], ansible_kubectl_container="main"
    )
    done = run_with(cluster, tmp_path, inventory)
    assert done.returncode in (0, 1), done.stderr
    found = results(tmp_path)
    by = {(c["host"], c["id"]): c["status"] for c in found["checks"]}
    for pod in ("train-0", "train-1"):
        assert by[(pod, "host.reachable")] == "PASS"
        assert by[(pod, "net.port_range")] == "PASS"
    envs = {h["name"]: h["environment"] for h in found["hosts"]}
    assert envs["train-0"]["k8s_node"] == "gpu-node-a" and envs["train-1"]["k8s_node"] == "gpu-node-b"
    calls = cluster.calls()
    assert ["-n", "ml", "get", "pod", "train-0", "-o", "json"] in calls
    assert any(c[:6] == ["-n", "ml", "exec", "-i", "train-0", "-c"] for c in calls)
    kubectl = real_kubectl()
    for call in {tuple(c) for c in calls}:
        argv = ["kubectl", *call]
        if "exec" in argv:
            argv = [*argv[: argv.index("--") + 1], "true"]  # the script is an argument, not a flag
        ok, text = parses_with_real_kubectl(kubectl, argv, tmp_path)
        assert ok, (argv, text)


def test_discovery_by_selector_gives_running_pods_in_order_with_their_node(
    testbed: TestBed, tmp_path: Path
) -> None:
    a, b = testbed.add_many([HostSpec("node1"), HostSpec("node2")])
    label = {"app": "nccl-test"}
    cluster = FakeCluster(
        testbed,
        tmp_path / "k",
        [
            FakePod("worker-b", b, "gpu-node-b", labels=label),
            FakePod("worker-a", a, "gpu-node-a", labels=label),
            FakePod("worker-c", None, "gpu-node-c", phase="Pending", labels=label),
            FakePod("other", None, "gpu-node-d", labels={"app": "web"}),
        ],
    )
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(
        "all:\n  children:\n    trainers:\n      vars:\n        diagnose_k8s_selector: app=nccl-test\n"
        "        diagnose_k8s_namespace: ml\n        diagnose_k8s_container: main\n"
    )
    done = run_with(cluster, tmp_path, inventory)
    assert done.returncode in (0, 1), done.stderr
    hosts = results(tmp_path)["hosts"]
    assert [h["name"] for h in hosts] == ["worker-a", "worker-b"]
    assert [h["environment"]["k8s_node"] for h in hosts] == ["gpu-node-a", "gpu-node-b"]
    shutil.rmtree(tmp_path / "out")  # a folder holding a run takes no other
    limited = run_with(cluster, tmp_path, inventory, PORTS_ONLY, "--limit", "worker-b")
    assert limited.returncode in (0, 1), limited.stderr
    assert [h["name"] for h in results(tmp_path)["hosts"]] == ["worker-b"]


def test_a_pod_not_running_or_not_found_is_unreachable_naming_it(testbed: TestBed, tmp_path: Path) -> None:
    a = testbed.add(HostSpec("node1"))
    cluster = FakeCluster(
        testbed, tmp_path / "k", [FakePod("up-0", a, "n1"), FakePod("done-0", None, "n2", phase="Succeeded")]
    )
    inventory = pods_inventory(tmp_path / "inv.yaml", ["up-0", "done-0", "gone-0"])
    done = run_with(cluster, tmp_path, inventory)
    assert done.returncode == 1, done.stderr
    reach = {c["host"]: c for c in results(tmp_path)["checks"] if c["id"] == "host.reachable"}
    assert reach["up-0"]["status"] == "PASS"
    assert reach["done-0"]["status"] == "FAIL" and "done-0" in reach["done-0"]["message"]
    assert "Succeeded, not Running" in reach["done-0"]["message"]
    assert (
        reach["gone-0"]["status"] == "FAIL"
        and "pod gone-0 in namespace ml not found" in reach["gone-0"]["message"]
    )


@pytest.mark.parametrize(
    ("group_vars", "words"),
    [
        ({"diagnose_k8s_selector": "app in (((", "diagnose_k8s_namespace": "ml"}, "unable to parse"),
        ({"diagnose_k8s_selector": "app=nothing", "diagnose_k8s_namespace": "ml"}, "no Running pod"),
    ],
)
def test_a_bad_or_empty_selector_is_exit_2_naming_group_and_file(
    testbed: TestBed, tmp_path: Path, group_vars: dict[str, str], words: str
) -> None:
    cluster = FakeCluster(testbed, tmp_path / "k", [FakePod("p-0", None, "n1")])
    inventory = tmp_path / "inv.yaml"
    lines = "".join(f"        {k}: {json.dumps(v)}\n" for k, v in group_vars.items())
    inventory.write_text(f"all:\n  children:\n    trainers:\n      vars:\n{lines}")
    done = run_with(cluster, tmp_path, inventory)
    assert done.returncode == 2, done.stderr
    line = done.stderr.strip()
    assert "\n" not in line and words in line and "group trainers" in line and str(inventory) in line


def test_an_unsupported_extra_arg_or_unknown_context_is_exit_2(testbed: TestBed, tmp_path: Path) -> None:
    cluster = FakeCluster(testbed, tmp_path / "k", [FakePod("p-0", None, "n1")])
    inventory = pods_inventory(tmp_path / "inv.yaml", ["p-0"], ansible_kubectl_extra_args="--v=9")
    done = run_with(cluster, tmp_path, inventory)
    assert done.returncode == 2 and "ansible_kubectl_extra_args" in done.stderr, done.stderr
    inventory = pods_inventory(tmp_path / "inv.yaml", ["p-0"], ansible_kubectl_context="nowhere")
    done = run_with(cluster, tmp_path, inventory)
    assert done.returncode == 2 and "nowhere" in done.stderr and "\n" not in done.stderr.strip(), done.stderr


def test_sigint_stops_the_batch_inside_the_pod(testbed: TestBed, tmp_path: Path) -> None:
    stuck = testbed.add(HostSpec("stuck", tools={"ibstat": Reply(stdout="partial\n", hang=True)}))
    cluster = FakeCluster(testbed, tmp_path / "k", [FakePod("stuck-0", stuck, "n1")])
    inventory = pods_inventory(tmp_path / "inv.yaml", ["stuck-0"])
    text = "name: hang\ndescription: one hanging tool\nchecks: [host.reachable, ib.port_state]\n"
    argv = _argv(tmp_path, inventory, text, "-e", "command_timeout_s=300")
    env = {**cluster.env(), "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    wait_until(lambda: command_lines(stuck, "ibstat"), 60, "ibstat to hang in the pod")
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    wait_until(lambda: not command_lines(stuck, "ibstat"), 5, "the batch in the pod to be gone")
    assert "everything started on the hosts was stopped" in stderr


def test_gloo_benchmark_across_two_pods(testbed: TestBed, tmp_path: Path) -> None:
    a, b = testbed.add_many([HostSpec("node1"), HostSpec("node2")])
    cluster = FakeCluster(testbed, tmp_path / "k", [FakePod("rank-0", a, "n1"), FakePod("rank-1", b, "n2")])
    inventory = pods_inventory(
        tmp_path / "inv.yaml",
        ["rank-0", "rank-1"],
        ansible_python_interpreter=sys.executable,
        bench_startup_timeout_s=120,
    )
    done = run_with(cluster, tmp_path, inventory, GLOO_BENCH)
    assert done.returncode in (0, 1), done.stderr
    benches = results(tmp_path)["benchmarks"]
    entry = next(e for e in benches if e.get("collective") == "all_reduce")
    assert entry["status"] == "PASS", entry.get("message")
    assert entry["hosts"] == ["rank-0", "rank-1"] and entry["backend"] == "gloo"
