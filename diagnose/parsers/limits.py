"""``ulimit -S -l`` and ``ulimit -H -l``: the locked-memory limit (KiB) of the login the job would run in.

RDMA registers (pins) every buffer it sends from or receives into, and pinned pages count against
RLIMIT_MEMLOCK; the distribution default of 64 KiB (8 MiB on newer systemd) is far below what NCCL's IB
transport registers, so ``ibv_reg_mr`` fails or NCCL falls back to sockets.
"""

from __future__ import annotations

import re
from typing import Any

from diagnose.core.check import ParseError

MEMLOCK_SCRIPT = "ulimit -S -l; ulimit -H -l"

_VALUE = re.compile(r"^(unlimited|\d+)$")


def parse_memlock(text: str) -> dict[str, Any]:
    """Facts: ``soft_kib`` and ``hard_kib``: an int, or None for ``unlimited``; ``soft``/``hard`` as printed."""
    values = [line.strip() for line in text.splitlines() if _VALUE.match(line.strip())]
    if len(values) < 2:
        raise ParseError(f"expected two ulimit -l values (soft, hard), got {text.strip()[:120]!r}")
    soft, hard = values[:2]
    return {
        "soft": soft,
        "hard": hard,
        "soft_kib": None if soft == "unlimited" else int(soft),
        "hard_kib": None if hard == "unlimited" else int(hard),
    }
