"""What each NVIDIA Xid number means for an acceptance verdict: its name, its category and a severity.

The names follow NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors, r555-r590); the categories and
severities are this tool's reading of it, cross-checked against the GPUd and NVSentinel projects' tables:
an Xid that a buggy job can cause by itself (13, 31, 43, 45) is a WARN that names the GPU, because the
same Xid from three different jobs is still only a pattern; an Xid that only failing hardware, firmware or
a broken link produces is a FAIL with the repair that NVIDIA recommends for its category. Xid 63 alone is a
row remap being *recorded*, which is the memory working as designed: it is a WARN that points at
``gpu.memory``, where a pending remap (needs a GPU reset) or a remap failure (RMA) is judged. The NVLink
Xids of Blackwell (144-150) carry "Nonfatal" or "Fatal" in their text; a non-fatal one is a WARN.

Each row also says what the operator does first (its action, docs/actions.md) and what when the same Xid
comes back on the same GPU within the window: the category's pair, or the row's own where NVIDIA's
catalog resolves that Xid differently from its category. Xid 79 (off the bus): reboot, and RMA when it
recurs; 48 (double-bit ECC): reset the GPU so the row remap takes effect, RMA when it recurs; 64 (the
remap itself failed): RMA at once; 13/31/43/45: the job; 74 and the other NVLink Xids: reset, then reseat
when it recurs; 119/120 (GSP): reset, then reboot. Xid 154 says the recovery it needs in its own text
("… to 0x2 (Node Reboot Required)"), which wins over the table.

Data, not code: adding an Xid is adding a row.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import pairwise


@dataclass(frozen=True)
class Xid:
    number: int
    name: str
    category: str  # a key of REMEDIATION
    severity: str  # "FAIL" or "WARN"
    # (first, when it recurs), both from diagnose.core.model.ACTIONS; None: the category's (ACTION)
    action: tuple[str, str] | None = None

    @property
    def actions(self) -> tuple[str, str]:
        return self.action or ACTION[self.category]


REMEDIATION: dict[str, str] = {
    "application": "Look at the job that ran on this GPU (an illegal address, an out-of-range access, a killed "
    "context); the GPU is only suspect if the same Xid follows it across different jobs.",
    "driver": "Reset the GPU (`nvidia-smi -r -i <index>` with no process on it) and check the driver and "
    "firmware versions; if it recurs, collect nvidia-bug-report.sh and report it.",
    "memory": "Uncorrectable GPU memory error: drain the GPU, reset it (`nvidia-smi -r -i <index>`) so pending "
    "row remaps take effect, then read gpu.memory (remapped rows pending / failure). A remap failure or "
    "repeated uncorrectable errors on one GPU is an RMA case.",
    "bus": "The GPU stopped answering on PCIe: drain the node, reboot, reseat the GPU/board and check its power "
    "and riser cabling, update the system BIOS; a GPU that falls off again is an RMA case.",
    "nvlink": "NVLink fault: check `nvidia-smi nvlink -s` (inactive links) and `nvidia-smi nvlink -e` (error "
    "counters) for this GPU, check the fabric manager log, reseat the GPU/baseboard; recurring on one link "
    "means RMA of the GPU or the NVSwitch board.",
    "gsp": "The GPU System Processor stopped answering: reset the GPU (or reboot); if it recurs, upgrade the "
    "driver (the GSP firmware ships with it) and report it with nvidia-bug-report.sh.",
    "firmware": "GPU firmware or microcontroller fault: reset the GPU; if it recurs, run NVIDIA field "
    "diagnostics and RMA the GPU.",
    "hardware": "GPU hardware fault: drain the node, run NVIDIA field diagnostics and RMA the GPU if they fail.",
}

#: What the operator does first about an Xid of each category, and what when it recurs on the same GPU.
ACTION: dict[str, tuple[str, str]] = {
    "application": ("check_user_app", "check_user_app"),
    "driver": ("reset_gpu", "contact_support"),
    "memory": ("reset_gpu", "rma_gpu"),
    "bus": ("reboot", "rma_gpu"),
    "nvlink": ("reset_gpu", "reseat_or_replace_cable"),
    "gsp": ("reset_gpu", "reboot"),
    "firmware": ("reset_gpu", "rma_gpu"),
    "hardware": ("rma_gpu", "rma_gpu"),
}

_ROWS = (
    (8, "GPU stopped processing", "driver", "WARN"),
    (13, "Graphics Engine Exception", "application", "WARN"),
    (31, "GPU memory page fault", "application", "WARN"),
    (32, "Invalid or corrupted push buffer stream", "bus", "FAIL"),
    (38, "Driver firmware error", "firmware", "FAIL"),
    (43, "GPU stopped processing (channel reset)", "application", "WARN"),
    (45, "Preemptive cleanup, due to previous errors", "application", "WARN"),
    (48, "Double Bit ECC Error", "memory", "FAIL"),
    (56, "Display Engine error", "driver", "WARN"),
    (57, "Error programming video memory interface", "memory", "FAIL"),
    (61, "Internal micro-controller breakpoint/warning", "firmware", "FAIL"),
    (62, "Internal micro-controller halt", "firmware", "FAIL"),
    (
        63,
        "ECC page retirement or row remapping recording event",
        "memory",
        "WARN",
        ("reset_gpu", "reset_gpu"),
    ),
    (64, "ECC page retirement or row remapper recording failure", "memory", "FAIL", ("rma_gpu", "rma_gpu")),
    (69, "Graphics Engine class error", "driver", "FAIL"),
    (74, "NVLink Error", "nvlink", "FAIL"),
    (79, "GPU has fallen off the bus", "bus", "FAIL"),
    (92, "High single-bit ECC error rate", "memory", "FAIL"),
    (94, "Contained ECC error", "memory", "FAIL"),
    (95, "Uncontained ECC error", "memory", "FAIL"),
    (109, "Context Switch Timeout Error", "application", "WARN"),
    (110, "Security Fault Error", "hardware", "FAIL"),
    (119, "GSP RPC Timeout", "gsp", "FAIL"),
    (120, "GSP Error", "gsp", "FAIL"),
    (121, "C2C Link Error", "hardware", "FAIL"),
    (122, "SPI PMU RPC Read Failure", "firmware", "WARN"),
    (123, "SPI PMU RPC Write Failure", "firmware", "FAIL"),
    (124, "SPI PMU RPC Erase Failure", "firmware", "WARN"),
    (137, "NVLink FLA privilege error", "nvlink", "WARN"),
    (140, "Unrecovered ECC Error", "memory", "FAIL"),
    (143, "GPU Initialization Failure", "hardware", "FAIL", ("reboot", "rma_gpu")),
    (144, "NVLink SAW Error", "nvlink", "FAIL"),
    (145, "NVLink RLW Error", "nvlink", "FAIL"),
    (146, "NVLink TLW Error", "nvlink", "FAIL"),
    (147, "NVLink TREX Error", "nvlink", "FAIL"),
    (148, "NVLink NVLPW_CTRL Error", "nvlink", "FAIL"),
    (149, "NVLink NETIR Error", "nvlink", "FAIL"),
    (150, "NVLink MSE Error", "nvlink", "FAIL"),
    (151, "Key rotation Error", "firmware", "WARN"),
    (154, "GPU Recovery Action Changed", "hardware", "FAIL", ("reset_gpu", "reboot")),
    (155, "NVLink SW Defined Error", "nvlink", "WARN"),
    (156, "Resource Retirement Event", "memory", "WARN"),
)

CATALOG: dict[int, Xid] = {row[0]: Xid(*row) for row in _ROWS}

# Blackwell's NVLink Xids say in their text whether the link survived.
SEVERITY_FROM_TEXT = frozenset(range(144, 151))


def lookup(number: int) -> Xid:
    """The catalog row, or a WARN row for an Xid this table does not know (newer drivers add numbers)."""
    return CATALOG.get(number) or Xid(
        number, "not in this tool's Xid table", "driver", "WARN", ("contact_support", "contact_support")
    )


def severity(number: int, text: str) -> str:
    """The event's severity: the catalog's, lowered to WARN for an NVLink Xid that says "Nonfatal"."""
    row = lookup(number)
    if number in SEVERITY_FROM_TEXT and "nonfatal" in text.lower():
        return "WARN"
    return row.severity


# Xid 154's text names the recovery the driver asks for: "... to 0x2 (Node Reboot Required)".
_RECOVERY = re.compile(r"\((?P<what>[^()]*(?:reboot|reset)[^()]*)\)\s*\.?\s*$", re.IGNORECASE)


#: Lines of one Xid on one GPU closer together than this are one fault (a burst: a DBE reported per
#: address, an NVLink error per link); a line this long after the last is the fault coming back.
BURST_S = 60.0


def occurrences(epochs: list[float]) -> int:
    """How many separate times an Xid struck, from its lines' Unix times: 1 when none has a time (a burst
    cannot be told from a recurrence then, and the first action is the milder one)."""
    times = sorted(epochs)
    return 1 + sum(1 for before, after in pairwise(times) if after - before >= BURST_S)


def action(number: int, text: str, count: int = 1) -> str:
    """What the operator does first about Xid ``number`` striking ``count`` separate times on one GPU: the
    row's first action, its second when the Xid recurs; Xid 154's own recovery word (reboot, reset) where
    it says one."""
    if number == 154:
        said = _RECOVERY.search(text or "")
        if said:
            return "reboot" if "reboot" in said.group("what").lower() else "reset_gpu"
    first, again = lookup(number).actions
    return again if count > 1 else first
