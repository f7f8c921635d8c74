"""The per-host and cluster rules on facts: the healthy case of each check, then each fault it must name.

Facts are parsed from the real captured outputs in tests/fixtures/captured (see the SOURCE files there);
expected values come from the shipped hardware profiles, overridden the way an inventory would.
"""

from __future__ import annotations

import copy
import json
import subprocess
from typing import Any

import pytest

from diagnose.catalog.loading import load_catalog
from diagnose.checks import (
    gpu_gpudirect,
    gpu_topology,
    host_os,
    ib_consistency,
    ib_devices,
    ib_link_rate,
    ib_mtu,
    ib_port_state,
    nccl_env,
    nccl_version,
    versions_consistency,
)
from diagnose.core.check import Check
from diagnose.core.model import CommandOutput
from diagnose.core.vars import Vars
from diagnose.engine.environment import environment_from_facts
from tests.support.paths import CAPTURED, FACTS
from tests.support.rulekit import MISSING, profile

UVERBS_8 = "\n".join(["rdma_cm", *(f"uverbs{i}" for i in range(8))])


def out(fixture: str | None = None, text: str = "", rc: int = 0) -> CommandOutput:
    return CommandOutput(stdout=(CAPTURED / fixture).read_text() if fixture else text, exit_code=rc)


def facts_of(check: Check, vars_: Vars, **outputs: CommandOutput) -> dict[str, Any]:
    return check.parse(outputs, vars_)


# ------------------------------------------------------------------------------------------- ib.devices


def test_devices_healthy_h100() -> None:
    v = profile("h100-8x-ndr400")
    facts = facts_of(
        ib_devices.CHECK,
        v,
        dev_infiniband=out(text=UVERBS_8),
        ibv_devinfo=out("ibv_devinfo/h100_cx7_ib_8hca.txt"),
    )
    outcome = ib_devices.judge(facts, v)
    assert outcome.status == "PASS", outcome.message
    assert "8 InfiniBand ports" in outcome.message


def test_devices_lent_h200_says_plainly_there_is_no_hca() -> None:
    v = profile("single-node-nvlink", host="vm")
    facts = facts_of(
        ib_devices.CHECK, v, dev_infiniband=out("ibv_devinfo/dev_infiniband_h200x4.txt"), ibv_devinfo=MISSING
    )
    outcome = ib_devices.judge(facts, v)
    assert outcome.status == "SKIP"
    assert "no HCA on vm" in outcome.message
    assert "holds only rdma_cm" in outcome.message
    assert "profile single-node-nvlink expects no RDMA fabric" in outcome.message


def test_devices_rdma_cm_only_fails_where_a_fabric_is_expected() -> None:
    v = profile("h200-8x-ndr400")
    facts = facts_of(
        ib_devices.CHECK, v, dev_infiniband=out("ibv_devinfo/dev_infiniband_h200x4.txt"), ibv_devinfo=MISSING
    )
    outcome = ib_devices.judge(facts, v)
    assert outcome.status == "FAIL"
    assert "no HCA driver registered" in outcome.message


def test_devices_no_dev_infiniband() -> None:
    v = profile("h100-8x-ndr400")
    facts = facts_of(ib_devices.CHECK, v, dev_infiniband=out(rc=2), ibv_devinfo=MISSING)
    outcome = ib_devices.judge(facts, v)
    assert outcome.status == "FAIL"
    assert "no /dev/infiniband on node1" in outcome.message


def test_devices_missing_ibv_devinfo_is_an_error_naming_tool_and_host() -> None:
    v = profile("h100-8x-ndr400")
    facts = facts_of(ib_devices.CHECK, v, dev_infiniband=out(text=UVERBS_8), ibv_devinfo=MISSING)
    outcome = ib_devices.judge(facts, v)
    assert outcome.status == "ERROR"
    assert "ibv_devinfo is missing on node1" in outcome.message


def test_devices_efa_told_apart_from_infiniband_and_from_no_rdma() -> None:
    facts_ib = profile("h100-8x-ndr400")
    facts = facts_of(
        ib_devices.CHECK,
        facts_ib,
        dev_infiniband=out(text="rdma_cm\nuverbs0"),
        ibv_devinfo=out("ibv_devinfo/efa_rdma_core_884.txt"),
    )
    on_ib = ib_devices.judge(facts, facts_ib)
    assert on_ib.status == "FAIL"
    assert "EFA (AWS Elastic Fabric Adapter)" in on_ib.message
    assert ib_devices.judge(facts, profile("p5-efa")).status == "FAIL"  # 1 of 32 expected
    assert ib_devices.judge(facts, profile("p5-efa", expected_hca_count=1)).status == "PASS"


# ----------------------------------------------------------------------------------------- ib.port_state


@pytest.mark.parametrize(
    "fixture", ["ibstat/h100_cx7_ndr400_8hca_bond.txt", "ibstat/h100_ib_active_ethernet_down.txt"]
)
def test_port_state_healthy_ignores_ethernet_management_ports(fixture: str) -> None:
    v = profile("h100-8x-ndr400")
    outcome = ib_port_state.judge(facts_of(ib_port_state.CHECK, v, ibstat=out(fixture)), v)
    assert outcome.status == "PASS", outcome.message
    assert outcome.observed == "8 of 8 InfiniBand ports Active"


def test_port_state_ibpanic_is_a_warning_when_the_ports_are_all_there() -> None:
    v = profile("a100-8x-hdr200")
    outcome = ib_port_state.judge(
        facts_of(ib_port_state.CHECK, v, ibstat=out("ibstat/a100_hdr200_8hca_ibpanic.txt")), v
    )
    assert outcome.status == "WARN"
    assert "mlx5_8" in outcome.message


def test_port_state_down_polling_port_fails() -> None:
    v = profile("h100-8x-ndr400", expected_hca_count=1)
    outcome = ib_port_state.judge(
        facts_of(ib_port_state.CHECK, v, ibstat=out("ibstat/mlx4_dualport_ib_polling_eth_disabled.txt")), v
    )
    assert outcome.status == "FAIL"
    assert "mlx4_0/1 Down/Polling" in outcome.message
    assert "mlx4_0/2" not in outcome.message  # the Ethernet port is not a fabric port


def test_port_state_initializing_points_at_the_subnet_manager() -> None:
    v = profile("a100-8x-hdr200", expected_hca_count=1)
    outcome = ib_port_state.judge(
        facts_of(ib_port_state.CHECK, v, ibstat=out("ibstat/cx6_hdr_initializing.txt")), v
    )
    assert outcome.status == "FAIL"
    assert "Initializing/LinkUp" in outcome.message
    assert "subnet manager" in outcome.remediation


def test_port_state_roce_host_under_an_infiniband_profile() -> None:
    v = profile("h100-8x-ndr400")
    facts = facts_of(ib_port_state.CHECK, v, ibstat=out("ibstat/roce_cx7_down_polling.txt"))
    outcome = ib_port_state.judge(facts, v)
    assert outcome.status == "FAIL"
    assert "no InfiniBand port" in outcome.message and "Ethernet (RoCE)" in outcome.message
    roce = profile("h100-8x-ndr400", expected_link_layer="Ethernet")
    warned = ib_port_state.judge(facts, roce)
    assert warned.status == "WARN"  # 10 Active >= 8 expected, two more Down
    assert "mlx5_11/1 Down/Polling" in warned.message


def test_port_state_efa() -> None:
    v = profile("p5-efa", expected_hca_count=1)
    outcome = ib_port_state.judge(
        facts_of(ib_port_state.CHECK, v, ibstat=out("ibstat/efa_amzn_drivers_114.txt")), v
    )
    assert outcome.status == "PASS", outcome.message


def test_port_state_empty_ibstat() -> None:
    facts = facts_of(ib_port_state.CHECK, profile("h100-8x-ndr400"), ibstat=out(text=""))
    assert ib_port_state.judge(facts, profile("h100-8x-ndr400")).status == "FAIL"
    skipped = ib_port_state.judge(facts, profile("single-node-nvlink"))
    assert skipped.status == "SKIP" and "expects no RDMA fabric" in skipped.message


def test_ib_checks_have_the_profile_reason_for_a_missing_tool() -> None:
    for check in (ib_devices.CHECK, ib_port_state.CHECK, ib_link_rate.CHECK, ib_mtu.CHECK):
        assert check.no_hardware(profile("h100-8x-ndr400")) is None
        assert "expects no RDMA fabric" in check.no_hardware(profile("single-node-nvlink"))


# ------------------------------------------------------------------------------------------ ib.link_rate


def test_link_rate_ndr400_healthy() -> None:
    v = profile("h100-8x-ndr400")
    outcome = ib_link_rate.judge(
        facts_of(ib_link_rate.CHECK, v, ibstat=out("ibstat/h100_cx7_ndr400_8hca_bond.txt")), v
    )
    assert outcome.status == "PASS"
    assert outcome.observed == "8x 400 Gb/s"


def test_link_rate_hdr200_ports_under_an_ndr400_profile() -> None:
    facts = facts_of(ib_link_rate.CHECK, Vars(), ibstat=out("ibstat/a100_hdr200_8hca_ibpanic.txt"))
    outcome = ib_link_rate.judge(facts, profile("h100-8x-ndr400"))
    assert outcome.status == "FAIL"
    assert "mlx5_0/1 at 200 Gb/s" in outcome.message
    assert ib_link_rate.judge(facts, profile("a100-8x-hdr200")).status == "PASS"


# ------------------------------------------------------------------------------------------------ ib.mtu


def test_mtu_healthy_and_differing() -> None:
    facts = facts_of(ib_mtu.CHECK, Vars(), ibv_devinfo=out("ibv_devinfo/h100_cx7_ib_8hca.txt"))
    assert ib_mtu.judge(facts, profile("h100-8x-ndr400")).status == "PASS"
    outcome = ib_mtu.judge(facts, profile("h100-8x-ndr400", expected_mtu=2048))
    assert outcome.status == "FAIL"
    assert "active MTU differs from 2048 on node1: all 8 InfiniBand ports at 4096" in outcome.message


def test_mtu_ignores_down_roce_ports() -> None:
    facts = facts_of(ib_mtu.CHECK, Vars(), ibv_devinfo=out("ibv_devinfo/cx7_roce_two_ports_down.txt"))
    v = profile("h100-8x-ndr400", expected_link_layer="Ethernet", expected_hca_count=2)
    outcome = ib_mtu.judge(facts, v)
    assert outcome.status == "PASS", outcome.message
    assert outcome.observed == "active_mtu 2x 4096"


# ------------------------------------------------------------------------------------------ gpu.topology


def topo_facts(smi: str, topo: str) -> dict[str, Any]:
    return facts_of(gpu_topology.CHECK, Vars(), nvidia_smi=out(smi), topo=out(topo))


def test_topology_healthy_h100() -> None:
    facts = topo_facts("nvidia_smi/h100_sxm_8gpu_565.txt", "topo/h100_8gpu_8nic_pix.txt")
    assert (facts["gpu_count"], facts["gpu_model"]) == (8, "NVIDIA H100 80GB HBM3")
    outcome = gpu_topology.judge(facts, profile("h100-8x-ndr400"))
    assert outcome.status == "PASS", outcome.message
    assert "NVLink on every pair (NV18)" in outcome.observed
    assert "NUMA 0: GPU0, GPU1, GPU2, GPU3, NUMA 1: GPU4, GPU5, GPU6, GPU7" in outcome.observed


def test_topology_lent_h200_under_single_node_profile() -> None:
    facts = topo_facts("nvidia_smi/h200x4_580.txt", "topo/h200x4_no_nic_ansi.txt")
    outcome = gpu_topology.judge(facts, profile("single-node-nvlink"))
    assert outcome.status == "PASS", outcome.message
    assert outcome.observed.startswith("4x NVIDIA H200; NVLink on every pair (NV18)")


def test_topology_h200_vm_under_an_8_gpu_profile() -> None:
    facts = topo_facts("nvidia_smi/h200x4_580.txt", "topo/h200x4_no_nic_ansi.txt")
    outcome = gpu_topology.judge(facts, profile("h200-8x-ndr400"))
    assert outcome.status == "FAIL"
    assert "4 GPUs, expected 8" in outcome.message
    assert "shows no NIC" in outcome.message


def test_topology_missing_gpu_and_wrong_model() -> None:
    facts = topo_facts("nvidia_smi/b300_7gpu_610_kmd.txt", "topo/b300_7gpu_no_nic.txt")
    assert (facts["driver"], facts["cuda"]) == ("610.57.04", "13.3")
    outcome = gpu_topology.judge(facts, profile("h100-8x-ndr400"))
    assert outcome.status == "FAIL"
    assert "7 GPUs, expected 8" in outcome.message
    assert "NVIDIA B300 SXM6 AC is not H100" in outcome.message


def test_topology_without_nvlink() -> None:
    facts = topo_facts("nvidia_smi/h100_sxm_8gpu_565.txt", "topo/h100_pcie_matrix_12nic_topo_mp.txt")
    outcome = gpu_topology.judge(facts, profile("h100-8x-ndr400"))
    assert outcome.status == "FAIL"
    assert "28 GPU pairs without NVLink (GPU0-GPU1 NODE" in outcome.message


def test_topology_nic_far_from_a_gpu_is_a_warning() -> None:
    facts = copy.deepcopy(topo_facts("nvidia_smi/h100_sxm_8gpu_565.txt", "topo/h100_8gpu_8nic_pix.txt"))
    facts["nearest_nic"]["GPU3"] = {"relation": "NODE", "nic": "mlx5_2"}
    outcome = gpu_topology.judge(facts, profile("h100-8x-ndr400"))
    assert outcome.status == "WARN"
    assert "GPU3 nearest NIC mlx5_2 is NODE" in outcome.message
    assert gpu_topology.judge(facts, profile("single-node-nvlink")).status == "PASS"


def test_topology_dgx_a100_pxb_nics_are_local() -> None:
    facts = topo_facts("nvidia_smi/h100_sxm_8gpu_565.txt", "topo/dgx_a100_mlx5_columns.txt")
    assert {v["relation"] for v in facts["nearest_nic"].values()} == {"PXB"}
    assert facts["nearest_nic"]["GPU4"]["nic"] == "mlx5_6"


def test_topology_cpu_testbed_skips() -> None:
    facts = topo_facts("nvidia_smi/h200x4_580.txt", "topo/h200x4_no_nic_ansi.txt")
    assert gpu_topology.judge(facts, profile("cpu-testbed")).status == "SKIP"
    assert "expects no GPU" in gpu_topology.CHECK.no_hardware(profile("cpu-testbed"))


def scoped_h200(visible: str | None, **more: str) -> dict[str, Any]:
    """The lent 4x H200 node's outputs with CUDA_VISIBLE_DEVICES (and other variables) as `env` prints them."""
    env = {**({"CUDA_VISIBLE_DEVICES": visible} if visible is not None else {}), **more}
    return facts_of(
        gpu_topology.CHECK,
        Vars(),
        nvidia_smi=out("nvidia_smi/h200x4_580.txt"),
        topo=out("topo/h200x4_no_nic_ansi.txt"),
        gpu_visibility=out(text="".join(f"{k}={v}\n" for k, v in env.items())),
        gpu_list=out(text="", rc=64),
    )


def test_topology_counts_the_gpus_cuda_sees_and_says_which_are_out_of_scope() -> None:
    """Issue 33: `CUDA_VISIBLE_DEVICES=0 diagnose run` on the lent 4x H200 counted four GPUs."""
    facts = scoped_h200("0")
    assert (facts["gpu_count"], facts["visible_gpu_count"]) == (4, 1)
    outcome = gpu_topology.judge(facts, profile("single-node-nvlink"))
    assert outcome.status == "PASS", outcome.message
    assert "1 of 4 GPUs visible (CUDA_VISIBLE_DEVICES=0); GPUs 1, 2, 3 not in scope" in outcome.message
    expected = gpu_topology.judge(facts, profile("single-node-nvlink", expected_gpu_count=4))
    assert expected.status == "WARN" and expected.action == "check_config"
    assert "only 1 of the 4 expected GPUs in scope, the others not tested" in expected.message
    everything = scoped_h200(None, NVIDIA_VISIBLE_DEVICES="all")
    assert (everything["visible_gpu_count"], everything["visible_note"]) == (4, None)


def test_topology_fails_a_visible_devices_entry_that_names_no_gpu() -> None:
    none = gpu_topology.judge(scoped_h200("7"), profile("single-node-nvlink"))
    assert none.status == "FAIL" and none.action == "check_config"
    assert none.message.startswith("node1: CUDA programs see none of the 4 GPUs: 0 of 4 GPUs visible ")
    assert "(CUDA_VISIBLE_DEVICES=7); CUDA stops at entry '7'" in none.message
    assert "CUDA_VISIBLE_DEVICES" in (none.remediation or "")
    partly = gpu_topology.judge(scoped_h200("1,7,2"), profile("single-node-nvlink"))
    assert partly.status == "WARN"
    assert (
        "CUDA stops at entry '7', which names no GPU of this host (or one named before), and ignores it "
        "and the 1 after it; GPUs 0, 2, 3 not in scope" in partly.message
    )


# ----------------------------------------------------------------------------------------- gpu.gpudirect


def gpudirect_facts(modules: str, version: CommandOutput, uname: str) -> dict[str, Any]:
    return facts_of(
        gpu_gpudirect.CHECK, Vars(), modules=out(modules), nvidia_version=version, uname=out(uname)
    )


def test_gpudirect_peermem() -> None:
    facts = gpudirect_facts(
        "gpudirect/modules_gpu_operator_peermem.txt",
        out("gpudirect/nvidia_version_proprietary_515.txt"),
        "gpudirect/uname_dgx_a100_5_4.txt",
    )
    outcome = gpu_gpudirect.judge(facts, profile("h100-8x-ndr400"))
    assert outcome.status == "PASS"
    assert outcome.observed == "nvidia_peermem loaded"


def test_gpudirect_dmabuf_on_the_lent_h200_states_its_reasoning() -> None:
    facts = gpudirect_facts(
        "gpudirect/modules_h200x4_proc.txt",
        out("gpudirect/nvidia_version_open_580.txt"),
        "gpudirect/uname_h200x4.txt",
    )
    outcome = gpu_gpudirect.judge(facts, profile("h200-8x-ndr400"))
    assert outcome.status == "PASS"
    assert (
        "DMA-BUF possible: open NVIDIA kernel module 580.159.04, Linux 6.18.44-fc-v657-gpu (>= 5.12)"
        in outcome.message
    )


def test_gpudirect_none_fails_where_a_fabric_is_expected() -> None:
    facts = gpudirect_facts(
        "gpudirect/modules_h200x4_proc.txt",
        out("gpudirect/nvidia_version_proprietary_515.txt"),
        "gpudirect/uname_dgx_a100_5_4.txt",
    )
    outcome = gpu_gpudirect.judge(facts, profile("h100-8x-ndr400"))
    assert outcome.status == "FAIL"
    assert "proprietary NVIDIA kernel module 515.76 (DMA-BUF needs the open one)" in outcome.message
    assert "Linux 5.4.0-200-generic (< 5.12)" in outcome.message
    assert gpu_gpudirect.judge(facts, profile("single-node-nvlink")).status == "SKIP"
    assert gpu_gpudirect.judge(facts, profile("cpu-testbed")).status == "SKIP"


def test_gpudirect_open_module_on_an_old_kernel() -> None:
    facts = gpudirect_facts(
        "gpudirect/modules_h200x4_proc.txt",
        out("gpudirect/nvidia_version_open_580.txt"),
        "gpudirect/uname_dgx_a100_5_4.txt",
    )
    outcome = gpu_gpudirect.judge(facts, profile("h100-8x-ndr400"))
    assert outcome.status == "FAIL"
    assert "DMA-BUF not possible: open NVIDIA kernel module 580.159.04, Linux 5.4.0-200-generic (< 5.12)" in (
        outcome.message
    )


def test_gpudirect_no_driver_at_all() -> None:
    facts = gpudirect_facts("gpudirect/modules_h200x4_proc.txt", out(rc=1), "gpudirect/uname_h200x4.txt")
    outcome = gpu_gpudirect.judge(facts, profile("h100-8x-ndr400"))
    assert outcome.status == "FAIL"
    assert "no NVIDIA kernel module loaded" in outcome.message


# ------------------------------------------------------------------------------------------ nccl.version


def version_facts(torch: CommandOutput, libs: str = "", libs_text: str = "") -> dict[str, Any]:
    return facts_of(
        nccl_version.CHECK, Vars(), torch_probe=torch, nccl_libs=out(libs) if libs else out(text=libs_text)
    )


def test_nccl_version_from_torch_on_the_lent_h200() -> None:
    facts = version_facts(out("nccl_version/torch_h200x4.txt"), "nccl_version/libs_h200x4.txt")
    assert (facts["version"], facts["source"], facts["torch"]) == ("2.28.9", "torch", "2.11.0+cu130")
    outcome = nccl_version.judge(facts, profile("single-node-nvlink"))
    assert outcome.status == "PASS"
    assert "torch.cuda.nccl.version() in /opt/torch/.venv/bin/python3" in outcome.message
    assert "system NCCL 2.28.3 also installed" in outcome.message


def test_nccl_version_probes_the_python_the_benchmarks_run() -> None:
    """``bench_python`` names the Python with torch the benchmarks launch; the probe must ask that one,
    not the login's interpreter, or a host whose torch lives in a venv reads as "torch not importable"."""

    def probe(**values: str) -> str:
        (command,) = [c for c in nccl_version.CHECK.commands_for(Vars(values)) if c.key == "torch_probe"]
        return command.script

    assert probe().startswith("python3 -c ")
    assert probe(ansible_python_interpreter="/usr/bin/python3.12").startswith("/usr/bin/python3.12 -c ")
    venv = probe(ansible_python_interpreter="/usr/bin/python3", bench_python="/opt/my venv/bin/python")
    assert venv.startswith("'/opt/my venv/bin/python' -c ")


def test_nccl_version_falls_back_to_the_system_library_then_the_package() -> None:
    cpu = out("nccl_version/torch_cpu_build_devbox.txt")
    resolved = version_facts(cpu, "nccl_version/libs_h200x4_resolved.txt")
    assert (resolved["version"], resolved["source"]) == ("2.28.3", "ldconfig")
    package = version_facts(cpu, "nccl_version/libs_h200x4.txt")
    assert (package["version"], package["source"]) == ("2.28.3", "dpkg")
    assert package["torch"] == "2.13.0+cpu"


def test_nccl_version_none_found() -> None:
    facts = version_facts(out("nccl_version/torch_cpu_build_devbox.txt"))
    failed = nccl_version.judge(facts, profile("h100-8x-ndr400"))
    assert failed.status == "FAIL"
    assert "torch has no NCCL" in failed.message
    assert nccl_version.judge(facts, profile("cpu-testbed")).status == "SKIP"


def test_nccl_version_says_whether_the_host_has_an_nvidia_gpu_for_the_torch_remedy() -> None:
    """Read from the PCI bus and device nodes, since nvidia-smi is missing exactly where the driver is."""
    cases = {
        case: json.loads((FACTS / "nvidia_presence" / f"{case}.json").read_text())
        for case in ("devbox_without_gpu", "xe9680_h100_and_nvswitch", "no_bus_no_node")
    }
    torch = out("nccl_version/torch_cpu_build_devbox.txt")
    for case, expected in (
        ("devbox_without_gpu", False),
        ("xe9680_h100_and_nvswitch", True),
        ("no_bus_no_node", None),
    ):
        presence = out(text="\n".join(cases[case]["output"]))
        facts = facts_of(
            nccl_version.CHECK, Vars(), torch_probe=torch, nccl_libs=out(), nvidia_presence=presence
        )
        assert facts["nvidia_gpu"] is expected, case
    assert version_facts(torch)["nvidia_gpu"] is None, "a presence never read says nothing"
    assert "nvidia_presence" in [command.key for command in nccl_version.commands_for(Vars())]


def test_nccl_version_uses_the_hosts_interpreter() -> None:
    probe, *_ = nccl_version.commands_for(
        Vars({"ansible_python_interpreter": "/opt/torch/.venv/bin/python3"})
    )
    assert probe.script.startswith("/opt/torch/.venv/bin/python3 -c ")
    default, *_ = nccl_version.commands_for(Vars())
    assert default.script.startswith("python3 -c ")


# ---------------------------------------------------------------------------------------------- nccl.env


def env_facts(lines: list[str]) -> dict[str, Any]:
    return facts_of(nccl_env.CHECK, Vars(), nccl_env=out(text="\n".join(lines)))


def conf_dump(
    env: list[str], etc: list[str], ifaces: list[str] = ("eth0", "lo"), rdma: list[str] = ()
) -> list[str]:
    """This check's output format: environment lines, conf sections, interface and HCA listings."""
    return [
        *env,
        "@@nccl-conf-absent /root/.nccl.conf",
        "@@nccl-conf /etc/nccl.conf",
        *etc,
        "@@net-interfaces",
        *ifaces,
        "@@rdma-devices",
        *rdma,
    ]


def test_nccl_env_lent_h200_is_clean() -> None:
    facts = facts_of(nccl_env.CHECK, Vars(), nccl_env=out("nccl_env/h200x4_no_conf.txt"))
    outcome = nccl_env.judge(facts, profile("single-node-nvlink"))
    assert outcome.status == "PASS"
    assert outcome.observed == "NCCL_NVLS_ENABLE=0"


def test_nccl_env_socket_ifname_naming_a_missing_interface() -> None:
    facts = facts_of(nccl_env.CHECK, Vars(), nccl_env=out("nccl_env/etc_conf_docs_example.txt"))
    outcome = nccl_env.judge(facts, profile("h100-8x-ndr400"))
    assert outcome.status == "FAIL"
    assert "NCCL_SOCKET_IFNAME==ens1f0 (from /etc/nccl.conf) names ens1f0" in outcome.message


def test_nccl_env_p2p_disabled_in_etc_nccl_conf() -> None:
    outcome = nccl_env.judge(env_facts(conf_dump([], ["NCCL_P2P_DISABLE=1"])), profile("h100-8x-ndr400"))
    assert outcome.status == "FAIL"
    assert "NCCL_P2P_DISABLE=1 (from /etc/nccl.conf)" in outcome.message


def test_nccl_env_environment_wins_over_the_conf_file() -> None:
    facts = env_facts(conf_dump(["NCCL_P2P_DISABLE=0"], ["NCCL_P2P_DISABLE=1"]))
    assert nccl_env.judge(facts, profile("h100-8x-ndr400")).status == "PASS"


def test_nccl_env_ib_disabled_and_shm_disabled() -> None:
    facts = env_facts(conf_dump(["NCCL_IB_DISABLE=1", "NCCL_SHM_DISABLE=1"], []))
    assert nccl_env.judge(facts, profile("h100-8x-ndr400")).status == "FAIL"
    single = nccl_env.judge(facts, profile("single-node-nvlink"))
    assert single.status == "WARN"
    assert "NCCL_SHM_DISABLE=1 (from the environment)" in single.message


def test_nccl_env_too_many_sockets() -> None:
    facts = env_facts(conf_dump(["NCCL_SOCKET_NTHREADS=16", "NCCL_NSOCKS_PERTHREAD=8"], []))
    outcome = nccl_env.judge(facts, profile("h100-8x-ndr400"))
    assert outcome.status == "WARN"
    assert "16 x 8 = 128 > 64: NCCL lowers NSOCKS_PERTHREAD to 4" in outcome.message


def test_nccl_env_ib_hca_naming_devices_the_host_lacks() -> None:
    facts = env_facts(conf_dump(["NCCL_IB_HCA=mlx5_0:1,mlx5_1"], [], rdma=["mlx5_0"]))
    outcome = nccl_env.judge(facts, profile("h100-8x-ndr400"))
    assert outcome.status == "FAIL"
    assert "names mlx5_1, which node1 lacks (has mlx5_0)" in outcome.message
    excluded = env_facts(conf_dump(["NCCL_IB_HCA=^mlx5_9"], [], rdma=["mlx5_0"]))
    assert nccl_env.judge(excluded, profile("h100-8x-ndr400")).status == "PASS"
    prefix = env_facts(conf_dump(["NCCL_IB_HCA=mlx5"], [], rdma=["mlx5_0", "mlx5_3"]))
    assert nccl_env.judge(prefix, profile("h100-8x-ndr400")).status == "PASS"


def test_nccl_env_not_judged_on_cpu_hosts() -> None:
    facts = env_facts(conf_dump(["NCCL_P2P_DISABLE=1"], []))
    assert nccl_env.judge(facts, profile("cpu-testbed")).status == "SKIP"


# ------------------------------------------------------------------------------------------ cluster rules


def cluster_versions(nccl: dict[str, str]) -> dict[str, dict[str, Any]]:
    return {
        host: {
            "nccl.version": {"version": version, "torch": "2.11.0+cu130"},
            "gpu.topology": {"driver": "580.159.04", "cuda": "13.0"},
        }
        for host, version in nccl.items()
    }


def test_versions_consistent() -> None:
    outcomes = versions_consistency.judge(cluster_versions(dict.fromkeys(["n1", "n2", "n3"], "2.28.9")), {})
    assert [(o.status, o.host) for o in outcomes] == [("PASS", None)]
    assert (
        "NCCL 2.28.9, driver 580.159.04, CUDA 13.0, torch 2.11.0+cu130 on all 3 hosts" in outcomes[0].message
    )


def test_versions_odd_host_out_is_named() -> None:
    facts = cluster_versions({"n1": "2.28.9", "n2": "2.28.9", "n3": "2.27.3", "n4": "2.28.9"})
    outcomes = versions_consistency.judge(facts, {})
    assert [(o.status, o.host) for o in outcomes] == [("FAIL", None), ("FAIL", "n3")]
    assert outcomes[1].message == "n3 runs NCCL 2.27.3, the other hosts 2.28.9"
    assert outcomes[0].message == "NCCL differs: 2.27.3 on n3; 2.28.9 on the other 3 hosts"


def test_versions_without_majority_name_every_host() -> None:
    outcomes = versions_consistency.judge(cluster_versions({"n1": "2.28.9", "n2": "2.27.3"}), {})
    assert {o.host for o in outcomes} == {None, "n1", "n2"}
    assert versions_consistency.judge(cluster_versions({"n1": "2.28.9"}), {})[0].status == "SKIP"


def test_ib_consistency_names_the_host_with_another_mtu_and_rate() -> None:
    mtu = ib_mtu.parse({"ibv_devinfo": out("ibv_devinfo/h100_cx7_ib_8hca.txt")}, Vars())
    rate = ib_link_rate.parse({"ibstat": out("ibstat/h100_cx7_ndr400_8hca_bond.txt")}, Vars())
    slow = ib_link_rate.parse({"ibstat": out("ibstat/a100_hdr200_8hca_ibpanic.txt")}, Vars())
    small = copy.deepcopy(mtu)
    for port in small["ports"]:
        port["active_mtu"] = 2048
    facts = {
        "n1": {"ib.mtu": mtu, "ib.link_rate": rate},
        "n2": {"ib.mtu": mtu, "ib.link_rate": slow},
        "n3": {"ib.mtu": small, "ib.link_rate": rate},
    }
    host_vars = {h: profile("h100-8x-ndr400", host=h) for h in facts}
    outcomes = ib_consistency.judge(facts, host_vars)
    named = {(o.host, o.message) for o in outcomes if o.host}
    assert named == {
        ("n3", "n3 has active MTU 2048, the others 4096"),
        ("n2", "n2 has link rate 200 Gb/s, the others 400 Gb/s"),
    }
    assert outcomes[0].host is None and outcomes[0].status == "FAIL"
    healthy = {h: {"ib.mtu": mtu, "ib.link_rate": rate} for h in ("n1", "n2")}
    assert [o.status for o in ib_consistency.judge(healthy, host_vars)] == ["PASS"]


def test_ib_consistency_skips_without_a_fabric() -> None:
    outcomes = ib_consistency.judge({"vm": {}}, {"vm": profile("single-node-nvlink", host="vm")})
    assert [o.status for o in outcomes] == ["SKIP"]


# ------------------------------------------------------------------------------------ environment, os


def test_environment_from_the_facts_of_the_lent_h200() -> None:
    v = profile("single-node-nvlink", host="vm")
    facts = {
        "gpu.topology": topo_facts("nvidia_smi/h200x4_580.txt", "topo/h200x4_no_nic_ansi.txt"),
        "nccl.version": version_facts(out("nccl_version/torch_h200x4.txt"), "nccl_version/libs_h200x4.txt"),
        "host.os": host_os.parse(
            {"os_release": out("os_release/h200x4.txt"), "uname": out("gpudirect/uname_h200x4.txt")}, v
        ),
        "nccl.env": facts_of(nccl_env.CHECK, v, nccl_env=out("nccl_env/h200x4_no_conf.txt")),
    }
    assert environment_from_facts(facts) == {
        "gpu_model": "NVIDIA H200",
        "gpu_count": 4,
        "driver": "580.159.04",
        "cuda": "13.0",
        "nccl": "2.28.9",
        "torch": "2.11.0+cu130",
        "os": "Ubuntu 24.04.3 LTS (kernel 6.18.44-fc-v657-gpu)",
        "nccl_env": {"NCCL_NVLS_ENABLE": "0", "NCCL_VERSION": "2.28.3-1"},
    }
    assert environment_from_facts({})["gpu_model"] is None


# ------------------------------------------------------------------------------------------ the catalog


def test_every_catalog_command_is_valid_posix_sh() -> None:
    """The engine runs each script with ``sh -c``; dash rejects bash-isms that bash would accept."""
    for entry in load_catalog():
        if not isinstance(entry, Check):
            continue
        for command in entry.host_commands(profile("h100-8x-ndr400")):
            checked = subprocess.run(["dash", "-n", "-c", command.script], capture_output=True, text=True)
            assert checked.returncode == 0, f"{entry.id} {command.key}: {checked.stderr}"


def test_shared_command_keys_share_one_script() -> None:
    """Checks sharing a key share one run, so the script and timeout must agree."""
    seen: dict[str, tuple[str, float]] = {}
    for entry in load_catalog():
        if isinstance(entry, Check):
            for command in entry.host_commands(Vars()):
                assert seen.setdefault(command.key, (command.script, command.timeout)) == (
                    command.script,
                    command.timeout,
                ), command.key


def test_devices_an_empty_dev_infiniband_is_said_empty() -> None:
    """An empty /dev/infiniband (the directory there, no entry) read "holds only nothing" (issue 36, item 9)."""
    v = profile("single-node-nvlink", host="vm")
    facts = facts_of(ib_devices.CHECK, v, dev_infiniband=out(text=""), ibv_devinfo=MISSING)
    outcome = ib_devices.judge(facts, v)
    assert "/dev/infiniband is empty (no uverbs device)" in outcome.message
    assert "nothing" not in outcome.message
