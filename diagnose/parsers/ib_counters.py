"""Per-port error counters of the RDMA devices, read from ``/sys/class/infiniband/<dev>/ports/<port>/``.

The command reads the files with the shell's ``read`` builtin, so a host with eight HCAs costs no process
per file (no ``cat``): a few milliseconds for every port together. It prints ``<dev> <port> <name>
<value>`` lines, with each port's ``state`` (``4: ACTIVE``) and ``link_layer`` (``InfiniBand`` or
``Ethernet``) so a Down port or an Ethernet management port can be told apart from a fabric port. A file the
driver does not provide is skipped; a host without RDMA devices prints nothing.

These are the IBTA PortCounters, which are narrow and *saturate* instead of wrapping: link_downed and
link_error_recovery stop at 255, local_link_integrity_errors and excessive_buffer_overrun_errors at 15, the
rest at 65535. A saturated counter cannot show a change any more, so the rules say so instead of reading
"no change" as "healthy".
"""

from __future__ import annotations

from typing import Any

from diagnose.core.check import ParseError

COUNTERS = (
    "symbol_error",
    "link_error_recovery",
    "link_downed",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "port_xmit_discards",
)

SATURATION = {
    "symbol_error": 0xFFFF,
    "link_error_recovery": 0xFF,
    "link_downed": 0xFF,
    "port_rcv_errors": 0xFFFF,
    "port_rcv_remote_physical_errors": 0xFFFF,
    "local_link_integrity_errors": 0xF,
    "excessive_buffer_overrun_errors": 0xF,
    "port_xmit_discards": 0xFFFF,
}

_FILES = " ".join(["state", "link_layer", *(f"counters/{c}" for c in COUNTERS)])

IB_COUNTERS_SCRIPT = (
    'for p in /sys/class/infiniband/*/ports/*; do [ -r "$p/state" ] || continue; '
    "d=${p#/sys/class/infiniband/}; d=${d%%/*}; n=${p##*/}; "
    '{ read -r v <"/sys/class/infiniband/$d/hca_type"; } 2>/dev/null && echo "$d $n hca_type $v"; '
    f"for f in {_FILES}; do v=; "
    '{ read -r v <"$p/$f"; } 2>/dev/null && echo "$d $n ${f#counters/} $v"; done; done; exit 0'
)


def parse_ib_counters(text: str) -> dict[str, Any]:
    """Facts: ``ports`` [{device, port, state, link_layer, counters: {name: value}, ca_type?}] in output
    order; ``ca_type`` where the driver exposes the device's ``hca_type`` (mlx5 does)."""
    ports: dict[tuple[str, str], dict[str, Any]] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split(maxsplit=3)
        if len(parts) < 4:
            raise ParseError(f"not a '<device> <port> <name> <value>' line: {line.strip()[:120]!r}")
        device, port, name, value = parts
        entry = ports.setdefault(
            (device, port),
            {"device": device, "port": port, "state": None, "link_layer": None, "counters": {}},
        )
        if name == "state":
            entry["state"] = value.split(":", 1)[-1].strip().upper()
        elif name == "link_layer":
            entry["link_layer"] = value.strip()
        elif name == "hca_type":  # the device's CA type (MT4131: ConnectX-8), as ibstat prints it
            entry["ca_type"] = value.strip()
        else:
            try:
                entry["counters"][name] = int(value)
            except ValueError:
                raise ParseError(f"{device} port {port} {name} is not a number: {value!r}") from None
    return {"ports": list(ports.values())}
