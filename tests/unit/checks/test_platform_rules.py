"""The platform rules (issue 26) on captured outputs: the healthy H100 node of the test bed first, then each
fault each check must name, and the traps that must stay quiet.

Outputs are the captures in tests/fixtures/captured/{pci,kernel_settings,time_sync,storage,persistence} (see
each SOURCE) and the test bed's healthy node (tests/support/platformkit.py); expected values come from the
shipped profiles, overridden the way an inventory would. Missing tools go through evaluate_check.
"""

from __future__ import annotations

from typing import Any

import pytest

from diagnose.checks import (
    gpu_persistence,
    host_cpu_governor,
    host_iommu,
    host_numa_balancing,
    host_storage,
    host_time_sync,
    pci_acs,
)
from diagnose.config.profile_files import load_profile
from diagnose.core.check import Check
from diagnose.core.model import CommandOutput
from diagnose.core.vars import Vars
from diagnose.engine.evaluate import evaluate_check
from tests.support.paths import CAPTURED
from tests.support.platformkit import GPU_NIC_PORTS, LSPCI, acs_redirect, persistence_off

ALL = (
    pci_acs,
    host_iommu,
    host_numa_balancing,
    host_cpu_governor,
    gpu_persistence,
    host_time_sync,
    host_storage,
)


def profile(name: str, host: str = "node1", **overrides: Any) -> Vars:
    return Vars({**load_profile(name).vars, "diagnose_profile": name, **overrides}, host=host)


def h100(**overrides: Any) -> Vars:
    return profile("h100-8x-ndr400", **overrides)


def lent_h100(**overrides: Any) -> Vars:
    """The lent VM as an inventory would describe it: single-node-nvlink with its one GPU, no fabric."""
    return profile("single-node-nvlink", host="vm", expected_gpu_count=1, **overrides)


def out(fixture: str | None = None, text: str = "", rc: int = 0) -> CommandOutput:
    return CommandOutput(stdout=(CAPTURED / fixture).read_text() if fixture else text, exit_code=rc)


def chrony(fixture: str) -> CommandOutput:
    """TIME_SYNC_SCRIPT's output on a host where chronyc is the only time tool."""
    return out(text="## chronyc -n tracking\n" + (CAPTURED / fixture).read_text())


MISSING = CommandOutput(stdout="", stderr="sh: 1: lspci: not found", exit_code=127)
HEALTHY = {
    "lspci": out(LSPCI),
    "cmdline": out("kernel_settings/cmdline_csit_icx_intel_iommu_pt.txt"),
    "iommu_units": out(text="dmar0  dmar1\n"),
    "iommu_groups": out("kernel_settings/iommu_groups_lkml_identity.txt"),
    "numa_balancing": out(text="0\n"),
    "cpu_governors": out("kernel_settings/governors_bugzilla220117_performance.txt"),
    "nvidia_smi": out("nvidia_smi/h100_sxm_8gpu_565.txt"),
    "time_sync": chrony("time_sync/chronyc_pingcap_22us_slow.txt"),
    "mounts": out("storage/findmnt_h100_lent_vm.txt"),
    "df": out("storage/df_h100_lent_vm.txt"),
    "lsblk": out("storage/lsblk_gpud_8nvme_lvm_composed.txt"),
}
LENT = {
    **HEALTHY,
    "lspci": MISSING,
    "cmdline": out("kernel_settings/cmdline_h100_lent_vm.txt"),
    "iommu_units": out(text=""),
    "iommu_groups": out(text="", rc=2),
    "cpu_governors": out(text="", rc=2),
    "nvidia_smi": out("persistence/h100_lent_vm_580_on.txt"),
    "time_sync": out(text=""),
    "lsblk": out("storage/lsblk_devbox.txt"),
}


def judge(check: Check, vars_: Vars, **changes: CommandOutput) -> Any:
    outputs = {**HEALTHY, **changes}
    return check.judge(check.parse(outputs, vars_), vars_)


# ------------------------------------------------------------------------------------------ healthy nodes


@pytest.mark.parametrize("module", ALL, ids=lambda m: m.CHECK.id)
def test_healthy_h100_passes(module: Any) -> None:
    result, facts = evaluate_check(module.CHECK, HEALTHY, h100(), "raw/node1/x.txt")
    assert result.status == "PASS", result.message
    assert result.checklist == "H"
    assert facts is not None


def test_healthy_messages_say_what_was_seen_and_the_traps_stay_quiet() -> None:
    v = h100()
    acs = judge(pci_acs.CHECK, v).message
    assert "ACS redirect off on the 2 bridges between GPUs and NICs on node1 (17:01.0, 17:02.0)" in acs
    # The NVSwitch tray's port keeps ACS on: reported, not judged.
    assert "ACS redirect on 82:00.0, not between a GPU and a NIC" in acs
    assert (
        "passthrough (2 remapping units; groups: 11 identity; cmdline: intel_iommu=on iommu=pt)"
        in judge(host_iommu.CHECK, v).message
    )
    assert "kernel.numa_balancing = 0 (off) on node1" in judge(host_numa_balancing.CHECK, v).message
    assert "12 CPUs on node1 run performance" in judge(host_cpu_governor.CHECK, v).message
    assert "persistence mode On for the 8 GPUs of node1" in judge(gpu_persistence.CHECK, v).message
    clock = judge(host_time_sync.CHECK, v)
    assert clock.message == "clock of node1: chronyc: synchronised to 5EC69F0A (ntp1.time.nl), offset -22 µs"
    storage = judge(host_storage.CHECK, v).message
    assert "/ 64 GiB free" in storage and "/usr/local/nvidia" not in storage


def test_lent_h100_ends_without_fail_or_error() -> None:
    """The lent VM: no lspci, no cpufreq, no time tool, no IOMMU; what it has is judged, the rest says why not."""
    statuses = {}
    for module in ALL:
        result, _ = evaluate_check(module.CHECK, LENT, lent_h100(), None)
        statuses[module.CHECK.id] = (result.status, result.message)
    assert {k: s for k, (s, _) in statuses.items()} == {
        "pci.acs": "SKIP",
        "host.iommu": "PASS",
        "host.numa_balancing": "PASS",
        "host.cpu_governor": "SKIP",
        "gpu.persistence": "PASS",
        "host.time_sync": "SKIP",
        "host.storage": "PASS",
    }
    assert "lspci is not installed on vm (Debian package pciutils)" in statuses["pci.acs"][1]
    assert "IOMMU on vm: off (no remapping unit" in statuses["host.iommu"][1]
    assert "no cpufreq driver" in statuses["host.cpu_governor"][1]
    assert "chronyc (Debian package chrony)" in statuses["host.time_sync"][1]


def test_cpu_testbed_skips_what_only_gpu_nodes_need() -> None:
    v = profile("cpu-testbed")
    for module in (pci_acs, host_iommu, host_numa_balancing, host_cpu_governor, gpu_persistence):
        assert judge(module.CHECK, v).status == "SKIP", module.CHECK.id
    assert judge(host_time_sync.CHECK, v).status == "PASS"


# --------------------------------------------------------------------------------------------------- pci.acs


def test_acs_redirect_between_gpu_and_nic_fails_naming_bridges_and_devices() -> None:
    lspci = out(text=acs_redirect((CAPTURED / LSPCI).read_text(), GPU_NIC_PORTS))
    outcome = judge(pci_acs.CHECK, h100(), lspci=lspci)
    assert outcome.status == "FAIL"
    assert (
        "17:01.0 (ReqRedir+ CmpltRedir+) between 19:00.0, 1a:00.0; "
        "17:02.0 (ReqRedir+ CmpltRedir+) between 19:00.0, 1a:00.0" in outcome.message
    )
    assert "setpci" in outcome.remediation and "BIOS" in outcome.remediation


def test_acs_not_judged_where_neither_gpudirect_nor_pcie_p2p_is_expected() -> None:
    lspci = out(text=acs_redirect((CAPTURED / LSPCI).read_text(), GPU_NIC_PORTS))
    outcome = judge(pci_acs.CHECK, lent_h100(), lspci=lspci)
    assert outcome.status == "SKIP"
    assert "neither GPUDirect RDMA nor PCIe P2P between GPUs is expected" in outcome.message


def test_acs_unreadable_between_gpu_and_nic_is_an_error_never_a_pass() -> None:
    facts = pci_acs.CHECK.parse(HEALTHY, h100())
    for device in facts["devices"]:
        if device["bdf"].removeprefix("0000:") in GPU_NIC_PORTS:
            device["acs"], device["capabilities_denied"] = None, True
    outcome = pci_acs.CHECK.judge(facts, h100())
    assert outcome.status == "ERROR"
    assert "17:01.0, 17:02.0" in outcome.message and "needs root" in outcome.message


def test_acs_on_a_host_without_a_shared_switch_passes() -> None:
    """The non-root H100 capture: its GPU and its only bridge sit on different buses, so nothing to judge."""
    outcome = judge(pci_acs.CHECK, h100(), lspci=out("pci/h100_nonroot_access_denied.txt"))
    assert outcome.status == "PASS"
    assert "no GPU shares a PCIe switch with a peer it talks to" in outcome.message


def test_acs_missing_lspci_is_a_skip_naming_the_package() -> None:
    result, _ = evaluate_check(pci_acs.CHECK, {**HEALTHY, "lspci": MISSING}, h100(), None)
    assert result.status == "SKIP"
    assert "Debian package pciutils" in result.message


# ------------------------------------------------------------------------------------------------ host.iommu


def test_iommu_translating_groups_warn_where_gpudirect_is_expected() -> None:
    changes = {
        "cmdline": out("kernel_settings/cmdline_csit_tx2_intel_iommu_on.txt"),
        "iommu_groups": out("kernel_settings/iommu_groups_translated_dma_fq.txt"),
    }
    outcome = judge(host_iommu.CHECK, h100(), **changes)
    assert outcome.status == "WARN"
    assert "11 IOMMU groups translate DMA" in outcome.message
    assert "cmdline: intel_iommu=on" in outcome.message
    assert "iommu=pt" in outcome.remediation
    assert judge(host_iommu.CHECK, lent_h100(), **changes).status == "SKIP"


def test_iommu_on_kernels_without_group_types_goes_by_the_command_line() -> None:
    no_types = out(text="", rc=2)
    assert judge(host_iommu.CHECK, h100(), iommu_groups=no_types).status == "PASS"
    outcome = judge(
        host_iommu.CHECK,
        h100(),
        iommu_groups=no_types,
        cmdline=out("kernel_settings/cmdline_csit_tx2_intel_iommu_on.txt"),
    )
    assert outcome.status == "WARN"
    assert "the kernel default translates DMA" in outcome.message


def test_iommu_passthrough_by_iommu_passthrough_1() -> None:
    grace = judge(
        host_iommu.CHECK,
        h100(),
        iommu_groups=out(text="", rc=2),
        cmdline=out("kernel_settings/cmdline_csit_grace_passthrough.txt"),
    )
    assert grace.status == "PASS" and "cmdline: iommu.passthrough=1" in grace.message


# ------------------------------------------------------------------------------- numa balancing, governor


def test_numa_balancing_on_warns_and_a_kernel_without_it_is_skipped() -> None:
    outcome = judge(host_numa_balancing.CHECK, h100(), numa_balancing=out(text="1\n"))
    assert outcome.status == "WARN"
    assert "kernel.numa_balancing = 1 (on) on node1" in outcome.message
    assert "sysctl -w kernel.numa_balancing=0" in outcome.remediation
    missing = judge(host_numa_balancing.CHECK, h100(), numa_balancing=out(text="", rc=1))
    assert missing.status == "SKIP" and "built without NUMA balancing" in missing.message


def test_governor_other_than_performance_warns_naming_the_cpus() -> None:
    powersave = judge(
        host_cpu_governor.CHECK,
        h100(),
        cpu_governors=out("kernel_settings/governors_ubuntuforums_powersave.txt"),
    )
    assert powersave.status == "WARN"
    assert "powersave on CPU 0-11 (12 of 12 CPUs not at performance)" in powersave.message
    schedutil = judge(
        host_cpu_governor.CHECK,
        h100(),
        cpu_governors=out("kernel_settings/governors_ubuntuforums_schedutil.txt"),
    )
    assert "schedutil on CPU 0-11" in schedutil.message
    one = (CAPTURED / "kernel_settings/governors_bugzilla220117_performance.txt").read_text()
    one = one.replace("cpu5/cpufreq/scaling_governor:performance", "cpu5/cpufreq/scaling_governor:powersave")
    mixed = judge(host_cpu_governor.CHECK, h100(), cpu_governors=out(text=one))
    assert mixed.status == "WARN" and "powersave on CPU 5 (1 of 12 CPUs" in mixed.message


# --------------------------------------------------------------------------------------------- persistence


def test_persistence_off_warns_naming_each_gpu() -> None:
    rtx = judge(gpu_persistence.CHECK, h100(), nvidia_smi=out("persistence/rtx4060ti_2gpu_550_off.txt"))
    assert rtx.status == "WARN"
    assert "persistence mode Off on node1: GPU 0 (00000000:03:00.0), GPU 1 (00000000:09:00.0)" in rtx.message
    assert "nvidia-persistenced" in rtx.remediation
    one = persistence_off((CAPTURED / "nvidia_smi/h100_sxm_8gpu_565.txt").read_text())
    outcome = judge(gpu_persistence.CHECK, h100(), nvidia_smi=out(text=one))
    assert outcome.status == "WARN" and "Off on node1: GPU 3 (00000000:5D:00.0);" in outcome.message


# ---------------------------------------------------------------------------------------------- time sync


def test_unsynchronised_clock_fails() -> None:
    outcome = judge(
        host_time_sync.CHECK, h100(), time_sync=chrony("time_sync/chronyc_powersj_not_synchronised.txt")
    )
    assert outcome.status == "FAIL"
    assert "clock of node1 is not synchronised (chronyc: NOT synchronised to 00000000 ()" in outcome.message
    assert "chrony" in outcome.remediation


def test_offset_is_judged_against_time_max_offset_ms() -> None:
    """670 µs passes the 50 ms default; ntpd's system peer 65.9 ms away warns, unless the site allows 100 ms."""
    near = judge(host_time_sync.CHECK, h100(), time_sync=chrony("time_sync/chronyc_powersj_670us_slow.txt"))
    assert near.status == "PASS" and "offset -670 µs" in near.message
    ntpq = out(text="## ntpq -pn\n" + (CAPTURED / "time_sync/ntpq_jc_ubuntu1804_offset_66ms.txt").read_text())
    far = judge(host_time_sync.CHECK, h100(), time_sync=ntpq)
    assert far.status == "WARN"
    assert "65.9 ms behind NTP time (more than time_max_offset_ms 50" in far.message
    assert judge(host_time_sync.CHECK, h100(time_max_offset_ms=100), time_sync=ntpq).status == "PASS"


def test_a_daemon_that_does_not_answer_fails_and_a_missing_systemd_is_skipped() -> None:
    dead = out(text="## chronyc -n tracking\n506 Cannot talk to daemon\n")
    outcome = judge(host_time_sync.CHECK, h100(), time_sync=dead)
    assert outcome.status == "FAIL" and "no time daemon answers on node1: chronyc: 506" in outcome.message
    no_systemd = out(
        text="## timedatectl show\nSystem has not been booted with systemd as init system (PID 1). Can't operate.\n"
    )
    assert judge(host_time_sync.CHECK, h100(), time_sync=no_systemd).status == "SKIP"


def test_timedatectl_alone_judges_the_flag_without_an_offset() -> None:
    synced = out(
        text="## timedatectl show\n"
        + (CAPTURED / "time_sync/timedatectl_jc_ubuntu1804_status.txt").read_text()
    )
    outcome = judge(host_time_sync.CHECK, h100(), time_sync=synced)
    assert outcome.status == "PASS" and "timedatectl: synchronised, offset not reported" in outcome.message
    unsynced = out(text="## timedatectl show\nNTP=yes\nNTPSynchronized=no\n")
    assert judge(host_time_sync.CHECK, h100(), time_sync=unsynced).status == "FAIL"


# ------------------------------------------------------------------------------------------------- storage


def test_read_only_root_and_missing_mount_fail() -> None:
    text = (CAPTURED / "storage/findmnt_h100_lent_vm.txt").read_text().replace("ext4     rw,", "ext4     ro,")
    outcome = judge(host_storage.CHECK, h100(expected_mounts=["/raid"]), mounts=out(text=text))
    assert outcome.status == "FAIL"
    assert "/ is mounted read-only (/dev/vda, ext4); /raid is not mounted" in outcome.message


def test_expected_mounts_from_an_ini_string_and_free_space_below_the_minimum_warns() -> None:
    outcome = judge(host_storage.CHECK, h100(expected_mounts="/,/dev/shm", min_free_gib=100))
    assert outcome.status == "WARN"
    assert outcome.message == "node1: / has 64 GiB free (min_free_gib 100)"


def test_nvme_count_below_expected_fails_naming_the_drives_seen() -> None:
    text = (CAPTURED / "storage/lsblk_gpud_8nvme_lvm_composed.txt").read_text()
    seven = "".join(line for line in text.splitlines(True) if '"nvme3n1"' not in line)
    outcome = judge(host_storage.CHECK, h100(expected_nvme_count=8), lsblk=out(text=seven))
    assert outcome.status == "FAIL"
    assert "7 NVMe drives, expected_nvme_count 8" in outcome.message and "nvme3n1" not in outcome.message
    assert judge(host_storage.CHECK, h100(expected_nvme_count=8)).status == "PASS"


def test_storage_without_util_linux_is_a_skip() -> None:
    result, _ = evaluate_check(
        host_storage.CHECK, {**HEALTHY, "mounts": CommandOutput(exit_code=127)}, h100(), None
    )
    assert result.status == "SKIP" and "util-linux" in result.message
