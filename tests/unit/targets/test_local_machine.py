"""The default target's profile follows what `nvidia-smi topo -m` shows, on captured outputs (topo/SOURCE)."""

from __future__ import annotations

import pytest

from diagnose.config.playbook import load_playbook
from diagnose.targets.local_machine import (
    CPU_PROFILE,
    NVLINK_PROFILE,
    PCIE_PROFILE,
    LocalMachine,
    profile_for_topology,
)
from diagnose.targets.resolve import resolve_hosts
from diagnose.targets.sources import HostContext
from tests.support.paths import CAPTURED

TOPO = CAPTURED / "topo"


def topo(name: str) -> str:
    return (TOPO / name).read_text()


@pytest.mark.parametrize(
    ("capture", "profile", "why"),
    [
        ("h200x4_no_nic_ansi.txt", NVLINK_PROFILE, "4 GPUs, NVLink (NV#) on every pair"),
        ("b300_7gpu_no_nic.txt", NVLINK_PROFILE, "7 GPUs, NVLink (NV#) on every pair"),
        (
            "l40s_8gpu_pcie_node_sys.txt",
            PCIE_PROFILE,
            "8 GPUs, 28 of 28 pairs without NVLink (GPU0-GPU1 NODE, GPU0-GPU2 NODE, GPU0-GPU3 NODE and 25 more)",
        ),
        ("h100x1_580_vm.txt", PCIE_PROFILE, "1 GPU, so no GPU pair to join by NVLink"),
    ],
)
def test_profile_follows_the_nvlink_mesh(capture: str, profile: str, why: str) -> None:
    assert profile_for_topology(topo(capture)) == (profile, why)


def test_no_gpu_or_an_unreadable_matrix_chooses_nothing() -> None:
    assert profile_for_topology("No devices were found\n") is None
    assert profile_for_topology("Failed to initialize NVML: Driver/library version mismatch\n") is None


def resolve(source: LocalMachine, extra: dict | None = None) -> tuple[str, str | None]:
    context = HostContext(load_playbook(None), extra_vars=extra or {})
    (host,) = resolve_hosts([source], context)
    return host.vars["diagnose_profile"], source.note


def test_the_default_target_is_judged_with_the_profile_its_topology_fits() -> None:
    one_gpu = LocalMachine(topology=lambda: topo("h100x1_580_vm.txt"), gpu_absent=lambda: None)
    profile, note = resolve(one_gpu)
    assert profile == PCIE_PROFILE
    assert note == (
        "1 GPU, so no GPU pair to join by NVLink (nvidia-smi topo -m): judged with the single-node-pcie "
        "profile (-e diagnose_profile=... to choose)"
    )
    mesh = LocalMachine(topology=lambda: topo("h200x4_no_nic_ansi.txt"), gpu_absent=lambda: None)
    assert resolve(mesh)[0] == NVLINK_PROFILE


def test_a_gpu_nvidia_smi_cannot_read_keeps_the_gpu_profile_and_the_operator_has_the_last_word() -> None:
    broken = LocalMachine(topology=lambda: None, gpu_absent=lambda: None)
    assert resolve(broken) == (NVLINK_PROFILE, None), "a broken driver is the checks' to report"
    chosen = LocalMachine(topology=lambda: topo("l40s_8gpu_pcie_node_sys.txt"), gpu_absent=lambda: None)
    assert resolve(chosen, {"diagnose_profile": NVLINK_PROFILE}) == (NVLINK_PROFILE, None)
    cpu = LocalMachine(
        topology=lambda: pytest.fail("no GPU: nvidia-smi is not asked"), gpu_absent=lambda: "no GPU"
    )
    profile, note = resolve(cpu)
    assert (
        profile == CPU_PROFILE and note is not None and note.startswith("no GPU: judged with the cpu-testbed")
    )
