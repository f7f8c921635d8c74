"""The host checks on a GB200 compute tray's outputs: nothing judged by what an x86 HGX board looks like.

The outputs are the Grace tray of tests/support/gracekit.py (its docstring names what each follows): four
GB200 on their own PCI domains, every NIC at SYS in topo -m (as a published GB200 tray shows it), the
fabric trained by the rack's switch trays with no fabric manager on the tray, an aarch64 ``uname -m``.
"""

from __future__ import annotations

from diagnose.checks import gpu_fabricmanager, gpu_topology, nccl_version
from diagnose.core.model import CommandOutput, Outcome
from diagnose.parsers.gpu_query import GPU_QUERY
from diagnose.parsers.nvidia_presence import NVIDIA_PRESENCE
from diagnose.parsers.nvidia_smi import model_matches
from tests.support.gracekit import gpu_query, smi_table, topo
from tests.support.rulekit import profile


def _topology(name: str) -> Outcome:
    vars_ = profile(name, host="tray1")
    facts = gpu_topology.parse(
        {"nvidia_smi": CommandOutput(stdout=smi_table()), "topo": CommandOutput(stdout=topo())}, vars_
    )
    return gpu_topology.judge(facts, vars_)


def test_a_gb200_tray_passes_its_topology_with_every_nic_at_sys() -> None:
    outcome = _topology("gb200-nvl72")
    assert outcome.status == "PASS", outcome.message
    assert (
        "4x NVIDIA GB200; NVLink on every pair (NV18); 0 of 4 GPUs with a NIC at PIX/PXB" in outcome.message
    )
    assert "NUMA 0,3-9,11-17: GPU0, GPU1, NUMA 1,19-25,27-33: GPU2, GPU3" in outcome.message


def test_a_b200_profile_does_not_take_a_gb200_for_a_b200() -> None:
    outcome = _topology("b200-8x-ndr400")
    assert outcome.status == "FAIL"
    assert "4 GPUs, expected 8; GPU model NVIDIA GB200 is not B200" in outcome.message
    assert model_matches("B200", "NVIDIA B200") and not model_matches("B200", "NVIDIA GB200")
    assert not model_matches("H200", "NVIDIA GH200 480GB") and model_matches("GH200", "NVIDIA GH200 480GB")
    assert model_matches("A100", "NVIDIA A100-SXM4-80GB") and model_matches("b300", "NVIDIA B300 SXM6 AC")


def test_a_tray_without_a_fabric_manager_credits_the_rack_switch_trays() -> None:
    vars_ = profile("gb200-nvl72", host="tray1")
    outputs = {
        GPU_QUERY.key: CommandOutput(stdout=gpu_query()),
        "fabric_manager": CommandOutput(stdout="systemctl inactive\nprocess none\n"),
    }
    facts = gpu_fabricmanager.parse(outputs, vars_)
    outcome = gpu_fabricmanager.judge(facts, vars_)
    assert outcome.status == "PASS"
    assert outcome.message.endswith("i.e. managed by the rack's NVLink switch trays")
    hgx = gpu_fabricmanager.judge(facts, profile("b200-8x-ndr400", host="tray1"))
    assert hgx.message.endswith("i.e. managed outside the guest (hypervisor)")


def test_a_cpu_torch_on_an_aarch64_tray_is_told_to_take_pytorchs_cuda_index() -> None:
    vars_ = profile("gb200-nvl72", host="tray1")
    outputs = {
        "torch_probe": CommandOutput(stdout="2.11.0 None None /usr/bin/python3\n"),
        "nccl_libs": CommandOutput(stdout=""),
        NVIDIA_PRESENCE.key: CommandOutput(stdout="pci-functions 42\nmachine aarch64\n"),
    }
    facts = nccl_version.parse(outputs, vars_)
    assert facts["machine"] == "aarch64"
    outcome = nccl_version.judge(facts, vars_)
    assert outcome.status == "FAIL"
    assert outcome.remediation.startswith("tray1 is aarch64, where `pip install torch` gives the CPU build")
    assert "--index-url https://download.pytorch.org/whl/cu130" in outcome.remediation
    x86 = nccl_version.judge({**facts, "machine": "x86_64"}, vars_)
    assert "index-url" not in x86.remediation
