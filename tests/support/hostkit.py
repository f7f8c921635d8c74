"""Test-bed hosts for the check catalog: a healthy 8x H100 NDR node, and the same node with one fault each.

Every fake tool prints a real captured output from tests/fixtures/captured (their SOURCE files say where
each was captured). A fault is the healthy node with one output swapped for the real output of a host that
has that fault, or, where no such capture exists, with the one field that the fault changes edited in the
healthy capture (a port's state, a port's rate, the active MTU); those edits are named in each builder.

The node-health outputs (the shared ``nvidia-smi --query-gpu`` call, ``nvlink --status``/``-e``, the
kernel log, /sys/class/infiniband) have no 8x H100 capture; tests/fixtures/captured/hostkit holds them
composed from the lent H200's captures with the H100 node's bus ids and names (its SOURCE says how). The
GPU faults are the per-GPU differences of the composed fault files in gpu_query/ and nvlink/ (which differ
from the H200 healthy capture in the fault's fields only) applied to the same GPU of the H100 output, so
each fault's values are exactly the ones the unit rule tests judge.
"""

from __future__ import annotations

import re
import shlex
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace

from diagnose.parsers.compute_apps import COMPUTE_APPS
from diagnose.parsers.gpu_query import FIELD_TIERS, canonical
from tests.support.nshost import memlock_ceiling_kib
from tests.support.paths import CAPTURED
from tests.support.platformkit import platform_files, platform_tools
from tests.support.testbed import HostSpec, Reply, TestHost, Tool, write_tool

PROFILE = "h100-8x-ndr400"
# What /dev/infiniband holds on an 8-HCA ConnectX node: one uverbs/umad per HCA, plus rdma_cm.
DEV_INFINIBAND = ["rdma_cm", *(f"uverbs{i}" for i in range(8)), *(f"umad{i}" for i in range(8))]
# NCCL 2.27.7 as listed by `dpkg -l` in NVIDIA/nccl issue reports, in dpkg-query -W's format.
OTHER_NCCL_PACKAGE = "libnccl2\t2.27.7-1+cuda12.4\n"
_END = "DIAGNOSE_CAPTURED_OUTPUT_END"


def captured(relative: str) -> str:
    return (CAPTURED / relative).read_text()


def _dpkg_query(line: str) -> dict[str, Reply]:
    return {"-W libnccl2": Reply(stdout=line)}


def tool_script(name: str, replies: dict[str, str]) -> str:
    """A fake tool answering several argument strings, each with a captured output in a here-document."""
    branches = [
        f"{shlex.quote(args)})\n    cat <<'{_END}'\n{text.rstrip(chr(10))}\n{_END}\n    ;;"
        for args, text in replies.items()
    ]
    unknown = f'*)\n    echo "fake {name}: no reply for: $*" >&2\n    exit 64\n    ;;'
    return '#!/bin/sh\ncase "$*" in\n' + "\n".join([*branches, unknown]) + "\nesac\n"


# The H200 capture the composed GPU outputs start from; fault files in gpu_query/ and nvlink/ differ from
# these in the fault's fields only.
H200_QUERY = "gpu_query/h200x2_580_healthy.txt"
H200_NVLINK_STATUS = "nvlink/h200x2_status.txt"
H100_QUERY = "hostkit/h100x8_gpu_query_healthy.txt"
H100_NVLINK_STATUS = "hostkit/h100x8_nvlink_status.txt"
H100_NVLINK_ERRORS = "hostkit/h100x8_nvlink_errors.txt"
H100_DMESG = "hostkit/h100x8_dmesg_iso_nvrm.txt"
H100_IB_SYSFS = "hostkit/h100_ib_sysfs_healthy.txt"
#: gpu.processes' query as the fake nvidia-smi sees it, and its answer on idle GPUs (the header alone, as
#: captured on the lent H100).
COMPUTE_APPS_ARGS = COMPUTE_APPS.script.removeprefix("nvidia-smi ")
IDLE_APPS = "compute_apps/h100x1_580_idle.txt"
#: The argument string KERNEL_LOG_SCRIPT's dmesg branch uses first.
DMESG_ISO = "--time-format iso"
#: The kernel-log source KERNEL_LOG_SCRIPT tries first (answered like the dev container's journalctl).
JOURNALCTL_KERNEL = "-k -b -q -o short-iso --no-pager"
#: The fabric manager probe of gpu.fabricmanager; `systemctl is-active` prints the unit's state.
SYSTEMCTL_FM = "is-active nvidia-fabricmanager"
#: The port whose link flaps in ib_flap (a port of the ibstat capture, Active at 400 Gb/s).
FLAP_PORT = ("mlx5_4", 1)
#: The InfiniBand ConnectX-7 ports of the ibstat capture (the Ethernet bond mlx5_bond_0 aside).
IB_DEVICES = ("mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9")
H100_MLXLINK = "hostkit/h100_cx7_ndr_mlxlink_healthy.txt"
BF3_MLXLINK = "mlxlink/bf3_100g_dac_2ports.txt"
#: The SXid lines the sxid-fatal host logs (gpud's README: SXid 20034 LTSSM Fault Up on three NVSwitches).
SXID_LINES = "sxid/sxid20034_gpud_readme.txt"
#: The flap host's Ethernet bond, as the syslog lines of link_events/mlx5_link_down_up_iso_syslog.txt name it.
FLAP_PCI = "0000:01:00.0"


def mlxlink_arguments(device: str) -> str:
    """mlxlink's arguments (``$*`` of the fake) in MLXLINK_SCRIPT for one device."""
    return f"-d {device} -p 1 -m -c -e"


def mlxlink_outputs() -> dict[str, str]:
    """Device -> what mlxlink prints for it on the healthy node (see hostkit/SOURCE)."""
    bond = captured(BF3_MLXLINK).split("# port mlx5_1 1")[0]
    bond = bond.replace("# port mlx5_0 1\n", "").replace("# rc 0\n", "")
    return {**dict.fromkeys(IB_DEVICES, captured(H100_MLXLINK)), "mlx5_bond_0": bond}


def _mlxlink(outputs: dict[str, str]) -> dict[str, Reply]:
    return {mlxlink_arguments(device): Reply(stdout=text) for device, text in outputs.items()}


def query_arguments(fields: tuple[str, ...]) -> str:
    """nvidia-smi's arguments (``$*`` of the fake) for one tier of the shared GPU query."""
    return f"--query-gpu={','.join(fields)} --format=csv,nounits"


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.split(",")]


def query_tiers(text: str) -> dict[str, str]:
    """The fake's answer to each tier of GPU_QUERY_SCRIPT: the full output for the first, and the same
    output cut to the tier's columns for the fallbacks (a driver answers any tier it accepts). A tier asking
    for a field the capture lacks (the watch list's serial and corrected ECC, asked since issue 35) gets no
    answer, as from a driver that rejects the field, so the next tier answers."""
    lines = text.splitlines()
    header = _cells(lines[0])
    names = [canonical(column) for column in header]
    replies = {}
    for fields in FIELD_TIERS:
        if any(canonical(field) not in names for field in fields):
            continue
        wanted = [names.index(canonical(field)) for field in fields]
        rows = [", ".join(_cells(line)[i] for i in wanted) for line in lines]
        replies[query_arguments(fields)] = "\n".join(rows) + "\n"
    return replies


def _graft_query(fault: str, *, every_gpu: bool = False) -> str:
    """The H100 query output with the fields a composed H200 fault file changes, on the same GPU index
    (``every_gpu``: GPU 0's changes on all eight, for faults of the whole node such as the fabric)."""
    healthy = captured(H200_QUERY).splitlines()
    broken = captured(fault).splitlines()
    assert healthy[0] == broken[0], f"{fault} has another header than {H200_QUERY}"
    changes: dict[str, dict[int, str]] = {}
    for before, after in zip(healthy[1:], broken[1:], strict=True):
        old, new = _cells(before), _cells(after)
        changes[old[0]] = {i: v for i, (u, v) in enumerate(zip(old, new, strict=True)) if u != v}
    assert any(changes.values()), f"{fault} changes nothing"
    lines = captured(H100_QUERY).splitlines()
    out = [lines[0]]
    for line in lines[1:]:
        cells = _cells(line)
        for i, value in changes.get("0" if every_gpu else cells[0], {}).items():
            cells[i] = value
        out.append(", ".join(cells))
    return "\n".join(out) + "\n"


def _gpu_blocks(text: str) -> dict[str, list[str]]:
    """`nvidia-smi nvlink` output as {gpu index: the block's lines after its header}."""
    blocks: dict[str, list[str]] = {}
    current: list[str] = []
    for line in text.splitlines():
        header = re.match(r"GPU (\d+): ", line)
        if header:
            current = blocks.setdefault(header.group(1), [])
        else:
            current.append(line)
    return blocks


def _graft_nvlink(fault: str) -> str:
    """The H100 ``nvlink --status`` with the link lines a composed H200 fault file changes, on the same
    GPU index."""
    healthy, broken = _gpu_blocks(captured(H200_NVLINK_STATUS)), _gpu_blocks(captured(fault))
    text = captured(H100_NVLINK_STATUS)
    blocks = re.split(r"(?m)^(?=GPU \d+: )", text)
    for gpu, lines in broken.items():
        for old, new in zip(healthy[gpu], lines, strict=True):
            if old != new:
                at = next(i for i, block in enumerate(blocks) if block.startswith(f"GPU {gpu}: "))
                assert old in blocks[at], f"H100 GPU {gpu} has no line {old!r}"
                blocks[at] = blocks[at].replace(old + "\n", new + "\n", 1)
    grafted = "".join(blocks)
    assert grafted != text, f"{fault} changes nothing"
    return grafted


def smi_listing(nvlink_status: str) -> str:
    """`nvidia-smi -L`: the ``GPU n: name (UUID: ...)`` lines, which head each GPU's nvlink block too."""
    return "".join(line + "\n" for line in nvlink_status.splitlines() if re.match(r"GPU \d+: ", line))


def _nvidia_smi(query: str, nvlink_status: str) -> str:
    """The fake nvidia-smi: the plain table, topo -m, the GPU query's tiers, nvlink, the compute
    processes (none) and the GPU list (`-L`)."""
    return tool_script(
        "nvidia-smi",
        {
            "": captured("nvidia_smi/h100_sxm_8gpu_565.txt"),
            "topo -m": captured("topo/h100_8gpu_8nic_pix.txt"),
            **query_tiers(query),
            "nvlink --status": nvlink_status,
            "nvlink -e": captured(H100_NVLINK_ERRORS),
            COMPUTE_APPS_ARGS: captured(IDLE_APPS),
            "-L": smi_listing(nvlink_status),
        },
    )


def sysfs_from_lines(text: str) -> dict[str, str]:
    """A /sys/class/infiniband tree from IB_COUNTERS_SCRIPT's "<dev> <port> <name> <value>" lines: the
    files the script read them from (state, link_layer, counters/<name>, the device's hca_type)."""
    tree = {}
    for line in text.splitlines():
        device, port, name, value = line.split(maxsplit=3)
        if name == "hca_type":  # a device's file, not a port's
            tree[f"{device}/hca_type"] = value + "\n"
            continue
        file = name if name in ("state", "link_layer") else f"counters/{name}"
        tree[f"{device}/ports/{port}/{file}"] = value + "\n"
    return tree


# The torch probe's answer on a real CUDA node (the lent H200: torch 2.11.0+cu130, NCCL 2.28.9), and the
# same node with another NCCL (composed: only the version tuple changed, to the 2.27.7 of OTHER_NCCL_PACKAGE).
TORCH_PROBE = "nccl_version/torch_h200x4.txt"
OTHER_NCCL_PROBE = "2.11.0+cu130 13.0 (2, 27, 7) /opt/torch/.venv/bin/python3\n"


def probing_python(probe: str) -> str:
    """A ``python3`` first on the login PATH: nccl.version's torch probe gets a real CUDA node's answer,
    anything else (torchrun for the gloo benchmarks, custom checks) runs the Python of these tests.

    Without it the hosts report whichever torch the test machine has: a CPU build has no NCCL (so the
    system package's version is reported), a CUDA build its own bundled NCCL, and the suite's results
    would depend on which torch ``pip install`` happened to pull.
    """
    return (
        '#!/bin/sh\nif [ "$1" = -c ]; then\n  case "$2" in\n    *torch.cuda.nccl.version*)\n'
        f"      cat <<'{_END}'\n{probe.rstrip(chr(10))}\n{_END}\n      exit 0 ;;\n  esac\nfi\n"
        f'exec {shlex.quote(sys.executable)} "$@"\n'
    )


def healthy_h100(name: str) -> HostSpec:
    """ConnectX-7 NDR ibstat and ibv_devinfo, 8x H100 nvidia-smi and topo (NIC per GPU at PIX),
    nvidia_peermem loaded, libnccl2 2.28.3 (dpkg-query as captured on the lent H200), torch 2.11.0+cu130
    with NCCL 2.28.9 (the H200's torch probe, see ``probing_python``).

    Node health: the GPU query (idle, ECC on, nothing remapped, Gen5 x16, fabric Completed/Success),
    18 NVLinks per GPU at 26.562 GB/s with zero error counters, a kernel log with NVRM lines and no Xid
    (journalctl kept no kernel message, dmesg readable), nvidia-fabricmanager active under systemd,
    memlock unlimited (where the machine allows, see testbed.memlock_ceiling_kib), a
    /sys/class/infiniband of 8 Active InfiniBand ports plus the Ethernet bond without link errors, and
    mlxlink answering for every port (healthy BER, passive cables without a temperature sensor).

    Platform (tests/support/platformkit.py): lspci with ACS off between GPU and NIC, the IOMMU in
    passthrough, NUMA balancing off, performance governors, chrony 22 µs behind, / read-write, 8 NVMe drives.
    """
    libs = captured("nccl_version/libs_h200x4.txt")
    package = next(line for line in libs.splitlines() if line.startswith("libnccl2\t")) + "\n"
    return HostSpec(
        name=name,
        tools={
            "ibstat": Reply(stdout=captured("ibstat/h100_cx7_ndr400_8hca_bond.txt")),
            "ibv_devinfo": Reply(stdout=captured("ibv_devinfo/h100_cx7_ib_8hca.txt")),
            "nvidia-smi": _nvidia_smi(captured(H100_QUERY), captured(H100_NVLINK_STATUS)),
            "lsmod": Reply(stdout=captured("gpudirect/modules_gpu_operator_peermem.txt")),
            "dpkg-query": _dpkg_query(package),
            "python3": probing_python(captured(TORCH_PROBE)),
            # Without these two the machine's own kernel log would be read: not the test host's.
            "journalctl": {
                JOURNALCTL_KERNEL: Reply(stdout=captured("hostkit/devbox_root_journalctl_kernel_empty.txt"))
            },
            "dmesg": {DMESG_ISO: Reply(stdout=captured(H100_DMESG))},
            "systemctl": {SYSTEMCTL_FM: Reply(stdout="active\n")},
            "mlxlink": _mlxlink(mlxlink_outputs()),
            **platform_tools(),
        },
        files=platform_files(),
        infiniband=list(DEV_INFINIBAND),
        memlock_kib=None,
        sysfs_infiniband=sysfs_from_lines(captured(H100_IB_SYSFS)),
    )


def _with_tool(spec: HostSpec, name: str, tool: Tool) -> HostSpec:
    return replace(spec, tools={**spec.tools, name: tool})


def _edit_port(text: str, device: str, edits: dict[str, str]) -> str:
    """The capture with some port fields of one CA changed (the rest of the output stays as captured)."""
    start = text.index(f"CA '{device}'")
    end = text.find("CA '", start + 1)
    block = text[start : end if end != -1 else len(text)]
    for field, value in edits.items():
        block, count = re.subn(rf"(\n\s+{field}: )[^\n]*", rf"\g<1>{value}", block, count=1)
        assert count == 1, f"{device} has no {field} field"
    return text[:start] + block + (text[end:] if end != -1 else "")


def port_down(name: str) -> HostSpec:
    """mlx5_9's port Down/Polling with the values a Down InfiniBand port shows (the mlx4 capture of the
    linux-rdma thread: State Down, Physical state Polling, Rate 10, lids 0)."""
    text = _edit_port(
        captured("ibstat/h100_cx7_ndr400_8hca_bond.txt"),
        "mlx5_9",
        {"State": "Down", "Physical state": "Polling", "Rate": "10", "Base lid": "0", "SM lid": "0"},
    )
    spec = _with_tool(healthy_h100(name), "ibstat", Reply(stdout=text))
    # sysfs agrees with ibstat: the kernel's state file of a Down port.
    assert spec.sysfs_infiniband is not None
    return replace(spec, sysfs_infiniband={**spec.sysfs_infiniband, "mlx5_9/ports/1/state": "1: DOWN\n"})


def link_200(name: str) -> HostSpec:
    """mlx5_4 Active but trained down to 200 Gb/s (the rate HDR ports report in the A100 capture)."""
    text = _edit_port(captured("ibstat/h100_cx7_ndr400_8hca_bond.txt"), "mlx5_4", {"Rate": "200"})
    return _with_tool(healthy_h100(name), "ibstat", Reply(stdout=text))


def no_peermem(name: str) -> HostSpec:
    """The module list captured on the lent H200 (nvidia, nvidia_uvm; no peermem) and no open module."""
    return _with_tool(
        healthy_h100(name), "lsmod", Reply(stdout=captured("gpudirect/modules_h200x4_proc.txt"))
    )


def narrow_port_range(name: str) -> HostSpec:
    return replace(healthy_h100(name), port_range="60000\t60100\n")


def other_nccl(name: str) -> HostSpec:
    """NCCL 2.27.7 both in torch and as the system package."""
    spec = _with_tool(healthy_h100(name), "dpkg-query", _dpkg_query(OTHER_NCCL_PACKAGE))
    return replace(spec, tools={**spec.tools, "python3": probing_python(OTHER_NCCL_PROBE)})


def p2p_disabled_in_nccl_conf(name: str) -> HostSpec:
    spec = healthy_h100(name)
    return replace(spec, files={**spec.files, "/etc/nccl.conf": "NCCL_DEBUG=WARN\nNCCL_P2P_DISABLE=1\n"})


def no_dev_infiniband(name: str) -> HostSpec:
    """No /dev/infiniband and no RDMA tools, as on the lent H200 (ibstat: command not found)."""
    spec = replace(healthy_h100(name), infiniband=None, sysfs_infiniband={})
    return _with_tool(_with_tool(spec, "ibstat", None), "ibv_devinfo", None)


def hanging_ibstat(name: str) -> HostSpec:
    """ibstat prints its first CA and then never returns, as on a host with a wedged HCA."""
    first = captured("ibstat/h100_cx7_ndr400_8hca_bond.txt").split("CA 'mlx5_1'")[0]
    return _with_tool(healthy_h100(name), "ibstat", Reply(stdout=first, hang=True))


def mtu_2048(name: str) -> HostSpec:
    """Every port's active_mtu 2048 (enum 4), what a subnet manager partition left at mtu=4 gives."""
    text = captured("ibv_devinfo/h100_cx7_ib_8hca.txt").replace(
        "active_mtu:\t\t4096 (5)", "active_mtu:\t\t2048 (4)"
    )
    return _with_tool(healthy_h100(name), "ibv_devinfo", Reply(stdout=text))


def with_query(spec: HostSpec, query: str) -> HostSpec:
    return _with_tool(spec, "nvidia-smi", _nvidia_smi(query, captured(H100_NVLINK_STATUS)))


def xid_79(name: str) -> HostSpec:
    """The kernel log gains the NVRM lines of gpud's Xid 79 example (kernel_log/xid79_gpud_sxid_readme.txt:
    "GPU has fallen off the bus") for GPU 4: its PCI address 0000:91:00 becomes GPU 4's 0000:9a:00 and the
    ``[secs]`` stamps become ``--time-format iso`` stamps after the module-loading lines, since this
    node's dmesg prints ISO times."""
    lines = []
    for line in captured("kernel_log/xid79_gpud_sxid_readme.txt").splitlines():
        stamp, _, rest = line.partition("] ")
        micro = stamp.split(".")[1]
        lines.append(f"2026-11-22T18:24:07,{micro}+00:00 " + rest.replace("0000:91:00", "0000:9a:00"))
    log = captured(H100_DMESG) + "\n".join(lines) + "\n"
    return _with_tool(healthy_h100(name), "dmesg", {DMESG_ISO: Reply(stdout=log)})


def remap_pending(name: str) -> HostSpec:
    """GPU 1 with 4 uncorrectable remapped rows pending a reset (gpu_query/remap_pending_gpu1.txt)."""
    return with_query(healthy_h100(name), _graft_query("gpu_query/remap_pending_gpu1.txt"))


def pcie_x8(name: str) -> HostSpec:
    """GPU 1's PCIe link trained at x8 of x16 (gpu_query/pcie_x8_gpu1.txt)."""
    return with_query(healthy_h100(name), _graft_query("gpu_query/pcie_x8_gpu1.txt"))


def hw_slowdown(name: str) -> HostSpec:
    """GPU 1 held by HW slowdown and HW thermal slowdown at 91 C, busy (gpu_query/hw_slowdown_gpu1.txt)."""
    return with_query(healthy_h100(name), _graft_query("gpu_query/hw_slowdown_gpu1.txt"))


def fabric_init(name: str) -> HostSpec:
    """Fabric state In Progress on all eight GPUs (gpu_query/fabric_in_progress.txt, whose two GPUs both
    show it: the fabric manager registers a node's GPUs together)."""
    return with_query(healthy_h100(name), _graft_query("gpu_query/fabric_in_progress.txt", every_gpu=True))


def nvlink_down(name: str) -> HostSpec:
    """GPU 1 link 3 ``<inactive>`` (nvlink/h200x2_status_gpu1_link3_inactive.txt)."""
    status = _graft_nvlink("nvlink/h200x2_status_gpu1_link3_inactive.txt")
    return _with_tool(healthy_h100(name), "nvidia-smi", _nvidia_smi(captured(H100_QUERY), status))


def memlock_64(name: str) -> HostSpec:
    """`ulimit -l` 64 KiB soft and hard: the kernel's default RLIMIT_MEMLOCK where nothing raised it."""
    return replace(healthy_h100(name), memlock_kib=64)


def ib_flap(name: str) -> HostSpec:
    """A healthy node whose FLAP_PORT link goes down and up during a run: the test raises its
    ``link_downed`` counter with ``TestHost.set_ib_counter`` between the host stage's snapshot and the
    one after the benchmarks, as the HCA does when the link retrains. Nothing is wrong before the run."""
    return healthy_h100(name)


def _iso_stamped(fixture: str) -> list[str]:
    """A capture's ``[secs]`` lines as this node's ``dmesg --time-format iso`` prints them (after its
    module-loading lines), as in xid_79."""
    lines = []
    for line in captured(fixture).splitlines():
        stamp, _, rest = line.partition("] ")
        lines.append(f"2026-11-22T18:24:07,{stamp.split('.')[1]}+00:00 " + rest)
    return lines


def sxid_fatal(name: str) -> HostSpec:
    """The kernel log gains the NVSwitch lines of gpud's SXid README (SXID_LINES): fatal SXid 20034 on
    three switches, with their engine and register lines, stamped like xid_79's."""
    log = captured(H100_DMESG) + "\n".join(_iso_stamped(SXID_LINES)) + "\n"
    return _with_tool(healthy_h100(name), "dmesg", {DMESG_ISO: Reply(stdout=log)})


def _dmesg_with_recent(events: list[tuple[int, str]]) -> str:
    """The fake dmesg: the healthy node's lines, then each (seconds ago, kernel message) stamped that long
    before the moment the test host runs it, since ib.flaps judges a window that ends at the host's clock."""
    recent = "".join(
        f"    printf '%s,000000+00:00 %s\\n' \"$(date -u -d @$(($(date +%s) - {ago})) +%Y-%m-%dT%H:%M:%S)\" "
        f"{shlex.quote(message)}\n"
        for ago, message in events
    )
    return (
        f'#!/bin/sh\ncase "$*" in\n{shlex.quote(DMESG_ISO)})\n'
        f"    cat <<'{_END}'\n{captured(H100_DMESG).rstrip(chr(10))}\n{_END}\n{recent}    ;;\n"
        '*)\n    echo "fake dmesg: no reply for: $*" >&2\n    exit 64\n    ;;\nesac\n'
    )


def _syslog_messages() -> list[str]:
    """The kernel messages of the switch-reboot syslog capture (its host and ``kernel:`` fields dropped)."""
    return [line.split("kernel: ", 1)[1] for line in captured(FLAP_SYSLOG).splitlines()]


FLAP_SYSLOG = "link_events/mlx5_link_down_up_iso_syslog.txt"


def link_flaps(name: str) -> HostSpec:
    """The Ethernet bond's port went down three times and up again two hours ago: the four lines of
    FLAP_SYSLOG (down x3 at one second, up 220 s later), restamped relative to the host's clock, and the
    bond's sysfs uevent naming the PCI function the lines name (FLAP_PCI)."""
    down, *_, up = _syslog_messages()
    events = [(7200, down), (7200, down), (7200, down), (6980, up)]
    spec = _with_tool(healthy_h100(name), "dmesg", _dmesg_with_recent(events))
    assert spec.sysfs_infiniband is not None
    uevent = {"mlx5_bond_0/device/uevent": f"DRIVER=mlx5_core\nPCI_SLOT_NAME={FLAP_PCI}\n"}
    return replace(spec, sysfs_infiniband={**spec.sysfs_infiniband, **uevent})


def old_flap(name: str) -> HostSpec:
    """Trap: one link down and up thirty days ago, far outside ib.flaps' 24 h window: must stay quiet."""
    down, *_, up = _syslog_messages()
    return _with_tool(
        healthy_h100(name), "dmesg", _dmesg_with_recent([(30 * 86400, down), (30 * 86400 - 220, up)])
    )


IB_CORE_FLAPS = "link_events/ibcore_port_state_roce_bond_flaps.txt"


def ib_core_flaps(name: str) -> HostSpec:
    """A 6.15+ kernel's IB core logged mlx5_3's port going DOWN three times in the last hour, back ACTIVE
    between: the captured IB core lines of IB_CORE_FLAPS (no netdev line, as an InfiniBand port logs),
    restamped relative to the host's clock."""
    lines = [line.split("] ", 1)[1] for line in captured(IB_CORE_FLAPS).splitlines() if ": Port: " in line]
    active, down = lines[0], lines[1]
    events = [(3600, down), (3590, active), (3000, down), (2990, active), (1200, down)]
    return _with_tool(healthy_h100(name), "dmesg", _dmesg_with_recent(events))


def ber_high(name: str) -> HostSpec:
    """mlx5_4's effective BER 5E-11 (FEC no longer hides the errors) in the healthy NDR mlxlink output: the
    one field the fault changes, edited, with the effective error count it implies."""
    outputs = mlxlink_outputs()
    outputs["mlx5_4"] = (
        outputs["mlx5_4"]
        .replace("Effective Physical BER             : 15E-255", "Effective Physical BER             : 5E-11")
        .replace("Effective Physical Errors          : 0", "Effective Physical Errors          : 1043")
    )
    return _with_tool(healthy_h100(name), "mlxlink", _mlxlink(outputs))


def firmware_drift(name: str) -> HostSpec:
    """mlx5_4 left on ConnectX-7 firmware 28.39.4082 while the other HCAs run 28.41.1000 (both releases seen
    together on one public node's CX-7s, stored search-index file 69422308594)."""
    text = _edit_ca(captured("ibstat/h100_cx7_ndr400_8hca_bond.txt"), "mlx5_4", "28.41.1000", "28.39.4082")
    return _with_tool(healthy_h100(name), "ibstat", Reply(stdout=text))


def _edit_ca(text: str, device: str, old: str, new: str) -> str:
    start = text.index(f"CA '{device}'")
    end = text.find("CA '", start + 1)
    block = text[start : end if end != -1 else len(text)]
    assert old in block, f"{device} has no {old}"
    return text[:start] + block.replace(old, new, 1) + (text[end:] if end != -1 else "")


Builder = Callable[[str], HostSpec]

# host name -> (builder, the check that must name it, the status it must give)
FAULTS: dict[str, tuple[Builder, str, str]] = {
    "port-down": (port_down, "ib.port_state", "FAIL"),
    "link-200": (link_200, "ib.link_rate", "FAIL"),
    "no-peermem": (no_peermem, "gpu.gpudirect", "FAIL"),
    "narrow-ports": (narrow_port_range, "net.port_range", "FAIL"),
    "other-nccl": (other_nccl, "versions.consistency", "FAIL"),
    "p2p-off": (p2p_disabled_in_nccl_conf, "nccl.env", "FAIL"),
    "no-ib": (no_dev_infiniband, "ib.devices", "FAIL"),
    "hung-ibstat": (hanging_ibstat, "ib.port_state", "ERROR"),
    "mtu-2048": (mtu_2048, "ib.mtu", "FAIL"),
    "xid-79": (xid_79, "gpu.xid", "FAIL"),
    "remap-pending": (remap_pending, "gpu.memory", "FAIL"),
    "pcie-x8": (pcie_x8, "gpu.pcie", "FAIL"),
    "nvlink-down": (nvlink_down, "gpu.nvlink", "FAIL"),
    "hw-slowdown": (hw_slowdown, "gpu.clocks", "FAIL"),
    "memlock-64": (memlock_64, "host.memlock", "FAIL"),
    "fabric-init": (fabric_init, "gpu.fabricmanager", "FAIL"),
}

# Issue 26's fabric and NVSwitch faults, judged by their own run (tests/integration/test_fabric_faults.py).
FABRIC_FAULTS: dict[str, tuple[Builder, str, str]] = {
    "sxid-fatal": (sxid_fatal, "gpu.sxid", "FAIL"),
    "link-flaps": (link_flaps, "ib.flaps", "FAIL"),
    "ib-core-flaps": (ib_core_flaps, "ib.flaps", "FAIL"),
    "ber-high": (ber_high, "ib.optics", "FAIL"),
    "fw-drift": (firmware_drift, "versions.firmware", "FAIL"),
}

# Hosts with something that looks like a fault and is not one: the check must stay quiet (PASS).
TRAPS: dict[str, tuple[Builder, str]] = {
    "old-flap": (old_flap, "ib.flaps"),
}

# A fault that happens during a run, not before it: the host is judged on the change between snapshots,
# so it is started by its own test, which makes the change (see test_check_faults).
FLAP = ("ib-flap", ib_flap, "ib.counters", "FAIL")


def memlock_vars() -> list[str]:
    """Where the machine cannot raise `ulimit -l` (no CAP_SYS_RESOURCE, as in the dev container), a
    healthy host has the machine's limit, not unlimited: judge against that limit, so memlock-64 still
    fails and healthy hosts pass for the limit they really have."""
    ceiling = memlock_ceiling_kib()
    return [] if ceiling is None else ["-e", f"min_memlock_kib={ceiling}"]


#: The lent H100's answer to the GPU query's first tier, which asks for the board serial, the UUID and the
#: corrected ECC counts on top of the composed 8x H100 query's columns.
H100_SERIAL_QUERY = "gpu_query/h100x1_580_serial_corrected.txt"


def serial_query(serials: Sequence[str]) -> str:
    """The composed 8x H100 query with the columns H100_SERIAL_QUERY has and it lacks appended, so that it
    answers the first tier: that capture's values on every GPU, except the serial (one of ``serials`` a GPU)
    and the UUID, whose last group becomes the serial's last twelve digits. The composed query has no serial,
    and a campaign keeps each GPU slot's serial as the part it holds: a swapped board is a changed serial."""
    header, row = captured(H100_SERIAL_QUERY).splitlines()
    lines = captured(H100_QUERY).splitlines()
    known = {canonical(column) for column in _cells(lines[0])}
    added = {
        canonical(c): (c, v)
        for c, v in zip(_cells(header), _cells(row), strict=True)
        if canonical(c) not in known
    }
    out = [", ".join([lines[0], *(column for column, _ in added.values())])]
    for line, serial in zip(lines[1:], serials, strict=True):
        cells = {name: value for name, (_, value) in added.items()}
        cells["serial"] = serial
        cells["uuid"] = f"{cells['uuid'].rsplit('-', 1)[0]}-{serial[-12:]:0>12}"
        out.append(", ".join([line, *cells.values()]))
    return "\n".join(out) + "\n"


def with_board_serials(spec: HostSpec, serials: Sequence[str]) -> HostSpec:
    """``spec`` whose nvidia-smi is the healthy node's with ``serials`` as its eight GPUs' board serials
    (serial_query): a fault of ``spec``'s own nvidia-smi is replaced, the rest of ``spec`` stays."""
    return with_query(spec, serial_query(serials))


def reequip(host: TestHost, spec: HostSpec) -> None:
    """Give a started bed host the fake tools and /sys/class/infiniband of ``spec``, the same node after a
    repair or with a part swapped, and restart it on its port with its host key: the bed copies a host's
    tools into the host when it starts, so a running host keeps its old ones. What the bed sets up only at
    the first start (files, /dev/infiniband, port range, memlock, login environment) must not differ."""
    fixed = ("name", "files", "infiniband", "port_range", "memlock_kib", "env")
    changed = [name for name in fixed if getattr(spec, name) != getattr(host.spec, name)]
    if changed or (spec.sysfs_infiniband is None) != (host.spec.sysfs_infiniband is None):
        raise ValueError(f"host {host.name}: {changed or 'sysfs_infiniband'} cannot change on a started host")
    tools, data = host.dir / "tools", host.dir / "tooldata"
    for folder in (tools, data):
        shutil.rmtree(folder)
        folder.mkdir()
    for name, tool in spec.tools.items():
        write_tool(tools, data, host.name, name, tool)
    for relative, content in (spec.sysfs_infiniband or {}).items():
        host.set_sysfs_infiniband(relative, content)
    host.spec = spec
    host.restart()
