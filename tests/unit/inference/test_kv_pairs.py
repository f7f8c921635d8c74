"""Which prefill → decode pairs a run measures, read from the gpu.topology facts of real captures.

Topologies are parsed by the gpu.topology check itself from tests/fixtures/captured/topo (see SOURCE there):
the lent 4x H200 (NV18 everywhere), an 8x H100 with a NIC per GPU at PIX, and a PCIe-only 8-GPU host whose
GPU pairs are NODE or SYS.
"""

from __future__ import annotations

from typing import Any

import pytest

from diagnose.checks import gpu_topology
from diagnose.core.model import CommandOutput
from diagnose.core.vars import Vars
from diagnose.inference.pairs import Endpoint, parse_endpoint, parse_pair, path_rank, plan_pairs
from tests.support.paths import CAPTURED


def topology(topo: str, smi: str = "h100_sxm_8gpu_565.txt") -> dict[str, Any]:
    outputs = {
        "topo": CommandOutput(stdout=(CAPTURED / "topo" / topo).read_text(), exit_code=0),
        "nvidia_smi": CommandOutput(stdout=(CAPTURED / "nvidia_smi" / smi).read_text(), exit_code=0),
    }
    return gpu_topology.parse(outputs, Vars())


def facts(**hosts: str) -> dict[str, dict[str, Any]]:
    return {name: {"gpu.topology": topology(topo)} for name, topo in hosts.items()}


def test_an_nvswitch_node_has_one_link_class() -> None:
    pairs, notes = plan_pairs(["node1"], "nccl", 4, facts(node1="h200x4_no_nic_ansi.txt"))
    assert [(p.label, p.link, p.roles, p.fastest) for p in pairs] == [
        ("GPU0->GPU1", "NV18", ["link class"], "NV18")
    ]
    assert not pairs[0].inter_node and notes == []


def test_a_pcie_host_gets_one_pair_per_class_and_placement_on_a_slower_path_is_kept() -> None:
    topo = facts(node1="h100_pcie_matrix_12nic_topo_mp.txt")
    pairs, _ = plan_pairs(["node1"], "nccl", 8, topo, prefill=["GPU0"], decode=["GPU4"])
    assert [(p.label, p.link, p.roles) for p in pairs] == [
        ("GPU0->GPU1", "NODE", ["link class"]),
        ("GPU0->GPU4", "SYS", ["link class", "placement"]),
    ]
    assert pairs[1].fastest == "NODE" and path_rank("SYS") > path_rank("NODE")


def test_host_pairs_cross_nodes_on_gpu0_with_the_rail_each_gpu_sits_on() -> None:
    topo = facts(
        node1="h100_8gpu_8nic_pix.txt", node2="h100_8gpu_8nic_pix.txt", node3="h100_8gpu_8nic_pix.txt"
    )
    pairs, _ = plan_pairs(
        ["node1", "node2", "node3"], "nccl", 8, topo, prefill=["node1:GPU0"], decode=["node2:GPU3"]
    )
    labels = {p.label: p for p in pairs}
    assert list(labels) == [
        "GPU0->GPU1",
        "node1:GPU0->node2:GPU0",
        "node2:GPU0->node3:GPU0",
        "node1:GPU0->node2:GPU3",
    ]
    assert labels["node1:GPU0->node2:GPU0"].rails == ("mlx5_0", "mlx5_0")
    cross = labels["node1:GPU0->node2:GPU3"]
    assert cross.link == "NET" and cross.roles == ["placement"] and cross.rails == ("mlx5_0", "mlx5_3")


def test_a_named_pair_carries_its_environment_and_joins_an_existing_pair() -> None:
    topo = facts(node1="h200x4_no_nic_ansi.txt")
    env = {"GPU2->GPU3": {"NCCL_P2P_DISABLE": "1"}, "GPU0->GPU1": {"NCCL_ALGO": "Ring"}}
    pairs, _ = plan_pairs(["node1"], "nccl", 4, topo, pair_env=env)
    assert [(p.label, p.roles, p.env) for p in pairs] == [
        ("GPU0->GPU1", ["link class", "named"], {"NCCL_ALGO": "Ring"}),
        ("GPU2->GPU3", ["named"], {"NCCL_P2P_DISABLE": "1"}),
    ]


def test_pairs_that_cannot_exist_are_left_out_with_a_note() -> None:
    topo = facts(node1="h200x4_no_nic_ansi.txt")
    pairs, notes = plan_pairs(
        ["node1"], "nccl", 4, topo, prefill=["GPU7", "GPU1", "node9:GPU0"], decode=["GPU0", "GPU1", "GPU0"]
    )
    assert [p.label for p in pairs] == ["GPU0->GPU1"]
    assert notes == [
        "node1:GPU7->node1:GPU0 (placement): node1 has 4 GPUs",
        "node1:GPU1->node1:GPU1 (placement): a GPU cannot send to itself",
        "node9:GPU0->node1:GPU0 (placement): node9 is not a benchmark host",
    ]


def test_gloo_hosts_measure_host_pairs_only() -> None:
    pairs, notes = plan_pairs(["a", "b"], "gloo", 1, {}, prefill=["GPU0"], decode=["GPU1"])
    assert [(p.label, p.link) for p in pairs] == [("a:CPU->b:CPU", "TCP (gloo)")]
    assert notes == ["placement groups not measured: gloo on hosts without GPUs"]


def test_one_gpu_and_no_topology() -> None:
    assert plan_pairs(["solo"], "nccl", 1, {}) == ([], ["solo has one GPU: no pair inside the node"])
    (pair,), notes = plan_pairs(["solo"], "nccl", 2, {})
    assert pair.label == "GPU0->GPU1" and pair.link == "unknown" and "no GPU topology facts" in notes[0]


def test_pair_and_gpu_spelling() -> None:
    assert parse_endpoint("3", "n1") == parse_endpoint("gpu3", "n1") == Endpoint("n1", 3)
    assert parse_pair("node-2.example:GPU1->node-3:0", "n1") == (
        Endpoint("node-2.example", 1),
        Endpoint("node-3", 0),
    )
    for bad in ("GPU0-GPU1", "node1", "GPU0->"):
        with pytest.raises(ValueError):
            parse_pair(bad, "n1")


def scoped(visible: str) -> dict[str, Any]:
    """The lent 4x H200 under CUDA_VISIBLE_DEVICES as its `env` prints it (issue 33)."""
    outputs = {
        "topo": CommandOutput(stdout=(CAPTURED / "topo/h200x4_no_nic_ansi.txt").read_text(), exit_code=0),
        "nvidia_smi": CommandOutput(stdout=(CAPTURED / "nvidia_smi/h200x4_580.txt").read_text(), exit_code=0),
        "gpu_visibility": CommandOutput(stdout=f"CUDA_VISIBLE_DEVICES={visible}\n", exit_code=0),
    }
    return {"node1": {"gpu.topology": gpu_topology.parse(outputs, Vars())}}


def test_pairs_use_only_the_gpus_cuda_sees_and_their_cuda_numbers() -> None:
    """With CUDA_VISIBLE_DEVICES=2,3 the pair is GPU2->GPU3 (nvidia-smi's names) on CUDA devices 0 and 1:
    `--gpus 2,3` would be an invalid device ordinal in the ranks, which see two GPUs."""
    (pair,), notes = plan_pairs(["node1"], "nccl", 2, scoped("2,3"), prefill=["GPU0"], decode=["GPU3"])
    assert (pair.label, pair.link, pair.devices) == ("GPU2->GPU3", "NV18", (0, 1))
    assert notes == [
        "node1:GPU0->node1:GPU3 (placement): node1:GPU0 is not in scope (2 of 4 GPUs visible "
        "(CUDA_VISIBLE_DEVICES=2,3); "
        "GPUs 0, 1 not in scope)"
    ]
    assert plan_pairs(["node1"], "nccl", 1, scoped("0")) == (
        [],
        [
            "node1 has one GPU in scope (1 of 4 GPUs visible (CUDA_VISIBLE_DEVICES=0); GPUs 1, 2, 3 not in scope): "
            "no pair inside it"
        ],
    )
