"""A test-bed GB200 compute tray: an aarch64 Grace host with four GPUs, for the host stage of gb200-nvl72.

The tray is hostkit's healthy node (tests/support/hostkit.py: ibstat, ibv_devinfo, the IB sysfs tree,
mlxlink, the kernel log, chrony, mounts and drives as captured there) with what a Grace tray shows
differently, each composed from a named public output in its format, with the project's own values:

* ``uname -m`` prints ``aarch64`` (the AWS p6e-gb200 capture of NVIDIA/k8s-test-infra is an arm64 host;
  Crusoe's GB200 system description in mlcommons/inference_results_v6.1 names aarch64 Grace);
* the ``nvidia-smi`` table has four ``NVIDIA GB200`` on the multi-domain bus ids 00000008/9/18/19:01:00.0 of
  SlinkyProject/slurm-operator:docs/installation.md (a GB200 tray's nvidia-smi), 189471 MiB, 1200 W;
* ``nvidia-smi topo -m`` follows the GB200 tray of https://github.com/sgl-project/sglang/issues/11208: NV18
  between the four GPUs and every NIC at SYS from every GPU (the NICs hang off Grace's PCIe, the GPUs off
  NVLink-C2C: no PCIe switch pairs them), CPU affinity 0-71 and 72-143, NUMA affinity 0,3-9,11-17 and
  1,19-25,27-33 (each Grace's node with the GPUs' memory nodes), GPU NUMA ids 2, 10, 18, 26;
* the shared GPU query, ``nvlink --status``/``-e`` and ``-L`` are hostkit's composed H100 outputs cut to
  four GPUs and renamed (no GB200 capture of them was found published; the 18 links per GPU agree with
  NVLink 5's NV18, their speed is left as captured and gb200-nvl72 sets none);
* ``nvidia-smi -q -x`` and IMEX are those of tests/support/nvl72.py's healthy tray, its GPUs' bus ids set
  to the table's;
* ``lspci -D -vvv`` is composed: a root port per PCI domain with a GPU or a NIC right behind it and no
  PCIe switch anywhere, the root ports' ACS redirect on (as Linux sets it where an IOMMU runs), which
  judges nothing since no bridge lies between a GPU and a NIC;
* the IOMMU is an Arm SMMUv3 in passthrough (``iommu.passthrough=1`` on the command line, as NVIDIA's Grace
  tuning guide asks; units named ``smmu3.0x...`` as the arm-smmu-v3 driver registers them; identity groups);
* no cpufreq governor: every CPU's ``scaling_governor`` is bound empty, as on firmware that owns the clocks.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import replace

from tests.support.hostkit import (
    COMPUTE_APPS_ARGS,
    H100_NVLINK_ERRORS,
    H100_NVLINK_STATUS,
    H100_QUERY,
    IDLE_APPS,
    SYSTEMCTL_FM,
    captured,
    healthy_h100,
    query_tiers,
    smi_listing,
    tool_script,
)
from tests.support.nvl72 import tray as nvl72_tray
from tests.support.nvl72 import tray_xml
from tests.support.platformkit import LSPCI_ARGS, governor_files
from tests.support.testbed import HostSpec, Reply

PROFILE = "gb200-nvl72"
GPUS = 4
#: The tray's GPUs, as SlinkyProject's GB200 nvidia-smi lists them: one PCI domain each.
BUS_IDS = ("00000008:01:00.0", "00000009:01:00.0", "00000018:01:00.0", "00000019:01:00.0")
#: The p6e capture's virtualised ids in tests/support/nvl72.py's XML, in GPU order.
XML_BUS_IDS = ("00000000:29:00.0", "00000000:3F:00.0", "00000000:9C:00.0", "00000000:B2:00.0")
H100_NAME = "NVIDIA H100 80GB HBM3"
NAME = "NVIDIA GB200"
NICS = 8  # hostkit's ibstat lists eight InfiniBand ConnectX-7 ports
#: The Arm SMMUv3 units of the tray: one per PCI domain with a device, named by their MMIO base.
SMMU_UNITS = ("smmu3.0x0000000011000000", "smmu3.0x0000000012000000", "smmu3.0x0000000015000000")
CMDLINE = (
    "BOOT_IMAGE=/boot/vmlinuz-6.8.0-1021-nvidia-64k root=LABEL=root ro iommu.passthrough=1 init_on_alloc=0\n"
)


def uname_script() -> str:
    """``uname -m`` (and ``uname -p``) answer aarch64; every other form is the machine's own uname."""
    real = shutil.which("uname") or "/usr/bin/uname"
    return f'#!/bin/sh\ncase "$1" in\n  -m|-p|-i) echo aarch64 ;;\n  *) exec {real} "$@" ;;\nesac\n'


def smi_table() -> str:
    """nvidia-smi's summary table of the tray, in the layout of the captured tables."""
    rows = []
    for index, bus in enumerate(BUS_IDS):
        rows += [
            f"|   {index}  {NAME:<27}On  |   {bus} Off |                    0 |",
            "| N/A   36C    P0            160W / 1200W |       0MiB / 189471MiB |      0%      Default |",
            "|                                         |                        |             Disabled |",
            "+-----------------------------------------+------------------------+----------------------+",
        ]
    head = [
        "+-----------------------------------------------------------------------------------------+",
        "| NVIDIA-SMI 580.95.05              Driver Version: 580.95.05      CUDA Version: 13.0     |",
        "+-----------------------------------------+------------------------+----------------------+",
        "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
        "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
        "|                                         |                        |               MIG M. |",
        "|=========================================+========================+======================|",
    ]
    tail = [
        "",
        "+-----------------------------------------------------------------------------------------+",
        "| Processes:                                                                              |",
        "|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |",
        "|        ID   ID                                                               Usage      |",
        "|=========================================================================================|",
        "|  No running processes found                                                             |",
        "+-----------------------------------------------------------------------------------------+",
    ]
    return "\n".join(head + rows + tail) + "\n"


def _cells(row: list[str]) -> str:
    return "".join(f"{cell:<8}" for cell in row).rstrip()


def topo() -> str:
    """topo -m of the tray: NV18 between the GPUs, every NIC at SYS, Grace's two NUMA nodes."""
    gpus = [f"GPU{i}" for i in range(GPUS)]
    nics = [f"NIC{i}" for i in range(NICS)]
    affinity = ("0-71", "0-71", "72-143", "72-143")
    numa = ("0,3-9,11-17", "0,3-9,11-17", "1,19-25,27-33", "1,19-25,27-33")
    header = "        " + _cells([*gpus, *nics]) + "    CPU Affinity    NUMA Affinity   GPU NUMA ID"
    lines = [header]
    for i, gpu in enumerate(gpus):
        row = [gpu, *(" X" if j == i else "NV18" for j in range(GPUS)), *(["SYS"] * NICS)]
        lines.append(_cells(row) + f"    {affinity[i]:<8}{numa[i]:<24}{2 + 8 * i}")
    for i, nic in enumerate(nics):
        row = [
            nic,
            *(["SYS"] * GPUS),
            *(" X" if j == i else ("NODE" if j // 4 == i // 4 else "SYS") for j in range(NICS)),
        ]
        lines.append(_cells(row))
    legend = captured("topo/h100_8gpu_8nic_pix.txt").split("\nLegend:", 1)[1]
    return "\n".join(lines) + "\n\nLegend:" + legend


def _tray_gpu_lines(text: str) -> str:
    """An H100 output's lines of GPUs 0-3 under the tray's name and bus ids."""
    kept = []
    for line in text.splitlines():
        header = re.match(r"GPU (\d+): ", line)
        if header and int(header.group(1)) >= GPUS:
            break
        kept.append(line.replace(H100_NAME, NAME))
    return "\n".join(kept) + "\n"


def gpu_query() -> str:
    """The shared GPU query's H100 rows of GPUs 0-3, named GB200 on the tray's bus ids."""
    lines = captured(H100_QUERY).splitlines()
    rows = [lines[0]]
    for line in lines[1 : 1 + GPUS]:
        cells = [cell.strip() for cell in line.split(",")]
        cells[1], cells[2] = BUS_IDS[int(cells[0])], NAME
        rows.append(", ".join(cells))
    return "\n".join(rows) + "\n"


def fabric_xml() -> str:
    xml = tray_xml(1)
    for virtual, bus in zip(XML_BUS_IDS, BUS_IDS, strict=True):
        xml = xml.replace(virtual, bus)
    return xml


def lspci() -> str:
    """lspci -D -vvv of a Grace tray: a root port per domain, a GPU or a NIC right behind it."""
    acs = "\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"
    blocks = []

    def port(domain: str) -> None:
        blocks.append(
            f"{domain}:00:00.0 PCI bridge: NVIDIA Corporation Device 22b2 (prog-if 00 [Normal decode])\n"
            "\tBus: primary=00, secondary=01, subordinate=01, sec-latency=0\n"
            "\tCapabilities: [1c0 v1] Access Control Services\n"
            "\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-\n"
            f"{acs}"
        )

    for bus in BUS_IDS:
        domain = bus.split(":")[0][-4:]
        port(domain)
        blocks.append(f"{domain}:01:00.0 3D controller: NVIDIA Corporation Device 2941 (rev a1)")
    for domain in ("0000", "0002", "0010", "0012"):
        port(domain)
        blocks.append(
            f"{domain}:01:00.0 Infiniband controller: Mellanox Technologies MT2910 Family [ConnectX-7]"
        )
    return "\n\n".join(blocks) + "\n"


def platform_files() -> dict[str, str]:
    """/proc and /sys of the tray: SMMUv3 passthrough, NUMA balancing off, no cpufreq governor."""
    units = {f"/sys/class/iommu/{unit}/uevent": "\n" for unit in SMMU_UNITS}
    groups = {f"/sys/kernel/iommu_groups/{g}/type": "identity\n" for g in range(len(BUS_IDS) + 4)}
    empty_governors = dict.fromkeys(governor_files("performance"), "")
    return {
        "/proc/cmdline": CMDLINE,
        "/proc/sys/kernel/numa_balancing": "0\n",
        **units,
        **groups,
        **empty_governors,
    }


def grace_tray(name: str, rack: int = 1, index: int = 1) -> HostSpec:
    """A healthy GB200 tray (aarch64) that is tray ``index`` of a one-tray rack ``rack``."""
    base = healthy_h100(name)
    status = _tray_gpu_lines(captured(H100_NVLINK_STATUS))
    smi = tool_script(
        "nvidia-smi",
        {
            "": smi_table(),
            "topo -m": topo(),
            **query_tiers(gpu_query()),
            "nvlink --status": status,
            "nvlink -e": _tray_gpu_lines(captured(H100_NVLINK_ERRORS)),
            COMPUTE_APPS_ARGS: captured(IDLE_APPS),
            "-L": smi_listing(status),
            "-q -x": fabric_xml(),
        },
    )
    rack_tools = nvl72_tray(rack, index, trays=1).tools
    systemctl = {SYSTEMCTL_FM: Reply(stdout="inactive\n", rc=3), **rack_tools["systemctl"]}
    tools = {
        **base.tools,
        "nvidia-smi": smi,
        "uname": uname_script(),
        "lspci": {LSPCI_ARGS: Reply(stdout=lspci())},
        "nvidia-imex-ctl": rack_tools["nvidia-imex-ctl"],
        "hostname": rack_tools["hostname"],
        "systemctl": systemctl,
    }
    return replace(base, name=name, tools=tools, files=platform_files())
