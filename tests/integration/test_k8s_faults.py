"""Checklist section 2 over pods: a selector-based inventory of test pods, one per container fault, and the
node of one of them as an SSH host; every fault named on its pod by its check, the healthy pod clean, and
the report's section 2 with no NOT COVERED row.

Pods are real sshd test hosts entered through the fake kubectl of tests/support/kubekit.py; their pod objects are
the captured ones of tests/fixtures/captured/k8s_pod/ (see SOURCE), their in-pod tools print captured
outputs (df of /dev/shm, ip -o addr, nvidia-smi -L of the lent H200).
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from diagnose.render.checklist import NOT_COVERED, build_checklist
from tests.support.hostkit import healthy_h100, memlock_vars
from tests.support.kubekit import FakeCluster, FakePod
from tests.support.paths import CAPTURED, REPO
from tests.support.testbed import Reply, TestBed

pytestmark = pytest.mark.integration

POD_FIXTURES = CAPTURED / "k8s_pod"
CHECKS = (
    "host.reachable, ib.devices, host.memlock, k8s.rdma_devices, k8s.resources, k8s.networks, k8s.shm, "
    "k8s.host_parity"
)
# `nvidia-smi -L` in the format the lent H200 printed (its GPU 0 line), one GPU per pod.
ONE_GPU = "GPU 0: NVIDIA H200 (UUID: GPU-6714d9e5-9596-8915-3b87-5d18c33ce959)\n"


def pod_object(name: str) -> dict[str, Any]:
    return json.loads((POD_FIXTURES / name).read_text())


def pod_host(name: str, shm: str = "df_shm_16g_emptydir.txt", **changes: Any):  # type: ignore[no-untyped-def]
    """The healthy 8-HCA node's tools, seen from a pod: one GPU, a net1 VF, an emptyDir /dev/shm."""
    spec = healthy_h100(name)
    smi = spec.tools["nvidia-smi"]
    tools = {
        **spec.tools,
        "nvidia-smi": f"#!/bin/sh\n[ \"$*\" = -L ] && {{ printf '%s' '{ONE_GPU}'; exit 0; }}\n"
        + str(smi).split("\n", 1)[1],
        "df": {"-P -k /dev/shm": Reply(stdout=(POD_FIXTURES / shm).read_text())},
        "ip": {"-o addr show": Reply(stdout=(POD_FIXTURES / "ip_o_addr_net1.txt").read_text())},
    }
    return replace(spec, tools=tools, **changes)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    work = tmp_path_factory.mktemp("k8s")
    healthy = pod_object("healthy_sriov_rdma_pod.json")
    no_rdma_request = copy.deepcopy(healthy)
    for container in no_rdma_request["spec"]["containers"]:
        for part in ("limits", "requests"):
            container["resources"][part].pop("rdma/rdma_shared_device_ib", None)
    no_status = copy.deepcopy(healthy)
    no_status["metadata"]["annotations"].pop("k8s.v1.cni.cncf.io/network-status")
    with TestBed(work / "bed") as bed:
        hosts = bed.add_many(
            [
                pod_host("p-ok"),
                pod_host("p-noib", infiniband=None),
                pod_host("p-nores"),
                pod_host("p-nonet"),
                pod_host("p-noip"),
                pod_host("p-shm64", shm="df_shm_64m.txt"),
                pod_host("p-memlock", memlock_kib=64),
                healthy_h100("gpu-node-a"),
            ]
        )
        by_name = {h.name: h for h in hosts}
        pods = [
            FakePod("train-ok", by_name["p-ok"], "gpu-node-b", pod=healthy),
            FakePod("train-noib", by_name["p-noib"], "gpu-node-a", pod=healthy),
            FakePod("train-nores", by_name["p-nores"], "gpu-node-c", pod=no_rdma_request),
            FakePod("train-nonet", by_name["p-nonet"], "gpu-node-d", pod=no_status),
            FakePod(
                "train-noip",
                by_name["p-noip"],
                "gpu-node-e",
                pod=pod_object("vf_without_ip_networks_status.json"),
            ),
            FakePod("train-shm64", by_name["p-shm64"], "gpu-node-f", pod=healthy),
            FakePod("train-memlock", by_name["p-memlock"], "gpu-node-g", pod=healthy),
        ]
        for pod in pods:  # the captured pods ran in "default", which their network-status names
            pod.labels, pod.namespace = {"app": "nccl-train"}, "default"
        cluster = FakeCluster(bed, work / "kube", pods)
        node = by_name["gpu-node-a"]
        inventory = work / "pods.yaml"
        inventory.write_text(
            "all:\n  vars:\n"
            f"    ansible_user: root\n    ansible_ssh_private_key_file: {bed.client_key}\n"
            f"    diagnose_known_hosts_file: {bed.known_hosts}\n    diagnose_profile: h100-8x-ndr400\n"
            "  children:\n"
            "    trainers:\n      vars:\n"
            "        diagnose_k8s_selector: app=nccl-train\n        diagnose_k8s_namespace: default\n"
            "        expected_gpu_count: 1\n        expected_k8s_resources: ['rdma/*', 'nvidia.com/gpu']\n"
            "    nodes:\n      hosts:\n"
            f"        gpu-node-a: {{ansible_host: {node.address}, ansible_port: {node.port}}}\n"
        )
        playbook = work / "section2.yaml"
        playbook.write_text(f"name: section2\ndescription: pods\nchecks: [{CHECKS}]\n")
        out = work / "out"
        argv = [
            sys.executable, "-m", "diagnose.cli", "run", "-i", str(inventory), "--playbook", str(playbook),
            "-o", str(out), "--format", "json,html", *memlock_vars(),
        ]  # fmt: skip
        done = subprocess.run(
            argv, cwd=work, env={**cluster.env(), "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
            timeout=600,
        )  # fmt: skip
        yield {"done": done, "results": json.loads((out / "results.json").read_text()), "out": out}


def result(run: dict[str, Any], check_id: str, host: str | None) -> dict[str, Any]:
    found = [c for c in run["results"]["checks"] if c["id"] == check_id and c["host"] == host]
    assert found, f"no {check_id} result for {host}: {run['done'].stderr[-2000:]}"
    return found[0]


FAULTS = [
    ("train-noib", "k8s.rdma_devices", "no /dev/infiniband"),
    ("train-noib", "k8s.host_parity", "gpu-node-a"),
    ("train-nores", "k8s.resources", "rdma/*"),
    ("train-nonet", "k8s.networks", "sriovnet1"),
    ("train-noip", "k8s.networks", "no IP"),
    ("train-shm64", "k8s.shm", "64 MiB"),
    ("train-memlock", "host.memlock", "64"),
]


@pytest.mark.parametrize(("pod", "check_id", "words"), FAULTS)
def test_each_container_fault_is_named_on_its_pod(
    run: dict[str, Any], pod: str, check_id: str, words: str
) -> None:
    host = None if check_id == "k8s.host_parity" else pod
    found = (
        result(run, check_id, host)
        if host
        else next(
            (c for c in run["results"]["checks"] if c["id"] == check_id and c["status"] == "FAIL"), None
        )
    )
    assert found is not None and found["status"] == "FAIL", found
    assert words in found["message"] and (pod in found["message"] or host == pod), found["message"]


def test_the_healthy_pod_and_the_node_are_clean(run: dict[str, Any]) -> None:
    bad = [
        (c["id"], c["status"], c["message"])
        for c in run["results"]["checks"]
        if c["host"] in ("train-ok", "gpu-node-a") and c["status"] in ("FAIL", "ERROR", "WARN")
    ]
    assert not bad
    for check_id in ("k8s.rdma_devices", "k8s.resources", "k8s.networks", "k8s.shm", "host.memlock"):
        assert result(run, check_id, "train-ok")["status"] == "PASS", check_id
    hosts = {h["name"]: h for h in run["results"]["hosts"]}
    assert hosts["train-ok"]["environment"].get("k8s_node") == "gpu-node-b"


def test_section_2_is_answered_item_by_item(run: dict[str, Any]) -> None:
    section = next(s for s in build_checklist(run["results"]) if s.number == "2")
    assert [i.key for i in section.items][:4] == ["2.1", "2.2", "2.3", "2.4"]
    assert all(item.status != NOT_COVERED for item in section.items), [
        (i.key, i.status) for i in section.items
    ]
    html = (run["out"] / "report.html").read_text()
    assert "train-noib" in html and "gpu-node-a" in html
