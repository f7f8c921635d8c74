"""The k8s.* rules on pod objects and in-pod outputs from tests/fixtures/captured/k8s_pod (see its SOURCE):
the healthy pod passes, each fault is named on the right pod, and hosts that are not pods SKIP."""

from __future__ import annotations

import json
from typing import Any

import pytest

from diagnose.checks import k8s_host_parity, k8s_networks, k8s_rdma_devices, k8s_resources, k8s_shm
from diagnose.core.check import Check
from diagnose.core.model import CommandOutput
from diagnose.core.vars import Vars
from diagnose.engine.evaluate import evaluate_check
from tests.support.paths import CAPTURED

IBV = (CAPTURED / "ibv_devinfo/h100_cx7_ib_8hca.txt").read_text()


def pod_json(name: str) -> dict[str, Any]:
    return json.loads((CAPTURED / "k8s_pod" / name).read_text())


def pod_vars(pod: str = "healthy_sriov_rdma_pod.json", host: str = "trainer-0", **extra: Any) -> Vars:
    values = {"expected_hca_count": 8, "expected_link_layer": "InfiniBand", **extra}
    return Vars(
        {
            "ansible_connection": "kubectl",
            "diagnose_k8s_pod": pod_json(pod),
            "diagnose_k8s_node": "worker-0",
            **values,
        },
        host=host,
    )


def out(fixture: str | None = None, text: str = "", rc: int = 0) -> CommandOutput:
    return CommandOutput(stdout=(CAPTURED / fixture).read_text() if fixture else text, exit_code=rc)


HEALTHY = {
    "dev_infiniband": out(text="\n".join(["rdma_cm", *(f"uverbs{i}" for i in range(8))])),
    "ibv_devinfo": out(text=IBV),
    "dev_nvidia": out(text="nvidia0\n"),
    "gpu_list": out(text="GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n"),
    "ip_addr": out("k8s_pod/ip_o_addr_net1.txt"),
    "shm": out("k8s_pod/df_shm_16g_emptydir.txt"),
}
POD_CHECKS = (k8s_rdma_devices, k8s_resources, k8s_networks, k8s_shm)


def judge(check: Check, vars_: Vars, **changes: CommandOutput) -> Any:
    return check.judge(check.parse({**HEALTHY, **changes}, vars_), vars_)


@pytest.mark.parametrize("module", POD_CHECKS, ids=lambda m: m.CHECK.id)
def test_healthy_pod_passes_through_evaluate_check(module: Any) -> None:
    result, facts = evaluate_check(module.CHECK, HEALTHY, pod_vars(), "raw/trainer-0/x.txt")
    assert result.status == "PASS", result.message
    assert result.checklist == "2" and "pod default/test-sriov-1 on node worker-0" in result.message
    assert facts is not None


@pytest.mark.parametrize("module", POD_CHECKS, ids=lambda m: m.CHECK.id)
def test_hosts_that_are_not_pods_skip(module: Any) -> None:
    result, _ = evaluate_check(module.CHECK, HEALTHY, Vars({"expected_hca_count": 8}, host="gpu07"), None)
    assert result.status == "SKIP" and "gpu07 is not a Kubernetes pod" in result.message


def test_no_uverbs_in_the_pod_fails_naming_pod_and_node() -> None:
    outcome = judge(
        k8s_rdma_devices.CHECK,
        pod_vars(),
        dev_infiniband=out(rc=2),
        ibv_devinfo=out(text="No IB devices found\n"),
    )
    assert outcome.status == "FAIL"
    assert "pod default/test-sriov-1 on node worker-0 has no /dev/infiniband" in outcome.message
    assert "it requests rdma/rdma_shared_device_ib: 1" in outcome.message
    assert "hostPath" in outcome.remediation


def test_fewer_hcas_in_the_pod_than_expected() -> None:
    outcome = judge(k8s_rdma_devices.CHECK, pod_vars(expected_hca_count=16))
    assert outcome.status == "FAIL" and "sees 8 InfiniBand ports" in outcome.message


def test_resource_not_requested_and_unallocated_gpus() -> None:
    missing = judge(k8s_resources.CHECK, pod_vars(expected_k8s_resources=["nvidia.com/hostdev"]))
    assert missing.status == "FAIL" and "does not request nvidia.com/hostdev" in missing.message
    globbed = judge(k8s_resources.CHECK, pod_vars(expected_k8s_resources="rdma/*"))
    assert globbed.status == "PASS"
    unseen = judge(k8s_resources.CHECK, pod_vars(), dev_nvidia=out(), gpu_list=out(text="", rc=127))
    assert unseen.status == "FAIL" and "requested 1 GPUs but sees 0" in unseen.message
    few = judge(k8s_resources.CHECK, pod_vars(expected_gpu_count=8))
    assert few.status == "FAIL" and "requests 1 nvidia.com/gpu, expected 8" in few.message


EIGHT_GPUS = {
    "dev_nvidia": out(text="\n".join(f"nvidia{i}" for i in range(8)) + "\n"),
    "gpu_list": out(text="".join(f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i})\n" for i in range(8))),
}


def test_privileged_pod_on_the_nodes_dev_infiniband_warns_naming_pod_and_resource() -> None:
    """oci-hpc-oke's MPI worker (captured/k8s_pod/SOURCE): it works, NCCL finds every HCA, but no device
    plugin handed them out, so the scheduler's accounting knows nothing of them."""
    worker = pod_vars("privileged_hostpath_infiniband_pod.json", host="worker-0")
    outcome = judge(k8s_resources.CHECK, worker, **EIGHT_GPUS)
    assert outcome.status == "WARN", outcome.message
    assert outcome.message.startswith(
        "pod default/nccl-test-worker-0 on node worker-0 reaches the node's HCAs"
    )
    assert (
        "privileged: true and hostPath /dev/infiniband (volume devinf in container mpi-worker)"
        in outcome.message
    )
    assert "without requesting an RDMA or SR-IOV device-plugin resource (no rdma/*" in outcome.message
    assert "rdma/rdma_shared_device_a" in (outcome.remediation or "")
    the_same_pod = k8s_resources.CHECK.parse({**HEALTHY, **EIGHT_GPUS}, worker)["pod"]
    for resource in ("rdma/rdma_shared_device_a", "nvidia.com/hostdev", "openshift.io/mlnxnics"):
        asked = {**the_same_pod, "resources": {**the_same_pod["resources"], resource: 1}}
        assert k8s_resources.rdma_bypass(asked) is None, resource
    unprivileged = {**the_same_pod, "privileged": False}
    assert k8s_resources.rdma_bypass(unprivileged) is None, (
        "without privileged the hostPath gives no device access"
    )


def test_pending_pod_names_the_insufficient_resource() -> None:
    pending = pod_vars("pending_insufficient_rdma.json", host="trainer-1")
    pending = Vars({k: v for k, v in pending.items() if k != "diagnose_k8s_node"}, host="trainer-1")
    outcome = judge(k8s_resources.CHECK, pending)
    assert outcome.status == "FAIL"
    assert "no node can give it rdma/rdma_shared_device_a:" in outcome.message
    assert "(not scheduled)" in outcome.message


def test_multus_network_missing_and_vf_without_ip() -> None:
    missing = judge(k8s_networks.CHECK, pod_vars(expected_k8s_networks=["default/sriov-net-b"]))
    assert missing.status == "FAIL" and "network default/sriov-net-b is not attached" in missing.message
    noip = judge(k8s_networks.CHECK, pod_vars("vf_without_ip_networks_status.json"))
    assert noip.status == "FAIL"
    assert "CNI assigned no IP to (no interface) (network sriov-network)" in noip.message
    gone = judge(k8s_networks.CHECK, pod_vars(), ip_addr=out("k8s_pod/ip_o_addr_eth0_only.txt"))
    assert (
        gone.status == "FAIL" and "interface net1 of network default/sriovnet1 does not exist" in gone.message
    )
    subnet = judge(k8s_networks.CHECK, pod_vars(expected_k8s_subnet="192.168.0.0/16"))
    assert subnet.status == "FAIL" and "outside 192.168.0.0/16" in subnet.message
    assert judge(k8s_networks.CHECK, pod_vars(expected_k8s_subnet="10.56.217.0/24")).status == "PASS"


def test_networks_fallback_without_iproute2() -> None:
    fallback = "# no ip\n# link eth0 0a:58:0a:80:00:c3\n# link net1 6e:2c:1b:a4:50:07\nLocal:\n  +-- 10.56.217.0/24 2 0 2\n     |-- 10.56.217.1\n        /32 host LOCAL\n"
    assert judge(k8s_networks.CHECK, pod_vars(), ip_addr=out(text=fallback)).status == "PASS"


def test_default_64_mib_shm_fails() -> None:
    outcome = judge(k8s_shm.CHECK, pod_vars(), shm=out("k8s_pod/df_shm_64m.txt"))
    assert outcome.status == "FAIL" and "64 MiB default" in outcome.message
    assert "medium: Memory" in outcome.remediation
    assert judge(k8s_shm.CHECK, pod_vars(min_shm_mib=32), shm=out("k8s_pod/df_shm_64m.txt")).status == "PASS"


def test_unfinished_command_is_an_error_for_a_pod() -> None:
    result, _ = evaluate_check(
        k8s_shm.CHECK, {"shm": CommandOutput(error="connection lost")}, pod_vars(), None
    )
    assert result.status == "ERROR"


def _facts(check: Check, vars_: Vars, **changes: CommandOutput) -> Any:
    return check.parse({**HEALTHY, **changes}, vars_)


def test_host_parity_names_what_the_pod_misses() -> None:
    pod = pod_vars()
    node = Vars({"ansible_host": "worker-0"}, host="gpu07")
    facts = {
        "gpu07": {
            "ib.devices": {"devices": [{"name": f"mlx5_{i}"} for i in range(8)]},
            "nccl.version": {"version": "2.21.5"},
        },
        "trainer-0": {
            "k8s.rdma_devices": _facts(
                k8s_rdma_devices.CHECK, pod, dev_infiniband=out(rc=2), ibv_devinfo=out()
            ),
            "k8s.resources": _facts(k8s_resources.CHECK, pod),
            "nccl.version": {"version": "2.18.1"},
        },
    }
    outcomes = k8s_host_parity.judge(facts, {"trainer-0": pod, "gpu07": node})
    assert [o.status for o in outcomes] == ["FAIL"] and outcomes[0].host == "trainer-0"
    assert "node gpu07 has 8 HCAs, pod trainer-0 sees 0" in outcomes[0].message
    assert "pod trainer-0 loads 2.18.1" in outcomes[0].message
    alone = k8s_host_parity.judge({"trainer-0": facts["trainer-0"]}, {"trainer-0": pod})
    assert alone[0].status == "SKIP"
