"""Every healthy machine shape ends without FAIL or ERROR, and says what it did not judge and why (issue 23).

One `diagnose run` per shape over real sshd test hosts (tests/support/shapekit.py: each prints real captured
outputs), with the profile the shape is judged by: the one the default target would pick from its topology
(diagnose.targets.local_machine) where the shape is a machine on its own, the cluster's own where it is one.
The test hosts have no GPU, so where a sweep has ranks to run the hosts' collectives run on gloo
(bench_backend), whose bandwidth is shown, never judged; one rank in all launches nothing. Every SKIP of a
shape's results.json says why, and its report.html carries the reasons that set the shape apart.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from diagnose.cli import main
from diagnose.targets.local_machine import profile_for_topology
from tests.support.hostkit import captured, healthy_h100, memlock_vars, no_dev_infiniband
from tests.support.kubekit import FakeCluster, FakePod
from tests.support.shapekit import (
    L40S_TOPO,
    VM_TOPO,
    cpu_host,
    cut_to_gpus,
    one_gpu_vm,
    pcie_node,
    pod_view,
)
from tests.support.testbed import TestBed

pytestmark = pytest.mark.e2e

PLAYBOOK = """\
name: shapes
description: every check, then a tiny all_reduce sweep where there are ranks to run it
checks: ["*"]
benchmarks:
  enabled: true
  collectives: [all_reduce]
  min_bytes: 4K
  max_bytes: 64K
  step_factor: 4
  warmup_iters: 1
  iters: 2
  straggler_isolation: false
"""
GLOO = ("bench_backend=gloo",)
ONE_RANK = "one rank in all ({host}, one GPU): a collective over one rank moves nothing between ranks"
NO_FABRIC = "expects no RDMA fabric (expected_hca_count 0)"
GLOO_NOT_JUDGED = "it is not representative of a GPU fabric and its bandwidth is not judged"


@dataclass(frozen=True)
class Shape:
    """One healthy shape: its hosts, how it is judged, and check id -> what its message must say."""

    name: str
    hosts: tuple[str, ...]
    profile: str
    extra: tuple[str, ...] = ()
    host_vars: dict[str, dict[str, Any]] = field(default_factory=dict)
    says: dict[str, str] = field(default_factory=dict)
    pod: bool = False


SHAPES = (
    Shape(
        "one-gpu",
        ("vm",),
        profile_for_topology(captured(VM_TOPO))[0],  # type: ignore[index]
        says={
            "bench.all_reduce": ONE_RANK.format(host="vm"),
            "nccl.transport": ONE_RANK.format(host="vm"),
            "gpu.nvlink": "profile single-node-pcie expects no NVLink (expected_nvlink false)",
            "ib.devices": "/dev/infiniband holds only rdma_cm (no uverbs device)",
            "pci.acs": "lspci is not installed on vm",
            "gpu.topology": "1x NVIDIA H100 80GB HBM3; one GPU",
        },
    ),
    Shape(
        "gpus-without-nvlink",
        ("pcie8",),
        profile_for_topology(captured(L40S_TOPO))[0],  # type: ignore[index]
        (*GLOO, "bench_procs_per_host=2"),
        says={
            "gpu.topology": "NVLink on 0 of 28 pairs",
            "gpu.nvlink": "profile single-node-pcie expects no NVLink",
            "gpu.fabricmanager": "fabric.state is N/A on every GPU",
            "ib.port_state": "no RDMA device on pcie8",
            "bench.all_reduce": GLOO_NOT_JUDGED,
        },
    ),
    Shape(
        "gpus-without-hca",
        ("noib",),
        "single-node-nvlink",
        (*GLOO, "bench_procs_per_host=2"),
        says={
            "ib.devices": f"no HCA on noib (no /dev/infiniband); profile single-node-nvlink {NO_FABRIC}",
            "ib.link_rate": "not judged: no RDMA device on noib",
            "nccl.transport": "gloo backend (bench_backend is gloo): no NCCL, no transport to read",
        },
    ),
    Shape(
        "cpu-only",
        ("cpu",),
        "cpu-testbed",
        says={
            "gpu.topology": "profile cpu-testbed expects no GPU (expected_gpu_count 0)",
            "bench.all_reduce": "not measured: one host without GPU",
            "ib.devices": f"profile cpu-testbed {NO_FABRIC}",
        },
    ),
    Shape(
        "one-host-with-more-gpus",
        ("node-a", "node-b", "node-c"),
        "h100-8x-ndr400",
        GLOO,
        host_vars={"node-a": {"expected_gpu_count": 4}, "node-b": {"expected_gpu_count": 4}},
        says={"bench.all_reduce": GLOO_NOT_JUDGED, "gpu.topology": "NVLink on every pair (NV18)"},
    ),
    Shape(
        "pod",
        ("train-0",),
        "h100-8x-ndr400",
        says={
            "k8s.resources": "pod default/train-0 on node worker-0 requests nvidia.com/gpu: 1",
            "k8s.host_parity": "no pod's node is in the inventory: nothing to compare",
            "bench.all_reduce": ONE_RANK.format(host="train-0"),
        },
        pod=True,
    ),
)


def run_shape(shape: Shape, bed: TestBed, work: Path, kubectl: FakeCluster) -> dict[str, Any]:
    playbook = work / "shapes.yaml"
    playbook.write_text(PLAYBOOK)
    out = work / f"out-{shape.name}"
    if shape.pod:
        inventory = work / "pod.yaml"
        inventory.write_text(
            "all:\n  vars:\n"
            f"    ansible_user: root\n    ansible_ssh_private_key_file: {bed.client_key}\n"
            f"    diagnose_known_hosts_file: {bed.known_hosts}\n"
            "  children:\n    trainers:\n      vars:\n"
            "        diagnose_k8s_selector: app=train\n        diagnose_k8s_namespace: default\n"
            "        expected_gpu_count: 1\n        expected_k8s_resources: ['rdma/*', 'nvidia.com/gpu']\n"
        )
    else:
        hosts = [bed.hosts[name] for name in shape.hosts]
        inventory = bed.write_inventory(work / f"{shape.name}.yaml", hosts, host_vars=shape.host_vars)
    extra = [arg for value in (f"diagnose_profile={shape.profile}", *shape.extra) for arg in ("-e", value)]
    argv = ["run", "-i", str(inventory), "--playbook", str(playbook), "-o", str(out), "--format", "json,html"]
    with mock.patch.dict(os.environ, {"PATH": kubectl.env()["PATH"]}):
        code = main([*argv, *extra, *memlock_vars(), "--quiet"])
    results = json.loads((out / "results.json").read_text())
    return {"code": code, "results": results, "html": html.unescape((out / "report.html").read_text())}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, Any]]]:
    work = tmp_path_factory.mktemp("shapes")
    with TestBed(work / "bed") as bed:
        hosts = bed.add_many(
            [
                one_gpu_vm("vm"),
                pcie_node("pcie8"),
                no_dev_infiniband("noib"),
                cpu_host("cpu"),
                cut_to_gpus("node-a", 4),
                cut_to_gpus("node-b", 4),
                healthy_h100("node-c"),
                pod_view(cut_to_gpus("p-one", 1)),
            ]
        )
        pod_host = next(h for h in hosts if h.name == "p-one")
        healthy_pod = json.loads(captured("k8s_pod/healthy_sriov_rdma_pod.json"))
        pod = FakePod(
            "train-0", pod_host, "worker-0", namespace="default", labels={"app": "train"}, pod=healthy_pod
        )
        kubectl = FakeCluster(bed, work / "kube", [pod])
        yield {shape.name: run_shape(shape, bed, work, kubectl) for shape in SHAPES}


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_each_healthy_shape_ends_without_fail_or_error(runs: dict[str, dict[str, Any]], shape: Shape) -> None:
    run = runs[shape.name]
    results = run["results"]
    bad = [
        (c["id"], c["host"], c["status"], c["message"])
        for c in [*results["checks"], *results["benchmarks"]]
        if c["status"] in ("FAIL", "ERROR")
    ]
    assert not bad, bad
    assert (run["code"], results["verdict"], results["run"]["profile"]) == (0, "PASS", shape.profile)
    assert sorted({c["host"] for c in results["checks"]} - {None}) == sorted(shape.hosts)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_each_shape_says_what_was_not_judged_and_why(runs: dict[str, dict[str, Any]], shape: Shape) -> None:
    run = runs[shape.name]
    checks = run["results"]["checks"]
    for check_id, reason in shape.says.items():
        found = [c for c in checks if c["id"] == check_id]
        assert found and all(reason in c["message"] for c in found), (check_id, found)
        if any(c["status"] == "SKIP" for c in found):
            assert reason in run["html"], f"the report does not say why {check_id} was not judged"
    unexplained = [(c["id"], c["host"]) for c in checks if c["status"] == "SKIP" and not c["message"]]
    assert not unexplained, "every SKIP says why"


def test_hosts_with_different_gpu_counts_are_each_held_to_their_own(runs: dict[str, dict[str, Any]]) -> None:
    """A cluster whose boards differ says so per host (expected_gpu_count per host in the inventory)."""
    checks = runs["one-host-with-more-gpus"]["results"]["checks"]
    topology = {c["host"]: c for c in checks if c["id"] == "gpu.topology"}
    assert {h: c["expected"].split(" ")[0] for h, c in topology.items()} == {
        "node-a": "4x",
        "node-b": "4x",
        "node-c": "8x",
    }
    assert all(c["status"] == "PASS" for c in topology.values())
