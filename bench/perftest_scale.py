"""Per-NIC perftest at scale: how long ib.write_bw takes on 1,024 hosts × 8 rails, and whether it names
the slow NIC and the slow cable it was given.

No RDMA hardware: N hosts on a modelled fabric, driven through the stage's own driver
(``diagnose.probes.perftest_campaign.Campaign``: first rounds, rail fleets, partners, localization rounds,
verdicts); only the RoundMeasure and the clock are simulated.

Fabric model. Every NIC writes at ``--gbps`` (391 Gb/s: an NDR 400 port at 97.8 %, the capture the test
bed prints) times a persistent per-NIC factor around 1 (``--nic-spread``) and fresh noise per reading
(``--noise``); a pair runs at its slower NIC's pace and its cable's. ``--slow-nics`` NICs are cut to
``--slow-factor`` of their rate, ``--slow-links`` cables likewise, at random hosts and rails.

Time model. A pair's launch costs ``launch_s`` (copy both scripts, start them detached, poll, stop by
token, fetch the outputs, remove the folders) plus, per step, the measurement (``--duration-s`` for
bandwidth, ~0.5 s for 5000 latency iterations) and ``step_s`` (start the tools, connect, the 1 s poll);
every pair of a round runs at once, so a round lasts as long as its longest launch. ``--measure`` takes
``launch_s`` and ``step_s`` from the real thing: pair launches of 2, 4 and 8 steps of the perftest stand-in
(tests/support/perftest_standin.py) between two sshd test hosts, at ``-D 1``, three times each, a line
through the medians (T = launch_s + steps × (1 + step_s)). Without it the defaults are those measured on this project's
2-core build machine (see docs/benchmarks.md). On a cluster the stand-in's ~0.1 s Python start becomes perftest's
QP set-up (and with GPUDirect a CUDA context, ~1-2 s): ``--step-s`` adds it.

    python bench/perftest_scale.py --hosts 64,256,1024 --rails 8
    python bench/perftest_scale.py --measure --hosts 1024
    python bench/perftest_scale.py --hosts 1024 --slow-nics 4 --slow-links 2 --latency
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from diagnose.localize.model import edge  # noqa: E402
from diagnose.probes import fleet_judge  # noqa: E402
from diagnose.probes.perftest_campaign import Campaign, Launch  # noqa: E402
from diagnose.probes.perftest_plan import HostRails, Nic, Step  # noqa: E402
from diagnose.probes.perftest_readings import Reading  # noqa: E402
from diagnose.probes.perftest_settings import Settings  # noqa: E402

#: Measured with --measure on the 2-core build machine (2, 4 and 8 steps, medians of 3; see docs/benchmarks.md).
LAUNCH_S = 0.64
STEP_S = 0.60
LATENCY_STEP_S = 0.5


@dataclass
class SimFabric:
    """One trial's cluster: NIC and cable factors, noise, and the simulated clock."""

    nic: dict[tuple[str, int], float]
    link: dict[tuple[str, str, int], float]
    gbps: float
    noise: float
    rng: random.Random
    duration_s: float
    launch_s: float
    step_s: float
    now: float = 0.0
    rounds: list[float] = field(default_factory=list)

    def value(self, step: Step, rail: int) -> float:
        a, b = edge(step.writer, step.server)
        pace = min(
            self.nic[(step.writer, rail)], self.nic[(step.server, rail)], self.link.get((a, b, rail), 1.0)
        )
        return round(self.gbps * pace * (1.0 + self.rng.gauss(0.0, self.noise)), 2)

    def launch_seconds(self, steps: Sequence[Step]) -> float:
        work = sum((self.duration_s if s.kind == "bw" else LATENCY_STEP_S) + self.step_s for s in steps)
        return self.launch_s + work

    def __call__(self, number: int, launches: Sequence[Launch]) -> list[Reading]:
        readings = []
        for _, _, steps in launches:
            for step in steps:
                for rail in step.rails:
                    reading = Reading(number, step, rail, f"mlx5_{rail}", f"mlx5_{rail}", 400.0, "cuda→cuda")
                    if step.kind == "bw":
                        reading.gbps = self.value(step, rail)
                    else:
                        reading.latency = {"typical_us": 1.9, "avg_us": 1.9, "p99_us": 2.1, "p999_us": 5.0}
                    readings.append(reading)
        seconds = max(self.launch_seconds(steps) for _, _, steps in launches)
        self.now += seconds
        self.rounds.append(seconds)
        return readings

    def clock(self) -> float:
        return self.now


def trial(hosts: int, args: argparse.Namespace, rng: random.Random) -> dict[str, float]:
    names = [f"node{i:04d}" for i in range(hosts)]
    rails = {
        n: HostRails(n, n, tuple(Nic(n, r, f"mlx5_{r}", 1, 400, r) for r in range(args.rails)), True, "sim")
        for n in names
    }
    nic = {(n, r): 1.0 + rng.gauss(0.0, args.nic_spread) for n in names for r in range(args.rails)}
    planted_nics = set()
    for _ in range(args.slow_nics):
        key = (rng.choice(names), rng.randrange(args.rails))
        nic[key] = args.slow_factor
        planted_nics.add(key)
    link = {}
    planted_links = set()
    for _ in range(args.slow_links):
        i = rng.randrange(0, hosts - 1, 2)  # a first-round pair: the cable the first round uses
        key = (*edge(names[i], names[i + 1]), rng.randrange(args.rails))
        link[key] = args.slow_factor
        planted_links.add(key)
    fabric = SimFabric(nic, link, args.gbps, args.noise, rng, args.duration_s, args.launch_s, args.step_s)
    settings = Settings(duration_s=args.duration_s, budget_s=args.budget_s)
    started = time.perf_counter()
    outcome = Campaign(
        rails,
        settings,
        fleet_judge.Thresholds(),
        fabric,
        latency=args.latency,
        clock=fabric.clock,
        deadline=args.budget_s,
    ).run(names)
    cpu = time.perf_counter() - started
    named_nics = {
        (c.host, o["rail"])
        for c in outcome.conclusion.checks
        if c.host and c.status == "FAIL"
        for o in c.observed
    }
    named_links = {
        (*edge(*c.observed["hosts"]), c.observed["rail"])
        for c in outcome.conclusion.checks
        if c.host is None
        and c.status == "FAIL"
        and isinstance(c.observed, dict)
        and "hosts" in c.observed
        and c.message.startswith("the link")
    }
    found = len(planted_nics & named_nics) + len(planted_links & named_links)
    planted = len(planted_nics) + len(planted_links)
    return {
        "minutes": fabric.now / 60.0,
        "first_round_min": fabric.rounds[0] / 60.0 if fabric.rounds else 0.0,
        "rounds": outcome.rounds,
        "launches": outcome.launches,
        "accurate": float(
            found == planted and not (named_nics - planted_nics) and not (named_links - planted_links)
        ),
        "false": len(named_nics - planted_nics) + len(named_links - planted_links),
        "cpu_s": cpu,
        "dropped": len(outcome.not_measured),
    }


def measure_launch(repeats: int = 3, counts: Sequence[int] = (2, 4, 8)) -> tuple[float, float]:
    """(launch_s, step_s) of the stand-in's pair launch between two sshd test hosts: launches of ``counts``
    steps at -D 1, ``repeats`` times each in turn, a least-squares line through the medians."""
    from diagnose.connectors import connect
    from diagnose.launchers.base import LaunchSpec
    from diagnose.launchers.perftest import launch_pair
    from diagnose.probes.perftest_plan import check_steps, host_script, rails_of
    from tests.support.bedhosts import hosts_of
    from tests.support.perftest import h100_facts, perftest_host
    from tests.support.testbed import TestBed

    settings = Settings(duration_s=1, connect_s=5)
    timings: dict[int, list[float]] = {count: [] for count in counts}
    with tempfile.TemporaryDirectory(prefix="perftest-scale-") as tmp, TestBed(Path(tmp) / "bed") as bed:
        bed.add_many([perftest_host("node1"), perftest_host("node2")])
        hosts = hosts_of(bed, expected_hca_count=8, expected_link_layer="InfiniBand")
        rails = {h.name: rails_of(h, h100_facts(h.vars)) for h in hosts}
        connections = {h.name: connect(h) for h in hosts}
        for connection in connections.values():
            connection.open()
        try:
            for index in range(repeats * len(counts)):
                count = counts[index % len(counts)]
                steps = check_steps("node1", "node2", list(range(count // 2)))
                scripts = {n: host_script(n, steps, rails, 18515, settings) for n in ("node1", "node2")}  # type: ignore[arg-type]
                spec = LaunchSpec(
                    run_id=f"scale-{index}",
                    tag="pair",
                    hosts=hosts,
                    connections=connections,
                    nproc=1,
                    backend="perftest",
                    program_args=[],
                    expected_rows=[],
                    row_budget_s=lambda c, n: 60.0,
                    out_dir=Path(tmp) / "out",
                )
                began = time.perf_counter()
                outcome = launch_pair(spec, scripts, [s.describe() for s in steps], settings.step_budget_s)
                timings[count].append(time.perf_counter() - began)
                assert outcome.status == "done", outcome.message
        finally:
            for connection in connections.values():
                connection.close()
    medians = {count: statistics.median(values) for count, values in timings.items()}
    slope, intercept = statistics.linear_regression(list(medians), list(medians.values()))
    shown = ", ".join(f"{count} steps {seconds:.2f} s" for count, seconds in medians.items())
    print(
        f"stand-in pair launch at -D 1 ({shown}; medians of {repeats}): launch_s {intercept:.2f}, "
        f"step {slope:.2f} s = 1 s measuring + step_s {slope - settings.duration_s:.2f}",
        file=sys.stderr,
    )
    return max(0.0, intercept), slope - settings.duration_s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hosts", default="64,256,1024", help="comma-separated host counts")
    parser.add_argument("--rails", type=int, default=8)
    parser.add_argument("--duration-s", type=int, default=5, help="perftest -D per direction")
    parser.add_argument("--launch-s", type=float, default=LAUNCH_S)
    parser.add_argument("--step-s", type=float, default=STEP_S)
    parser.add_argument("--measure", action="store_true", help="take launch_s and step_s from the test bed")
    parser.add_argument("--latency", action="store_true", help="add ib_write_lat per rail")
    parser.add_argument("--slow-nics", type=int, default=1)
    parser.add_argument("--slow-links", type=int, default=1)
    parser.add_argument("--slow-factor", type=float, default=0.5)
    parser.add_argument("--gbps", type=float, default=391.2)
    parser.add_argument("--noise", type=float, default=0.005, help="relative noise of one reading")
    parser.add_argument("--nic-spread", type=float, default=0.003, help="persistent spread of healthy NICs")
    parser.add_argument("--budget-s", type=float, default=Settings.budget_s)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if args.measure:
        args.launch_s, args.step_s = measure_launch()
    rng = random.Random(args.seed)
    print(
        f"{args.rails} rails, -D {args.duration_s} s, launch {args.launch_s:.2f} s + step {args.step_s:.2f} s, "
        f"{args.slow_nics} slow NIC(s) and {args.slow_links} slow cable(s) at ×{args.slow_factor}, "
        f"noise {args.noise:.1%}, {args.trials} trials"
    )
    print(
        f"{'hosts':>6} {'stage min':>10} {'1st round':>10} {'rounds':>7} {'launches':>9} {'accurate':>9} {'false':>6} {'cpu s':>6}"
    )
    for hosts in [int(h) for h in args.hosts.split(",")]:
        results = [trial(hosts, args, rng) for _ in range(args.trials)]
        row = {k: statistics.median(r[k] for r in results) for k in results[0]}
        accurate = sum(r["accurate"] for r in results) / len(results)
        print(
            f"{hosts:>6} {row['minutes']:>10.2f} {row['first_round_min']:>10.2f} {row['rounds']:>7.0f} "
            f"{row['launches']:>9.0f} {accurate:>9.0%} {row['false']:>6.0f} {row['cpu_s']:>6.1f}"
            + (" (rounds dropped: budget)" if row["dropped"] else "")
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
