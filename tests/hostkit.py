"""Test-bed hosts for the check catalog: a healthy 8x H100 NDR node, and the same node with one fault each.

Every fake tool prints a real captured output from tests/fixtures/captured (their SOURCE files say where
each was captured). A fault is the healthy node with one output swapped for the real output of a host that
has that fault, or, where no such capture exists, with the one field that the fault changes edited in the
healthy capture (a port's state, a port's rate, the active MTU); those edits are named in each builder.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import replace
from pathlib import Path

from tests.testbed import HostSpec, Reply

CAPTURED = Path(__file__).resolve().parent / "fixtures" / "captured"
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


def _script(name: str, replies: dict[str, str]) -> str:
    """A fake tool answering several argument strings, each with a captured output in a here-document."""
    branches = [
        f"{shlex.quote(args)})\n    cat <<'{_END}'\n{text.rstrip(chr(10))}\n{_END}\n    ;;"
        for args, text in replies.items()
    ]
    unknown = f'*)\n    echo "fake {name}: no reply for: $*" >&2\n    exit 64\n    ;;'
    return '#!/bin/sh\ncase "$*" in\n' + "\n".join([*branches, unknown]) + "\nesac\n"


def healthy_h100(name: str) -> HostSpec:
    """ConnectX-7 NDR ibstat and ibv_devinfo, 8x H100 nvidia-smi and topo (NIC per GPU at PIX),
    nvidia_peermem loaded, libnccl2 2.28.3 (dpkg-query as captured on the lent H200)."""
    libs = captured("nccl_version/libs_h200x4.txt")
    package = next(line for line in libs.splitlines() if line.startswith("libnccl2\t")) + "\n"
    return HostSpec(
        name=name,
        tools={
            "ibstat": Reply(stdout=captured("ibstat/h100_cx7_ndr400_8hca_bond.txt")),
            "ibv_devinfo": Reply(stdout=captured("ibv_devinfo/h100_cx7_ib_8hca.txt")),
            "nvidia-smi": _script(
                "nvidia-smi",
                {
                    "": captured("nvidia_smi/h100_sxm_8gpu_565.txt"),
                    "topo -m": captured("topo/h100_8gpu_8nic_pix.txt"),
                },
            ),
            "lsmod": Reply(stdout=captured("gpudirect/modules_gpu_operator_peermem.txt")),
            "dpkg-query": _dpkg_query(package),
        },
        infiniband=list(DEV_INFINIBAND),
    )


def _with_tool(spec: HostSpec, name: str, tool: Reply | None) -> HostSpec:
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
    return _with_tool(healthy_h100(name), "ibstat", Reply(stdout=text))


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
    return _with_tool(healthy_h100(name), "dpkg-query", _dpkg_query(OTHER_NCCL_PACKAGE))


def p2p_disabled_in_nccl_conf(name: str) -> HostSpec:
    return replace(healthy_h100(name), files={"/etc/nccl.conf": "NCCL_DEBUG=WARN\nNCCL_P2P_DISABLE=1\n"})


def no_dev_infiniband(name: str) -> HostSpec:
    """No /dev/infiniband and no RDMA tools, as on the lent H200 (ibstat: command not found)."""
    spec = replace(healthy_h100(name), infiniband=None)
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


# host name -> (builder, the check that must name it, the status it must give)
FAULTS = {
    "port-down": (port_down, "ib.port_state", "FAIL"),
    "link-200": (link_200, "ib.link_rate", "FAIL"),
    "no-peermem": (no_peermem, "gpu.gpudirect", "FAIL"),
    "narrow-ports": (narrow_port_range, "net.port_range", "FAIL"),
    "other-nccl": (other_nccl, "versions.consistency", "FAIL"),
    "p2p-off": (p2p_disabled_in_nccl_conf, "nccl.env", "FAIL"),
    "no-ib": (no_dev_infiniband, "ib.devices", "FAIL"),
    "hung-ibstat": (hanging_ibstat, "ib.port_state", "ERROR"),
    "mtu-2048": (mtu_2048, "ib.mtu", "FAIL"),
}
