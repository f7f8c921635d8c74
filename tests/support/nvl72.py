"""Test-bed NVL72 compute trays: GB200 tray hosts of one rack, healthy or with one planted fault.

Every tray answers ``nvidia-smi -q -x`` with the published GB200 tray's fabric block
(tests/fixtures/captured/nvlink_fabric/gb200_tray_p6e_qx_fabric.xml, SOURCE there) with its own tray index,
and ``nvidia-imex-ctl -N`` with a node table in the format of the published GH200 table
(tests/fixtures/captured/imex/gh200_2node_ctl_N_ready.txt) listing every tray of its rack; IMEX runs under
systemd and ``hostname -I`` gives the tray's address. /dev is private to each bed host and cannot hold
IMEX channel devices, so the rack's inventory sets ``expected_imex_channels: 0`` (channels not judged, as
where a Kubernetes DRA driver creates them per workload); the unit tests judge the channel count.

A rack has as many trays as ``trays`` says: a full NVL72 rack is 18 (72 GPUs), and no rule counts trays (a
rack is however many trays report it). The faults:

* ``fabric``: the first GPU's fabric block replaced by the published Azure node's (Completed / Insufficient
  Resources, clique 0, a zero cluster UUID);
* ``imex``: the tray's IMEX daemon stopped (systemd inactive), so every peer's table shows it as not
  connected (D cells, the legend's "Disconnected") — composed, as no published table with a lost peer exists.
"""

from __future__ import annotations

import re

from diagnose.parsers.nvlink_fabric import parse_fabric_text
from tests.support.hostkit import captured, tool_script
from tests.support.testbed import HostSpec, Reply

TRAY_XML = "nvlink_fabric/gb200_tray_p6e_qx_fabric.xml"
INSUFFICIENT = "nvlink_fabric/gb_azure_q_fabric_insufficient_resources.txt"


def address(rack: int, tray: int) -> str:
    return f"10.0.{rack}.{tray}"


def tray_name(rack: int, tray: int) -> str:
    return f"r{rack}-tray{tray}"


def imex_table(addresses: list[str], lost: str | None = None) -> str:
    """``nvidia-imex-ctl -N`` for these nodes, all READY; ``lost``'s row and column read D."""
    legend = captured("imex/gh200_2node_ctl_N_ready.txt").split("\nNodes:")[0]
    nodes = [f"Node #{i}   - {a}   - READY" for i, a in enumerate(addresses)]
    header = " Nodes From\\To  " + "  ".join(str(i) for i in range(len(addresses)))
    rows = [
        f"       {i}        " + "  ".join("D" if lost in (a, b) and a != b else "C" for b in addresses)
        for i, a in enumerate(addresses)
    ]
    return "\n".join([legend, "Nodes:", *nodes, "", header, *rows, "Domain State: UP", ""])


def tray_xml(tray: int, *, failed: bool = False) -> str:
    """The published tray's XML with this tray index; ``failed``: GPU 0's fabric from the Azure node."""
    xml = captured(TRAY_XML).replace("<tray_index>4</tray_index>", f"<tray_index>{tray}</tray_index>")
    if not failed:
        return xml
    (gpu,) = parse_fabric_text(captured(INSUFFICIENT))
    end = xml.index("</fabric>")
    head = xml[:end]
    for tag, key in (
        ("state", "state"),
        ("status", "status"),
        ("cliqueId", "clique_id"),
        ("clusterUuid", "cluster_uuid"),
    ):
        head = re.sub(rf"<{tag}>[^<]*</{tag}>", f"<{tag}>{gpu[key]}</{tag}>", head, count=1)
    return head + xml[end:]


def tray(
    rack: int, index: int, trays: int = 4, fault: str | None = None, lost: int | None = None
) -> HostSpec:
    """Tray ``index`` of ``rack``; ``lost``: the tray of the rack whose IMEX is down (every table shows it)."""
    addresses = [address(rack, t) for t in range(1, trays + 1)]
    table = imex_table(addresses, address(rack, lost) if lost else None)
    return HostSpec(
        name=tray_name(rack, index),
        tools={
            "nvidia-smi": tool_script("nvidia-smi", {"-q -x": tray_xml(index, failed=fault == "fabric")}),
            "nvidia-imex-ctl": {"-N": Reply(stdout=table)},
            "systemctl": {
                "is-active nvidia-imex": Reply(stdout="inactive\n", rc=3)
                if fault == "imex"
                else Reply(stdout="active\n")
            },
            "hostname": {"-I": Reply(stdout=address(rack, index) + " \n")},
        },
    )
