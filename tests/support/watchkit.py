"""Nights for the watch list: real captures with only their counters (and, for a fleet, the serial) edited.

The GPU query is the lent H100's real answer to the watch tier (gpu_query/h100x1_580_serial_corrected.txt,
serial and corrected ECC included); a fleet of such GPUs differs in the serial cell only, and a night in the
counter cells only. The IB counters are the H100 node's sysfs capture (ib_counters/h100_gpud_sysfs_testdata.txt)
with one port's counter set per night; ibstat's capture of the same kind of node gives the port GUIDs.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from diagnose.parsers.gpu_query import FIELD_TIERS, canonical
from diagnose.parsers.ibstat import parse_ibstat
from tests.support.paths import CAPTURED

GPU_QUERY = "gpu_query/h100x1_580_serial_corrected.txt"
SERIAL = "1752524022570"
IB_COUNTERS = "ib_counters/h100_gpud_sysfs_testdata.txt"
IBSTAT = "ibstat/h100_cx7_ndr400_8hca_bond.txt"
_GUID = re.compile(r"\b0x[0-9a-fA-F]{2}([0-9a-fA-F]{14})\b")


def gpu_query(serial: str = SERIAL, **cells: int | str) -> str:
    """The captured query with ``serial`` and the named cells (``corrected_volatile=12``: the field
    ``ecc.errors.corrected.volatile.total``) changed."""
    fields = {
        "serial": serial,
        **{
            {
                "corrected_volatile": "ecc.errors.corrected.volatile.total",
                "corrected_aggregate": "ecc.errors.corrected.aggregate.total",
                "remapped_correctable": "remapped_rows.correctable",
            }[k]: str(v)
            for k, v in cells.items()
        },
    }
    header, row = (CAPTURED / GPU_QUERY).read_text().splitlines()
    names = [canonical(c) for c in header.split(",")]
    values = [v.strip() for v in row.split(",")]
    for name, value in fields.items():
        values[names.index(name)] = value
    return f"{header}\n{', '.join(values)}\n"


def ib_counters(changes: dict[tuple[str, str], int]) -> str:
    """The sysfs capture's lines with ``{(device, counter): value}`` set on port 1."""
    out = []
    for line in (CAPTURED / IB_COUNTERS).read_text().splitlines():
        device, port, name, value = line.split(maxsplit=3)
        out.append(f"{device} {port} {name} {changes.get((device, name), value)}")
    return "\n".join(out) + "\n"


def query_from_file(path: Path) -> str:
    """A fake nvidia-smi answering the watch tier of the GPU query with whatever ``path`` holds now (the
    test rewrites it between nights); other arguments get no reply."""
    args = shlex.quote(f"--query-gpu={','.join(FIELD_TIERS[0])} --format=csv,nounits")
    return (
        f'#!/bin/sh\ncase "$*" in\n{args})\n    cat {shlex.quote(str(path))}\n    ;;\n'
        '*)\n    echo "fake nvidia-smi: no reply for: $*" >&2\n    exit 64\n    ;;\nesac\n'
    )


def gpu_rows(counts: list[int], serial_base: int) -> str:
    """A node of ``len(counts)`` GPUs composed from the one-GPU capture: each row the captured one with its
    index, bus id (0x18 + 0x12 per GPU, as the 8x H100 node's), serial (``serial_base`` + index) and
    corrected ECC counts (volatile and aggregate alike) changed, nothing else."""
    header, row = (CAPTURED / GPU_QUERY).read_text().splitlines()
    names = [canonical(c) for c in header.split(",")]
    lines = [header]
    for index, count in enumerate(counts):
        values = [v.strip() for v in row.split(",")]
        for name, value in (
            ("index", str(index)),
            ("pci.bus_id", f"00000000:{0x18 + 0x12 * index:02X}:00.0"),
            ("serial", str(serial_base + index)),
            ("ecc.errors.corrected.volatile.total", str(count)),
            ("ecc.errors.corrected.aggregate.total", str(count)),
        ):
            values[names.index(name)] = value
        lines.append(", ".join(values))
    return "\n".join(lines) + "\n"


def ibstat_of_host(index: int) -> str:
    """The 8-HCA node's ibstat capture with every GUID's first byte set to ``index``: the bed's hosts share
    one capture, a fleet's HCAs do not, and the watch list keys ports by GUID."""
    return _GUID.sub(lambda m: f"0x{index:02x}{m.group(1)}", (CAPTURED / IBSTAT).read_text())


def port_guid(index: int, device: str) -> str:
    """The GUID ``ibstat_of_host(index)`` gives ``device``'s port 1, as the watch list writes it."""
    ports = parse_ibstat(ibstat_of_host(index))["ports"]
    return next(str(p["port_guid"]).lower() for p in ports if p["device"] == device and p["port"] == 1)
