"""Fleets made of what the fleet probe really printed: the JSON lines of ``fleet_probe.py`` captured on the lent
2× H200 machine and on the 2-core CPU machine (tests/fixtures/captured/fleet_probe, see SOURCE there), as many
hosts as a test needs print them, one host's figures scaled where a test needs it slow.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from diagnose.benchmarks.setup import Setup
from diagnose.core.vars import Vars
from diagnose.launchers.base import LaunchOutcome
from diagnose.probes.fleet import HostFigures, Settings, copy_figures, settings_from
from tests.support.paths import CAPTURED

FLEET_PROBE = CAPTURED / "fleet_probe"
NCCL_2GPU = Setup("nccl", 2, [], [])


def outcome_of(name: str, scale: dict[str, float] | None = None, status: str = "done") -> LaunchOutcome:
    """The launcher's outcome for a captured probe: its start line and rows, figures scaled per metric."""
    records = [json.loads(line) for line in (FLEET_PROBE / name).read_text().splitlines() if line.strip()]
    rows = []
    for record in records:
        if record["event"] == "row":
            row = copy.deepcopy(record)
            factor = (scale or {}).get(row["collective"], 1.0)
            row["gbps"] = round(row["gbps"] * factor, 3)
            rows.append(row)
    start = next(r for r in records if r["event"] == "start")
    return LaunchOutcome(status, "" if status == "done" else "the probe hung", rows=rows, start=start)


def host(name: str, capture: str = "h200x2_256mib_busids.jsonl", **scale: float) -> HostFigures:
    """One host's figures as the controller reads them from ``capture``, scaled per metric."""
    figures = HostFigures(name)
    copy_figures(figures, outcome_of(capture, scale))
    return figures


def settings(**values: Any) -> Settings:
    """The fleet settings of a 2-GPU NCCL host judging all_reduce, NVLink expected at 340 GB/s."""
    return settings_from(Vars({"nvlink_busbw_gbps": 340, **values}), NCCL_2GPU, ["all_reduce"])
