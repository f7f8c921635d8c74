"""The pod parsers (diagnose/parsers/pod.py) against the in-pod outputs of tests/fixtures/captured/k8s_pod,
one case file per output (the runner of tests/support/facts.py), and the pod-object parser on the captured pod JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diagnose.core.check import ParseError
from diagnose.parsers.pod import parse_interfaces, parse_pod, parse_shm
from tests.support.facts import Parse, case_params, check_case
from tests.support.paths import CAPTURED

PODS = CAPTURED / "k8s_pod"

PARSERS: dict[str, Parse] = {
    "k8s_shm": lambda text, rc: parse_shm(text),
    "k8s_interfaces": lambda text, rc: parse_interfaces(text),
}


@pytest.mark.parametrize("path", case_params(PARSERS))
def test_case(path: Path) -> None:
    check_case(path, PARSERS[path.parent.name])


def test_every_fixture_is_named_in_source() -> None:
    source = (PODS / "SOURCE").read_text()
    for fixture in PODS.iterdir():
        assert fixture.name == "SOURCE" or fixture.name in source, fixture.name


def test_pod_object_both_annotation_spellings_and_resources() -> None:
    healthy = parse_pod(json.loads((PODS / "healthy_sriov_rdma_pod.json").read_text()))
    assert healthy["resources"] == {"nvidia.com/gpu": 1, "rdma/rdma_shared_device_ib": 1}
    assert healthy["requested_networks"] == ["sriovnet1"]
    assert healthy["network_status_key"] == "k8s.v1.cni.cncf.io/network-status"
    assert [(n["name"], n["interface"], n["ips"]) for n in healthy["networks"]][1] == (
        "default/sriovnet1",
        "net1",
        ["10.56.217.1"],
    )
    old = parse_pod(json.loads((PODS / "vf_without_ip_networks_status.json").read_text()))
    assert old["network_status_key"] == "k8s.v1.cni.cncf.io/networks-status"
    assert old["networks"][1]["ips"] == []
    pending = parse_pod(json.loads((PODS / "pending_insufficient_rdma.json").read_text()))
    assert pending["node"] is None and pending["unscheduled"]["reason"] == "Unschedulable"


def test_not_a_pod_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="not a pod object"):
        parse_pod({"kind": "Node", "metadata": {}})


def test_privileged_pod_with_the_nodes_dev_infiniband_mounted() -> None:
    """oci-hpc-oke's MPI worker: privileged, hostPath /dev/infiniband, only nvidia.com/gpu requested."""
    worker = parse_pod(json.loads((PODS / "privileged_hostpath_infiniband_pod.json").read_text()))
    assert worker["privileged"] is True
    assert worker["host_rdma_mounts"] == [
        {"container": "mpi-worker", "volume": "devinf", "path": "/dev/infiniband"}
    ]
    assert worker["resources"] == {"nvidia.com/gpu": 8}
    healthy = parse_pod(json.loads((PODS / "healthy_sriov_rdma_pod.json").read_text()))
    assert healthy["host_rdma_mounts"] == [] and healthy["privileged"] is False
