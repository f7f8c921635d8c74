"""SSH reader wake-ups: how often the batch reader wakes per host, and the controller CPU it costs.

A batch's output reaches the controller as ~150 small SSH packets (each ``printf`` of the batch shell is
one). The reader (``_pump`` in diagnose/connectors/ssh.py) sleeps on the channel's event pipe; woken per
packet, each wake-up is a GIL and lock hand-off with paramiko's transport thread. ``GATHER_S`` lets output
gather after each hand-on. This bench runs the real batch of the acceptance catalog on loopback sshd hosts
of the test bed, one host at a time (so the number is the connector's own, not the load's), alternating the
baseline (``GATHER_S = 0``, a wake-up per packet) with the shipped value, and prints per host: reader
looks, looks that found output, controller CPU (this process, every thread: login + batch, no parsing)
and wall time.

    python3 bench/reader_wakeups.py [--hosts 4] [--rounds 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import whole_run  # noqa: E402

from diagnose.config.playbook import load_playbook  # noqa: E402
from diagnose.connectors import connect, ssh  # noqa: E402
from diagnose.targets.loading import InventoryFiles  # noqa: E402
from diagnose.targets.resolve import resolve_hosts  # noqa: E402
from diagnose.targets.sources import HostContext  # noqa: E402
from tests.support.testbed import TestBed  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    shipped = ssh.GATHER_S
    looks = {"all": 0, "output": 0}
    drain = ssh._drain

    def counted(*drain_args: object) -> bool:
        got = drain(*drain_args)  # type: ignore[arg-type]
        looks["all"] += 1
        looks["output"] += got
        return got

    ssh._drain = counted  # type: ignore[assignment]
    rows: dict[float, list[tuple[float, float, float, float]]] = {0.0: [], shipped: []}
    with tempfile.TemporaryDirectory(prefix="wakeups-") as tmp:
        work = Path(tmp)
        with TestBed(work / "bed") as bed:
            bed.add_many([whole_run.bench_host(f"h{i:02d}") for i in range(args.hosts)])
            inventory = bed.write_inventory(work / "bed.yaml", extra_vars=whole_run.common_vars())
            playbook = load_playbook(str(whole_run.write_playbook(work)))
            hosts = resolve_hosts([InventoryFiles(inventory)], HostContext(playbook))
            checks, _ = whole_run.stages.selected_catalog(playbook.checks)
            for _ in range(args.rounds):
                for gather in rows:
                    ssh.GATHER_S = gather
                    looks.update(all=0, output=0)
                    cpu, wall = time.process_time(), time.perf_counter()
                    for host in hosts:
                        connection = connect(host)
                        connection.open()
                        connection.run_batch(whole_run.stages.commands_of(checks, host.vars))
                        connection.close()
                    n = len(hosts)
                    rows[gather].append(
                        (
                            looks["all"] / n,
                            looks["output"] / n,
                            1000 * (time.process_time() - cpu) / n,
                            (time.perf_counter() - wall) / n,
                        )
                    )
    print(f"{len(hosts)} bed hosts one at a time, 35 commands each, median of {args.rounds} rounds")
    print(f"{'GATHER_S':>9} {'looks/host':>11} {'with output':>12} {'CPU ms/host':>12} {'wall s/host':>12}")
    for gather, measured in rows.items():
        medians = [statistics.median(column) for column in zip(*measured, strict=True)]
        label = f"{gather:g}" + (" (base)" if gather == 0.0 else "")
        print(f"{label:>9} {medians[0]:>11.0f} {medians[1]:>12.0f} {medians[2]:>12.1f} {medians[3]:>12.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
