"""diagnose.k8s.target and the pod source (diagnose.targets.k8s_pods) without a cluster: kubectl command lines,
refused options, kubectl's error words, pod lists, group discovery through resolve_hosts, pods attached to hosts
(kubectl answers injected)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from diagnose.config.playbook import load_playbook
from diagnose.core.errors import ConfigError
from diagnose.core.hosts import Host
from diagnose.core.vars import Vars
from diagnose.k8s.target import POD_ERROR_VAR, KubectlArgsError, KubectlTarget, error_reason, parse_extra_args
from diagnose.targets.k8s_pods import PodSource, attach_pods, running_pod_names
from diagnose.targets.loading import InventoryFiles
from diagnose.targets.resolve import resolve_hosts
from diagnose.targets.sources import HostContext
from tests.support.paths import FIXTURES

POD = json.loads((FIXTURES / "k8s" / "rdma-gpu-pod.json").read_text())


def test_exec_argv_is_kubectl_exec_with_ansible_variables_in_order() -> None:
    target = KubectlTarget.of(
        {
            "ansible_kubectl_namespace": "ml",
            "ansible_kubectl_container": "main",
            "ansible_kubectl_context": "arn:aws:eks:us-west-2:1:cluster/gpu",
            "ansible_kubectl_kubeconfig": "/etc/kube/config",
            "ansible_kubectl_extra_args": "--request-timeout 5s --insecure-skip-tls-verify",
        },
        "train-0",
    )
    assert target.exec_argv("echo $HOME; true") == [
        "kubectl", "--request-timeout=5s", "--insecure-skip-tls-verify", "--kubeconfig=/etc/kube/config",
        "--context=arn:aws:eks:us-west-2:1:cluster/gpu", "-n", "ml", "exec", "-i", "train-0", "-c", "main",
        "--", "/bin/sh", "-c", "echo $HOME; true",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "words"),
    [("--token abc", "credential"), ("-n other", "ansible_kubectl_namespace"), ("--v=9", "not supported"),
     ("--tty", "not supported"), ("pod-x", "not supported"), ("--server", "needs a value")],
)  # fmt: skip
def test_extra_args_that_cannot_be_passed_safely_are_refused(text: str, words: str) -> None:
    with pytest.raises(KubectlArgsError, match=words):
        parse_extra_args(text)


def test_kubectl_errors_become_one_line_reasons() -> None:
    target = KubectlTarget(namespace="ml", pod="p-0", container="main")
    assert error_reason('Error from server (NotFound): pods "p-0" not found\n', target) == (
        "pod p-0 in namespace ml not found"
    )
    assert "not Running" in error_reason(
        "error: cannot exec into a container in a completed pod; current phase is Failed\n", target
    )
    assert "container 'main' not found" in error_reason(
        'error: unable to upgrade connection: container not found ("main")\n', target
    )
    forbidden = 'Error from server (Forbidden): pods "p-0" is forbidden: User "x" cannot get resource "pods"'
    assert error_reason(forbidden, target).startswith("kubectl is forbidden to reach pod p-0")


def test_running_pods_in_name_order() -> None:
    def pod(name: str, phase: str) -> dict:  # type: ignore[type-arg]
        return {**POD, "metadata": {"name": name}, "status": {"phase": phase}}

    listing = {"items": [pod("b", "Running"), pod("c", "Pending"), pod("a", "Running")]}
    assert running_pod_names(listing) == ["a", "b"]


def _answers(replies: dict[str, tuple[int, str, str]]):  # type: ignore[no-untyped-def]
    def run(argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
        name = argv[argv.index("pod") + 1]
        return subprocess.CompletedProcess(list(argv), *replies[name])

    return run


def test_attach_pods_sets_pod_node_and_address_and_keeps_unreadable_pods() -> None:
    def host(name: str, **values: object) -> Host:
        return Host(name, vars=Vars({"ansible_connection": "kubectl", **values}, host=name))

    hosts = [host("p-0"), host("p-1", ansible_host="10.9.9.9"), host("gone"), Host("plain")]
    run = _answers(
        {
            "p-0": (0, json.dumps(POD), ""),
            "p-1": (0, json.dumps(POD), ""),
            "gone": (1, "", 'Error from server (NotFound): pods "gone" not found'),
        }
    )
    attached = attach_pods(hosts, run)
    assert attached[0].vars["diagnose_k8s_node"] == "gpu-node-a"
    assert attached[0].vars["ansible_host"] == POD["status"]["podIP"]
    assert attached[0].vars["diagnose_k8s_pod"]["metadata"]["name"] == "rdma-gpu-test-pod-1"
    assert attached[1].vars["ansible_host"] == "10.9.9.9"
    assert attached[2].vars[POD_ERROR_VAR] == "pod gone not found"
    assert attached[3] is hosts[3]
    with pytest.raises(ConfigError, match="forbidden"):
        attach_pods([host("p-0")], _answers({"p-0": (1, "", 'pods "p-0" is forbidden: no')}))


def test_selector_groups_expand_before_limit_with_group_variables(tmp_path: Path) -> None:
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(
        "all:\n  vars:\n    ansible_kubectl_context: lab\n  children:\n    trainers:\n      vars:\n"
        "        diagnose_k8s_selector: app=x\n        diagnose_k8s_namespace: ml\n        bench_master_port: 29600\n"
    )
    seen = []

    def discover(scope):  # type: ignore[no-untyped-def]
        seen.append(scope)
        return ["w-a", "w-b"]

    playbook = load_playbook(None)
    hosts = resolve_hosts(
        [InventoryFiles(inventory), PodSource(discover, _answers({"w-b": (0, json.dumps(POD), "")}))],
        HostContext(playbook, "w-b"),
    )
    assert [h.name for h in hosts] == ["w-b"]
    assert seen[0]["ansible_kubectl_context"] == "lab" and seen[0]["diagnose_k8s_selector"] == "app=x"
    values = hosts[0].vars
    assert values["ansible_connection"] == "kubectl" and values["ansible_kubectl_namespace"] == "ml"
    assert values["ansible_kubectl_pod"] == "w-b" and values["bench_master_port"] == 29600

    def fails(scope):  # type: ignore[no-untyped-def]
        raise ValueError("no Running pod matches selector 'app=x'")

    with pytest.raises(ConfigError) as caught:
        resolve_hosts([InventoryFiles(inventory), PodSource(fails)], HostContext(playbook))
    assert "group trainers" in str(caught.value) and str(inventory) in str(caught.value)


def test_the_rendezvous_address_can_be_a_multus_network() -> None:
    """With bench_network the ranks meet on the VF's address (the fabric), not on the pod network."""

    def host(name: str, **values: object) -> Host:
        return Host(name, vars=Vars({"ansible_connection": "kubectl", **values}, host=name))

    hosts = [host("p-0", bench_network="default/sriov-net1"), host("p-1", bench_network="absent-net")]
    run = _answers({"p-0": (0, json.dumps(POD), ""), "p-1": (0, json.dumps(POD), "")})
    attached = attach_pods(hosts, run)
    assert attached[0].vars["ansible_host"] == "10.56.217.2"
    assert attached[1].vars["ansible_host"] == POD["status"]["podIP"], "an unattached network falls back"


def test_a_dry_run_shows_the_pod_node_but_not_the_pod_object() -> None:
    """The pod object is read from the cluster; its env may hold literal secrets, so --check never prints it."""
    from diagnose.targets.view import relevant_vars

    host = Host(
        "p-0",
        vars=Vars({"ansible_connection": "kubectl", "diagnose_k8s_pod": POD, "diagnose_k8s_node": "n1"}),
    )
    shown = relevant_vars(host)
    assert "diagnose_k8s_pod" not in shown and shown["diagnose_k8s_node"] == "n1"
