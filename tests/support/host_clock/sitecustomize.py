"""The clock a host of its own would give the fleet probe's copies, loaded by every Python of a bed host whose
login environment puts this folder on PYTHONPATH (tests/integration/test_fleet_probes.py).

Bed hosts share the machine's cores, so a copy timed by the wall clock measures how long the other hosts'
processes kept it off a core, not how fast the host copies. Timed by the CPU time its process spent, the copy
takes what it would take on a machine of its own, whatever else runs. ``BED_HOST_SLOWDOWN`` is the bed's own
fault: every interval the probe times on that host lasts that many times longer, so its figures are that
fixed fraction of what the same copies would read; the peers set 1. Only calls made from the shipped
``fleet_probe.py`` (under whatever name the launcher copied it) read this clock: torchrun and every other
program on the host keep the wall clock their waits need.
"""

from __future__ import annotations

import os
import sys
import time
from functools import cache
from pathlib import Path

_SLOWDOWN = float(os.environ.get("BED_HOST_SLOWDOWN", "1"))
_WALL = time.perf_counter
_PROBE = (Path(__file__).resolve().parents[3] / "diagnose" / "shipped" / "fleet_probe.py").read_bytes()


@cache
def _is_probe(filename: str) -> bool:
    """Whether ``filename`` is the fleet probe: the launcher ships it under a name of its own."""
    try:
        return Path(filename).read_bytes() == _PROBE
    except OSError:
        return False


def _perf_counter() -> float:
    if _is_probe(sys._getframe(1).f_code.co_filename):
        return time.process_time() * _SLOWDOWN
    return _WALL()


time.perf_counter = _perf_counter
