"""How large the watch list's tables grow: 1,000 GPUs (125 hosts of 8, each GPU with its HCA port and
cable) recorded night after night, the database vacuumed and measured at 1, 30, 90 and 120 nights.

Per GPU a night: five GPU memory counters, five IB port counters, the cable's effective and raw BER and
its module temperature (13 readings). Run from the repository root: ``python bench/watch_store_size.py``;
docs/nightly.md quotes its table.
"""

from __future__ import annotations

import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

from diagnose import history
from diagnose.history.watch_readings import Reading
from tests.support.nightly import make_results, night

HOSTS = 125
GPU_METRICS = (
    "gpu.ecc_corrected_volatile",
    "gpu.ecc_corrected_aggregate",
    "gpu.ecc_uncorrected_aggregate",
    "gpu.rows_remapped_correctable",
    "gpu.rows_remapped_uncorrectable",
)
PORT_METRICS = (
    "ib.symbol_error",
    "ib.link_error_recovery",
    "ib.link_downed",
    "ib.port_rcv_errors",
    "ib.local_link_integrity_errors",
)


def readings_of(n: int, rnd: random.Random) -> list[Reading]:
    out = []
    for h in range(HOSTS):
        host = f"gpu{h:04d}"
        for g in range(8):
            gpu, port, cable = (
                f"gpu:1652{h:04d}{g:04d}",
                f"port:0x58a2e103{h:04x}{g:04x}/1",
                f"cable:MT22{h:04d}{g:02d}",
            )
            for m in GPU_METRICS:
                out.append(
                    Reading(
                        gpu, host, f"{host} GPU {g}", "NVIDIA H100 80GB HBM3", m, float(rnd.randint(0, 3) + n)
                    )
                )
            for m in PORT_METRICS:
                out.append(Reading(port, host, f"{host} mlx5_{g}/1", "MT4129", m, float(rnd.randint(0, 2))))
            slot = f"{host} mlx5_{g}/1"
            out.append(Reading(cable, host, slot, "MMA4Z00-NS", "link.effective_ber_log10", -250.0, -12.0))
            out.append(Reading(cable, host, slot, "MMA4Z00-NS", "link.raw_ber_log10", -8 - rnd.random()))
            out.append(
                Reading(cable, host, slot, "MMA4Z00-NS", "cable.temperature_c", 50 + 5 * rnd.random(), 75.0)
            )
    return out


def main(nights: int = 120) -> None:
    db = Path(tempfile.mkdtemp()) / "h.sqlite3"
    rnd = random.Random(0)
    print("nights  readings/night  database MB  record s")
    for n in range(nights):
        results = make_results(f"run{n:03d}", night(n))
        results.update(checks=[], hosts=[], benchmarks=[])
        history.record_run(db, results, None)
        now = readings_of(n, rnd)
        started = time.perf_counter()
        history.record_watch(db, results, history.WatchFindings(readings=now))
        took = time.perf_counter() - started
        if n + 1 in (1, 30, 90, nights):
            with sqlite3.connect(db) as conn:
                conn.execute("VACUUM")
            print(f"{n + 1:>6}  {len(now):>14}  {db.stat().st_size / 1e6:>11.1f}  {took:>8.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 120)
