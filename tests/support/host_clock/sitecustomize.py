"""The clock a host of its own would give the fleet probe's copies, loaded by every Python of a bed host whose
login environment puts this folder on PYTHONPATH (tests/integration/test_fleet_probes.py).

Bed hosts share the machine's cores, so a copy timed by the wall clock measures how long the other hosts'
processes kept it off a core, not how fast the host copies. Timed by the CPU time its process spent, the copy
takes what it would take on a machine of its own, whatever else runs. ``BED_HOST_SLOWDOWN`` is the bed's own
fault: every interval the probe times on that host lasts that many times longer, so its figures are that
fixed fraction of what the same copies would read; the peers set 1. Only calls made from the shipped
``fleet_probe.py`` (under whatever name the launcher copied it) read this clock: torchrun and every other
program on the host keep the wall clock their waits need.

``BED_PROBE_BARRIER`` names a folder every host sees: the probe's first clock read waits there until
``BED_PROBE_HOSTS`` hosts' probes have started (each leaves a file named ``BED_HOST``), so the hosts are
measured at once whenever the controller launched them all before any finished, however unevenly the shared
cores started them; probes launched one host after another never get past it, and the launcher reports them
hung.
"""

from __future__ import annotations

import os
import sys
import time
from functools import cache
from pathlib import Path

_SLOWDOWN = float(os.environ.get("BED_HOST_SLOWDOWN", "1"))
_BARRIER = os.environ.get("BED_PROBE_BARRIER")
_WALL = time.perf_counter
_started = False
_PROBE = (Path(__file__).resolve().parents[3] / "diagnose" / "shipped" / "fleet_probe.py").read_bytes()


@cache
def _is_probe(filename: str) -> bool:
    """Whether ``filename`` is the fleet probe: the launcher ships it under a name of its own."""
    try:
        return Path(filename).read_bytes() == _PROBE
    except OSError:
        return False


def _wait_for_peers(folder: Path) -> None:
    (folder / os.environ["BED_HOST"]).touch()
    while len(list(folder.iterdir())) < int(os.environ["BED_PROBE_HOSTS"]):
        time.sleep(0.01)


def _perf_counter() -> float:
    global _started
    if not _is_probe(sys._getframe(1).f_code.co_filename):
        return _WALL()
    if _BARRIER and not _started:
        _started = True
        _wait_for_peers(Path(_BARRIER))
    return time.process_time() * _SLOWDOWN


time.perf_counter = _perf_counter
