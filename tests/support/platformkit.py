"""What the test-bed hosts show for the platform checks (issue 26), and one fault per check.

hostkit's healthy H100 node takes ``platform_tools()`` and ``platform_files()``: the fake ``lspci``, ``chronyc``,
``findmnt``, ``df`` and ``lsblk`` print real captured outputs, and the /proc and /sys files the checks read
(``/proc/cmdline``, IOMMU units and groups, ``kernel.numa_balancing``, cpufreq governors) are bound inside the
host from captured values. Each fault in ``PLATFORM_FAULTS`` turns a healthy spec into the same node with one
of those outputs swapped for the real capture of a host with that fault or, where no such capture exists,
with the one field the fault changes edited in the healthy capture (named in each builder).

The healthy node carries the traps that must stay quiet: ACS redirect left on the PMC-Sierra switch port in
front of the NVSwitches (not between a GPU and a NIC), a clock 22 µs behind NTP time, ``performance`` on every
CPU, and a read-only squashfs at /usr/local/nvidia that no one expects to write.

The /sys trees are files bound over the machine's: a machine with IOMMU groups or cpufreq policies of its own
shows those beside the planted ones (none on the development container or the lent GPU machines).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from tests.support.paths import CAPTURED
from tests.support.testbed import HostSpec, Reply

LSPCI = "pci/xe9680_h100_switch_and_nvswitch.txt"
#: The downstream ports above GPU 19:00.0 and NIC 1a:00.0 in the Dell capture.
GPU_NIC_PORTS = ("17:01.0", "17:02.0")
#: The redirecting ACSCtl line the same capture shows on the NVSwitch tray's port 82:00.0.
ACS_REDIRECT = "ACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"
CMDLINE_PT = "kernel_settings/cmdline_csit_icx_intel_iommu_pt.txt"
CMDLINE_TRANSLATED = "kernel_settings/cmdline_csit_tx2_intel_iommu_on.txt"
GROUPS_IDENTITY = "kernel_settings/iommu_groups_lkml_identity.txt"
GROUPS_TRANSLATED = "kernel_settings/iommu_groups_translated_dma_fq.txt"
#: `ls /sys/class/iommu` of the x86 host in cai-fuqiang/md (see tests/facts/iommu_units).
IOMMU_UNITS = ("dmar0", "dmar1")
CHRONY_22US = "time_sync/chronyc_pingcap_22us_slow.txt"
CHRONY_UNSYNCED = "time_sync/chronyc_powersj_not_synchronised.txt"
FINDMNT = "storage/findmnt_h100_lent_vm.txt"
DF = "storage/df_h100_lent_vm.txt"
LSBLK_8NVME = "storage/lsblk_gpud_8nvme_lvm_composed.txt"
#: The argument strings the checks pass (PLATFORM commands; df's paths vary, so df answers any).
LSPCI_ARGS = "-D -vvv"
CHRONYC_ARGS = "-n tracking"
FINDMNT_ARGS = "-l"
LSBLK_ARGS = "-d -n -P -o NAME,TYPE,SIZE,MODEL"
SYS_CPU = Path("/sys/devices/system/cpu")


def captured(relative: str) -> str:
    return (CAPTURED / relative).read_text()


def acs_redirect(text: str, bridges: tuple[str, ...]) -> str:
    """The lspci capture with the redirecting ACSCtl line on these bridges (their blocks only)."""
    blocks = re.split(r"\n\n(?=[0-9a-f]{2}:)", text)
    for i, block in enumerate(blocks):
        if block.split(" ", 1)[0] in bridges:
            blocks[i], count = re.subn(r"ACSCtl:\t[^\n]*", ACS_REDIRECT, block, count=1)
            assert count == 1, f"{block[:7]} has no ACSCtl line"
    edited = "\n\n".join(blocks)
    assert edited.count(ACS_REDIRECT) == text.count(ACS_REDIRECT) + len(bridges), "a bridge was not found"
    return edited


def _group_files(text: str) -> dict[str, str]:
    """/sys/kernel/iommu_groups/<n>/type files from `grep -H .` lines of a capture."""
    files = {}
    for line in text.splitlines():
        path, _, value = line.partition(":")
        files[path] = value + "\n"
    return files


def machine_cpus() -> list[str]:
    """The CPU directories of this machine: a governor is planted for each, so none of the machine's own
    cpufreq files (where it has them) shows through."""
    return sorted((p.name for p in SYS_CPU.glob("cpu[0-9]*")), key=lambda name: int(name[3:]))


def governor_files(governor: str) -> dict[str, str]:
    """Every CPU's scaling_governor with one value, as the bugzilla 220117 capture shows performance on all."""
    return {f"{SYS_CPU}/{cpu}/cpufreq/scaling_governor": f"{governor}\n" for cpu in machine_cpus()}


def platform_files(*, cmdline: str = CMDLINE_PT, groups: str = GROUPS_IDENTITY) -> dict[str, str]:
    """/proc and /sys of a healthy node: IOMMU in passthrough (intel_iommu=on iommu=pt, identity groups),
    NUMA balancing off, performance governors."""
    units = {f"/sys/class/iommu/{unit}/intel-iommu/version": "1:0\n" for unit in IOMMU_UNITS}
    return {
        "/proc/cmdline": captured(cmdline),
        "/proc/sys/kernel/numa_balancing": "0\n",
        **units,
        **_group_files(captured(groups)),
        **governor_files("performance"),
    }


def platform_tools() -> dict[str, Reply | dict[str, Reply]]:
    """The fake tools of a healthy node: lspci with ACS off between GPU and NIC, chrony 22 µs behind, the lent
    H100's mounts and free space, eight NVMe drives."""
    return {
        "lspci": {LSPCI_ARGS: Reply(stdout=captured(LSPCI))},
        "chronyc": {CHRONYC_ARGS: Reply(stdout=captured(CHRONY_22US))},
        "findmnt": {FINDMNT_ARGS: Reply(stdout=captured(FINDMNT))},
        "df": {"*": Reply(stdout=captured(DF))},
        "lsblk": {LSBLK_ARGS: Reply(stdout=captured(LSBLK_8NVME))},
    }


def _tool(spec: HostSpec, name: str, args: str, text: str) -> HostSpec:
    return replace(spec, tools={**spec.tools, name: {args: Reply(stdout=text)}})


def _files(spec: HostSpec, files: dict[str, str]) -> HostSpec:
    return replace(spec, files={**spec.files, **files})


def acs_on(spec: HostSpec) -> HostSpec:
    """ACS redirect on the two switch ports between GPU 19:00.0 and NIC 1a:00.0 (the capture's own
    redirecting ACSCtl line, from its NVSwitch port, set on them)."""
    return _tool(spec, "lspci", LSPCI_ARGS, acs_redirect(captured(LSPCI), GPU_NIC_PORTS))


def iommu_translated(spec: HostSpec) -> HostSpec:
    """intel_iommu=on without iommu=pt (the FDio ThunderX2 command line) and DMA-FQ groups."""
    return _files(spec, platform_files(cmdline=CMDLINE_TRANSLATED, groups=GROUPS_TRANSLATED))


def numa_balancing_on(spec: HostSpec) -> HostSpec:
    """kernel.numa_balancing = 1: the kernel's default on NUMA machines (edited: the healthy file's 0)."""
    return _files(spec, {"/proc/sys/kernel/numa_balancing": "1\n"})


def powersave(spec: HostSpec) -> HostSpec:
    """powersave on every CPU, as intel_pstate's active mode leaves them (the Ubuntu Forums capture)."""
    return _files(spec, governor_files("powersave"))


def persistence_off(smi_table: str, gpu: int = 3) -> str:
    """nvidia-smi's table with one GPU's Persistence-M Off (edited: the field that nvidia-persistenced sets)."""
    row = re.compile(rf"^(\|\s+{gpu}\s+.+?\s+)On(\s+\|)", re.M)
    edited, count = row.subn(r"\g<1>Off\g<2>", smi_table, count=1)
    assert count == 1, f"no GPU {gpu} row"
    return edited


def gpu3_persistence_off(spec: HostSpec) -> HostSpec:
    """GPU 3's Persistence-M Off in the node's nvidia-smi (its summary table is the only output with such
    rows, so the fake's whole script can be edited)."""
    script = spec.tools["nvidia-smi"]
    assert isinstance(script, str), "the node's nvidia-smi is a script of captured outputs"
    return replace(spec, tools={**spec.tools, "nvidia-smi": persistence_off(script)})


def clock_unsynchronised(spec: HostSpec) -> HostSpec:
    """chronyd running with no source selected: Leap status Not synchronised (powersj's capture)."""
    return _tool(spec, "chronyc", CHRONYC_ARGS, captured(CHRONY_UNSYNCED))


def root_read_only(spec: HostSpec) -> HostSpec:
    """/ remounted read-only, as ext4's errors=remount-ro leaves it (edited: rw -> ro in its findmnt line)."""
    text = captured(FINDMNT)
    edited, count = re.subn(r"(?m)^(/\s+/dev/vda\s+ext4\s+)rw,", r"\g<1>ro,", text)
    assert count == 1, "no / line in the findmnt capture"
    return _tool(spec, "findmnt", FINDMNT_ARGS, edited)


def nvme_missing(spec: HostSpec) -> HostSpec:
    """nvme3n1 gone from lsblk, as after a drive drops off the bus (edited: its line removed)."""
    text = "".join(line for line in captured(LSBLK_8NVME).splitlines(True) if '"nvme3n1"' not in line)
    return _tool(spec, "lsblk", LSBLK_ARGS, text)


Transform = Callable[[HostSpec], HostSpec]

# host name -> (the change to a healthy spec, the check that must name it, the status it must give)
PLATFORM_FAULTS: dict[str, tuple[Transform, str, str]] = {
    "acs-on": (acs_on, "pci.acs", "FAIL"),
    "iommu-dma": (iommu_translated, "host.iommu", "WARN"),
    "numa-on": (numa_balancing_on, "host.numa_balancing", "WARN"),
    "powersave": (powersave, "host.cpu_governor", "WARN"),
    "persistence-off": (gpu3_persistence_off, "gpu.persistence", "WARN"),
    "clock-unsynced": (clock_unsynchronised, "host.time_sync", "FAIL"),
    "root-ro": (root_read_only, "host.storage", "FAIL"),
    "nvme-7": (nvme_missing, "host.storage", "FAIL"),
}
