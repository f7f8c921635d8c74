"""mlx5_core's link and module events in the kernel log (printed by the shared ``KERNEL_LOG`` command).

The driver logs every carrier change of a ConnectX Ethernet/RoCE port as ``mlx5_core 0000:01:00.0
enp1s0f0np0: Link down`` and ``… Link up``, and what the port's cage sees as ``Port module event``
(``mlx5_core 0000:01:00.0: Port module event: module 0, Cable unplugged``; firmware errors as ``Port module
event[error]: module 0, Cable error, High Temperature``). The PCI function names the HCA; ``HCA_PCI_SCRIPT``
maps it to the RDMA device (``mlx5_4``) the operator knows, from ``PCI_SLOT_NAME`` in each device's uevent
file. An InfiniBand port's link changes are not logged by the driver: they show in its ``link_downed``
counter, which ib.counters reads.
"""

from __future__ import annotations

import re
from typing import Any

from diagnose.parsers.kernel_log import event_time, read_header

_PCI = r"[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]"
_LINK = re.compile(rf"mlx5_core(?: (?P<pci>{_PCI}))?(?: (?P<netdev>[^\s:]+))?: Link (?P<state>down|up)\b")
_MODULE = re.compile(
    rf"mlx5_core(?: (?P<pci>{_PCI}))?:.*?Port module event(?:\[(?P<level>\w+)\])?: "
    r"module (?P<module>\d+), (?P<status>.*?)\s*$"
)

HCA_PCI_SCRIPT = (
    "for d in /sys/class/infiniband/*; do s=; "
    'while read -r l; do case $l in PCI_SLOT_NAME=*) s=${l#*=};; esac; done 2>/dev/null <"$d/device/uevent"; '
    '[ -n "$s" ] && echo "${d##*/} $s"; done; exit 0'
)


def parse_hca_pci(text: str) -> dict[str, str]:
    """PCI function (``0000:01:00.0``, lower case) -> RDMA device (``mlx5_bond_0``)."""
    found = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            found[parts[1].lower()] = parts[0]
    return found


def parse_link_events(text: str) -> dict[str, Any]:
    """Facts: the command header (``source``, ``refused``, ``missing``, ``clock``) and ``events``
    [{kind: link|module, pci, netdev, state (down/up, links), level, module, status (modules), time,
    epoch}] in log order."""
    facts: dict[str, Any] = {**read_header(text), "events": []}
    for line in text.splitlines():
        if line.startswith("# ") or "mlx5_core" not in line:
            continue
        link = _LINK.search(line)
        module = None if link else _MODULE.search(line)
        match = link or module
        if match is None:
            continue
        when, epoch = event_time(line[: match.start()], facts["clock"])
        event: dict[str, Any] = {
            "kind": "link" if link else "module",
            "pci": (match.group("pci") or "").lower() or None,
            "time": when,
            "epoch": epoch,
        }
        if link:
            event.update(netdev=link.group("netdev"), state=link.group("state"))
        elif module:
            event.update(
                level=module.group("level"), module=int(module.group("module")), status=module.group("status")
            )
        facts["events"].append(event)
    return facts
