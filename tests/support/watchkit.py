"""Nights for the watch list: real captures with only their counters (and, for a fleet, the serial) edited.

The GPU query is the lent H100's real answer to the watch tier (gpu_query/h100x1_580_serial_corrected.txt,
serial and corrected ECC included); a fleet of such GPUs differs in the serial cell only, and a night in the
counter cells only. The IB counters are the H100 node's sysfs capture (ib_counters/h100_gpud_sysfs_testdata.txt)
with one port's counter set per night; ibstat's capture of the same kind of node gives the port GUIDs.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from diagnose.parsers.gpu_query import FIELD_TIERS, canonical
from tests.support.paths import CAPTURED

GPU_QUERY = "gpu_query/h100x1_580_serial_corrected.txt"
SERIAL = "1752524022570"
IB_COUNTERS = "ib_counters/h100_gpud_sysfs_testdata.txt"
IBSTAT = "ibstat/h100_cx7_ndr400_8hca_bond.txt"


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
