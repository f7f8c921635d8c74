"""How long each stage of a run took, in the words the progress lines, results.json's ``run.stages`` and the
report all use: a stage cut short by Ctrl-C reads as interrupted, with what was still running then,
never as done, wherever it is read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from diagnose.core.units import duration


def stage_entry(stage: str, seconds: float, running: Sequence[str] | None = None) -> dict[str, Any]:
    """One stage as ``run.stages`` records it; ``running`` (None: it ended normally) makes it interrupted."""
    entry: dict[str, Any] = {"stage": stage, "seconds": round(seconds, 1)}
    if running is not None:
        entry["interrupted"] = True
        entry["still_running"] = list(running)
    return entry


def still_running(where: str, what: str | None, seconds: float) -> str:
    """What a stage cut short left under way on ``where``: ``q3 still running ibstat (6 s)``."""
    return f"{where} still running {what or 'its checks'} ({duration(seconds)})"


def stage_text(entry: Mapping[str, Any]) -> str:
    """``host checks done in 6 s``, or ``host checks interrupted after 6 s; q3 still running ibstat (6 s)``."""
    stage, seconds = entry.get("stage"), entry.get("seconds")
    if not entry.get("interrupted"):
        return f"{stage} done in {duration(seconds)}"
    running = [str(r) for r in entry.get("still_running") or []]
    return "; ".join([f"{stage} interrupted after {duration(seconds)}", *running])
