"""Link and module events of RDMA ports in the kernel log (printed by the shared ``KERNEL_LOG`` command).

mlx5_core logs every carrier change of a ConnectX Ethernet/RoCE port as ``mlx5_core 0000:01:00.0
enp1s0f0np0: Link down`` and ``… Link up``, and what the port's cage sees as ``Port module event``
(``mlx5_core 0000:01:00.0: Port module event: module 0, Cable unplugged``; firmware errors as ``Port module
event[error]: module 0, Cable error, High Temperature``). The PCI function names the HCA; ``HCA_PCI_SCRIPT``
maps it to the RDMA device (``mlx5_4``) the operator knows, from ``PCI_SLOT_NAME`` in each device's uevent
file.

An InfiniBand port has no netdev, so before Linux 6.15 its link changes showed only in its ``link_downed``
counter. Since 6.15 the IB core itself logs every change of a port's logical state, for any RDMA driver
(``ib_cache_update`` in drivers/infiniband/core/cache.c, commit "IB/cache: Add log messages for IB device
state changes"): ``mlx5_core 0000:08:00.0 mlx5_0: Port: 1 Link DOWN``, likewise INIT, ARMED, ACTIVE (and
ACTIVE_DEFER). The prefix is the parent device's driver and PCI address, then the RDMA device; an RDMA
device without a parent prints its name alone. Nothing is printed for the first state a port reports, so a
boot shows INIT and ACTIVE but no DOWN. On a RoCE port the same change is logged twice, once by the netdev
(``Link down``) and once by the IB core (``Link DOWN``): ib.flaps counts them as one.
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
#: The IB core's port state line: ``<driver> <pci> <rdma device>: Port: <n> Link <state>``.
_PORT_STATE = re.compile(
    rf"(?:(?P<driver>[\w.-]+) (?P<pci>{_PCI}) )?(?P<device>[^\s:\]]+): Port: (?P<port>\d+) "
    r"Link (?P<state>NOP|DOWN|INIT|ARMED|ACTIVE_DEFER|ACTIVE|UNKNOWN)\b"
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
    [{kind: link|module|port, pci, time, epoch; links: netdev, state (down/up); modules: level, module,
    status; IB core port states: driver, device, port, state (DOWN, INIT, ARMED, ACTIVE, …)}] in log order."""
    facts: dict[str, Any] = {**read_header(text), "events": []}
    for line in text.splitlines():
        if line.startswith("# "):
            continue
        port = _PORT_STATE.search(line) if ": Port: " in line else None
        if port is not None:
            when, epoch = event_time(line[: port.start()], facts["clock"])
            facts["events"].append(
                {
                    "kind": "port",
                    "pci": (port.group("pci") or "").lower() or None,
                    "time": when,
                    "epoch": epoch,
                    "driver": port.group("driver"),
                    "device": port.group("device"),
                    "port": int(port.group("port")),
                    "state": port.group("state"),
                }
            )
            continue
        if "mlx5_core" not in line:
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
