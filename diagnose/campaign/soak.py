"""The soak's rounds in time: every ``soak_interval_minutes`` for ``soak_hours``, from the first round's
start, which the ledger keeps. Pure.

A controller killed and started again reads the finished rounds from the ledger and goes on with the first
round not finished: one already due runs at once, a later one is waited for. A round that was running when
the controller died left no record, so it runs again in full.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_INTERVAL_MINUTES = 60.0


@dataclass(frozen=True)
class Soak:
    start: float  # epoch seconds of round 1
    hours: float
    interval_minutes: float

    @property
    def rounds(self) -> int:
        return max(1, math.floor(self.hours * 60 / self.interval_minutes + 1e-9))

    def due(self, number: int) -> float:
        """When round ``number`` (from 1) is due."""
        return self.start + (number - 1) * self.interval_minutes * 60

    def next_round(self, finished: Collection[int]) -> int | None:
        return next((n for n in range(1, self.rounds + 1) if n not in finished), None)

    def to_dict(self) -> dict[str, Any]:
        return {"start": self.start, "hours": self.hours, "interval_minutes": self.interval_minutes}

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> Soak:
        return cls(float(data["start"]), float(data["hours"]), float(data["interval_minutes"]))
