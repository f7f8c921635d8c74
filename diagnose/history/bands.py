"""Message-size bands and busbw by size: what the comparison and the trends both measure busbw in."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Band:
    """A message-size band: busbw is compared per band because each has its own bottleneck."""

    key: str  # stable, ASCII: JSON keys of the report trend
    label: str  # as people read it
    min_bytes: int
    max_bytes: int | None  # exclusive; None: no upper end

    def holds(self, size: int) -> bool:
        return size >= self.min_bytes and (self.max_bytes is None or size < self.max_bytes)


MIB = 1 << 20
BANDS = (
    Band("<1MiB", "<1MiB", 0, MIB),  # latency-bound
    Band("1-64MiB", "1–64MiB", MIB, 64 * MIB),
    Band(">=64MiB", "≥64MiB", 64 * MIB, None),  # bandwidth-bound
)


def busbw_by_size(bench: Mapping[str, Any]) -> dict[int, float]:
    """The rows that measured something: a row with wrong results or without busbw carries no bandwidth."""
    sizes = {}
    for row in bench.get("rows", []):
        busbw = row.get("busbw_gbps")
        if isinstance(busbw, (int, float)) and not row.get("wrong"):
            sizes[int(row["bytes"])] = float(busbw)
    return sizes
