"""Whether a host has an NVIDIA GPU, read from its PCI bus and device nodes rather than from nvidia-smi.

The question matters before any driver works: which torch build to install (the CUDA wheel is several GB
that a machine without an NVIDIA GPU never uses). nvidia-smi cannot answer it, since it is missing exactly
where there is no driver. The PCI bus can: an NVIDIA function (vendor 0x10de) of class 0x03xx is a GPU
(VGA 0x0300, 3D 0x0302; NVSwitches are 0x0680 and audio functions 0x0403). A ``/dev/nvidia<N>`` node says
a GPU is there where the bus is hidden (a container). Neither seen and no PCI bus visible: unknown.
"""

from __future__ import annotations

import re
from typing import Any

from diagnose.core.check import Command

NVIDIA_VENDOR = "0x10de"
#: One process per host: how many PCI functions sysfs lists, the NVIDIA ones with their class, device nodes.
PRESENCE_SCRIPT = (
    "set -- /sys/bus/pci/devices/*/vendor\n"
    'if [ -e "$1" ]; then echo "pci-functions $#"; else echo "pci-functions 0"; fi\n'
    f'for v in $(grep -lx {NVIDIA_VENDOR} "$@" 2>/dev/null); do\n'
    # The shell reads each class file itself: a `cat` was a process for every NVIDIA function (a dozen or
    # more on an HGX node); the line printed is the same, empty where the file cannot be read.
    '  c=; { read -r c < "${v%/vendor}/class"; } 2>/dev/null\n'
    '  echo "nvidia ${v%/vendor} $c"\n'
    "done\n"
    'for n in /dev/nvidia[0-9]*; do [ -e "$n" ] && echo "node $n"; done\n'
    'echo "machine $(uname -m 2>/dev/null)"\n'
    "true\n"
)
NVIDIA_PRESENCE = Command("nvidia_presence", PRESENCE_SCRIPT, timeout=15, required=False, auxiliary=True)

_LINE = re.compile(r"^(?P<kind>pci-functions|nvidia|node|machine) (?P<rest>\S.*)$")
_GPU_CLASS = re.compile(r"^0x03[0-9a-f]{4}$")


def parse_nvidia_presence(text: str) -> dict[str, Any]:
    """``nvidia_gpu``: True (an NVIDIA GPU on the bus, or its device node), False (the bus is visible and
    has none, and no node), None (no bus visible and no node: unknown); ``machine``: ``uname -m`` (None
    where the line is missing), since on aarch64 the default torch wheel is the CPU build. Pure."""
    functions, gpus, nodes, machine = 0, [], [], None
    for line in text.splitlines():
        match = _LINE.match(line.strip())
        if not match:
            continue
        kind, rest = match["kind"], match["rest"].split()
        if kind == "pci-functions" and rest[0].isdigit():
            functions = int(rest[0])
        elif kind == "nvidia" and len(rest) == 2 and _GPU_CLASS.match(rest[1].lower()):
            gpus.append(rest[0].rsplit("/", 1)[-1])
        elif kind == "node":
            nodes.append(rest[0])
        elif kind == "machine":
            machine = rest[0]
    present: bool | None = bool(gpus or nodes) or (False if functions else None)
    return {
        "nvidia_gpu": present,
        "pci_functions": functions,
        "gpus_on_pci": gpus,
        "device_nodes": nodes,
        "machine": machine,
    }
