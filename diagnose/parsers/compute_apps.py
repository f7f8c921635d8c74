"""``nvidia-smi --query-compute-apps``: the processes that hold a compute context on a GPU, with their memory.

One CSV line per (process, GPU), under a header line; a GPU nobody uses adds no line, so an idle host prints
the header alone (captured on the lent H100, driver 580.159.04). The header keeps the field names and units
(``used_gpu_memory [MiB]``: the driver answers ``used_memory`` under its long name), so columns are read by
header, as :mod:`diagnose.parsers.gpu_query` reads its own. Graphics contexts (Xorg) are not listed: a
desktop on a GPU is no compute process.

The process name is the one field that may hold a comma (a path); it is everything between the pid and the
last cell. ``[N/A]`` memory (a process in another PID namespace, MIG without privileges) reads as None, never
as zero. A container sees only its own processes: inside a pod the list is the pod's, not the node's.
"""

from __future__ import annotations

from typing import Any

from diagnose.core.check import Command, ParseError
from diagnose.parsers.gpu_query import NOT_APPLICABLE, canonical

FIELDS = ("gpu_uuid", "gpu_bus_id", "pid", "process_name", "used_memory")

COMPUTE_APPS = Command(
    "compute_apps",
    f"nvidia-smi --query-compute-apps={','.join(FIELDS)} --format=csv",
    tool="nvidia-smi",
    timeout=30,
)

# The header's names for FIELDS once canonical() has read them (units dropped, gpu_bus_id as pci.bus_id).
_COLUMNS = ("gpu_uuid", "pci.bus_id", "pid", "process_name", "used_gpu_memory")


def _memory_mib(cell: str) -> int | None:
    text = cell.strip()
    if text.lower() in NOT_APPLICABLE or text.startswith("["):
        return None
    number = text.removesuffix("MiB").strip()
    return int(number) if number.isdigit() else None


def parse_compute_apps(text: str) -> list[dict[str, Any]]:
    """One dict per (process, GPU): ``gpu_uuid``, ``bus_id``, ``pid``, ``process_name``, ``used_mib``.

    Output without the header this command asks for (an error message, another field list) is a
    ParseError: a check that cannot read the list must not pass for one that read an empty list.
    """
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise ParseError("nvidia-smi --query-compute-apps printed nothing, not even its header")
    header = tuple(canonical(cell) for cell in lines[0].split(","))
    if header != _COLUMNS:
        raise ParseError(f"unexpected --query-compute-apps header: {lines[0].strip()[:200]!r}")
    processes = []
    for line in lines[1:]:
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) < len(_COLUMNS) or not cells[2].isdigit():
            raise ParseError(f"unreadable --query-compute-apps line: {line.strip()[:200]!r}")
        processes.append(
            {
                "gpu_uuid": cells[0],
                "bus_id": cells[1],
                "pid": int(cells[2]),
                "process_name": ", ".join(cells[3:-1]),
                "used_mib": _memory_mib(cells[-1]),
            }
        )
    return processes
