"""Localization simulator: how fast and how surely the search names a slow host or link at scale.

No hardware: N hosts (up to thousands) on a modelled fabric, driven through the same search and driver
that real runs use (``diagnose.localize.localize``); only the Measure and the clock are simulated.

Fabric model. Every host has a persistent bandwidth factor around 1 (``--host-spread``, healthy hosts
differ a little); a slow host's factor is cut by ``--deficit``, a slow link (two neighbours in the
collective's ring, the links the full run used) likewise. A group measured as a ring runs at the pace of
its slowest member: busbw = peak × efficiency(nodes) × min(its hosts' factors, its ring links' factors)
× (1 + noise), noise normal with ``--noise`` relative spread, fresh at every measurement. Peak is
8 × 400 Gb/s per host (400 GB/s), efficiency the log-linear curve of ``diagnose.benchmarks.expect``.

Time model (``diagnose.localize.timing.TimeModel``, documented there): one launch costs
``--launch-s`` + ``--per-node-s`` × nodes + 28 passes of 1 GiB at the group's busbw; disjoint groups run
at once (at most ``--concurrency`` launches; 0, the default, as many as the hosts make), a wave lasts
as long as its slowest launch, waves and repeats follow one another. sim_minutes is the sum: the search's own measurement time, from the moment
the full run was found short.

Scoring per trial: accuracy = every planted slow element named (a host as a host, a link as a link);
false = each named host or link that was not planted; named_minutes = when the last planted element was
named (the end of the round that convicted it), over the trials that named them all — a search may go
on with noise-level suspects after that, until its budget ends. With nothing planted (``--slow-hosts 0``, noise
only, or ``--fleet-deficit``: every host equally slower), a trial is accurate when nothing is named.

Each trial draws its fabric and noise from its own random stream (seed, size, trial), so trials run in
``--jobs`` processes at once give the same table as one process, and a change to the search leaves the
other trials' fabrics where they were.

    python bench/localize.py --hosts 64,512,1024,4096 --trials 100
    python bench/localize.py --hosts 1024 --slow-hosts 0 --slow-links 1      # one slow link
    python bench/localize.py --hosts 1024 --slow-hosts 2                     # two slow hosts
    python bench/localize.py --hosts 1024 --deficit 0.1                      # 10 % slow host
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from diagnose.benchmarks.expect import fabric_efficiency  # noqa: E402
from diagnose.localize import Finding, Settings, TimeModel, localize  # noqa: E402
from diagnose.localize.model import Edge, edge, ring_edges  # noqa: E402

PEAK_GBPS = 8 * 400 / 8


@dataclass
class Fabric:
    """One trial's cluster: per-host and per-link factors, noise, and the simulated clock."""

    host_factor: dict[str, float]
    link_factor: dict[Edge, float]
    noise: float
    rng: random.Random
    timing: TimeModel
    now: float = 0.0

    def busbw(self, group: list[str]) -> float:
        pace = min(self.host_factor[h] for h in group)
        links = [self.link_factor.get(e, 1.0) for e in ring_edges(tuple(group))]
        pace = min([pace, *links])
        value = PEAK_GBPS * fabric_efficiency(len(group)) * pace * (1.0 + self.rng.gauss(0.0, self.noise))
        return max(value, 0.01)

    def measure(self, groups: list[list[str]]) -> list[float | None]:
        values = [self.busbw(g) for g in groups]
        self.now += max(self.timing.launch_seconds(len(g), v) for g, v in zip(groups, values, strict=True))
        return list(values)

    def clock(self) -> float:
        return self.now


def plant(
    hosts: list[str], args: argparse.Namespace, rng: random.Random
) -> tuple[Fabric, set[tuple[str, tuple[str, ...]]]]:
    """A fabric with the scenario's slow elements at random places; the set of what was planted."""
    factor = {h: 1.0 + rng.gauss(0.0, args.host_spread) for h in hosts}
    if args.fleet_deficit:
        factor = {h: f * (1.0 - args.fleet_deficit) for h, f in factor.items()}
    planted: set[tuple[str, tuple[str, ...]]] = set()
    for host in rng.sample(hosts, args.slow_hosts):
        factor[host] *= 1.0 - args.deficit
        planted.add(("host", (host,)))
    slow_hosts = {p[1][0] for p in planted}
    ring = [edge(hosts[i], hosts[(i + 1) % len(hosts)]) for i in range(len(hosts))]
    free = [e for e in ring if not set(e) & slow_hosts]
    links = {}
    for link in rng.sample(free, args.slow_links):
        links[link] = 1.0 - args.deficit
        planted.add(("link", link))
    timing = TimeModel(launch_s=args.launch_s, per_node_s=args.per_node_s)
    return Fabric(factor, links, args.noise, rng, timing), planted


def trial(
    n: int, args: argparse.Namespace, settings: Settings, index: int
) -> tuple[bool, int, int, float, int, float | None]:
    """One trial on its own random stream (the seed, the size and the trial's index), so that trials can
    run in any order or process and a change to the search moves no other trial's fabric: whether
    everything planted was named, how many named were not planted, rounds, minutes, launches and when
    the last planted element was named."""
    rng = random.Random(f"{args.seed}:{n}:{index}")
    hosts = [f"node{i:04d}" for i in range(n)]
    fabric, planted = plant(hosts, args, rng)
    shortfall = fabric.busbw(hosts) / (PEAK_GBPS * fabric_efficiency(n))
    finding = localize(hosts, fabric.measure, settings, clock=fabric.clock, shortfall=shortfall)
    named = {(a.kind, a.hosts) for a in finding.accused}
    correct = planted <= named if planted else not named
    at = named_minutes(finding, planted) if planted and planted <= named else None
    return correct, len(named - planted), finding.rounds, finding.seconds / 60, finding.launches, at


def run_size(n: int, args: argparse.Namespace, settings: Settings) -> dict[str, float]:
    work = [(n, args, settings, index) for index in range(args.trials)]
    if args.jobs > 1:
        with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
            results = pool.starmap(trial, work, chunksize=1)
    else:
        results = [trial(*w) for w in work]
    correct = sum(r[0] for r in results)
    false = sum(r[1] for r in results)
    rounds = [r[2] for r in results]
    minutes = [r[3] for r in results]
    launches = [r[4] for r in results]
    named_at = [r[5] for r in results if r[5] is not None]
    return {
        "hosts": n,
        "trials": args.trials,
        "accuracy_pct": 100.0 * correct / args.trials,
        "false_per_100": 100.0 * false / args.trials,
        "rounds": statistics.mean(rounds),
        "sim_minutes": statistics.mean(minutes),
        "rounds_max": max(rounds),
        "minutes_max": max(minutes),
        "launches": statistics.mean(launches),
        "named_minutes": statistics.mean(named_at) if named_at else float("nan"),
    }


def named_minutes(finding: Finding, planted: set[tuple[str, tuple[str, ...]]]) -> float:
    """Minutes from the start to the end of the round whose measurements convicted the last planted element."""
    rounds = {id(j): step.round for step in finding.steps for j in step.judged}
    last = max(
        max((rounds.get(id(j), 0) for j in [*a.evidence, *a.cleared_by]), default=0)
        for a in finding.accused
        if (a.kind, a.hosts) in planted
    )
    return sum(step.seconds for step in finding.steps if step.round <= last) / 60


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hosts", default="64,512,1024,4096", help="comma-separated host counts")
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--slow-hosts", type=int, default=1)
    parser.add_argument("--slow-links", type=int, default=0)
    parser.add_argument("--deficit", type=float, default=0.20, help="how much slower a slow element is")
    parser.add_argument("--fleet-deficit", type=float, default=0.0, help="every host this much slower")
    parser.add_argument("--noise", type=float, default=0.03, help="relative noise of one measurement")
    parser.add_argument("--host-spread", type=float, default=0.01, help="persistent spread of healthy hosts")
    parser.add_argument("--concurrency", type=int, default=Settings.concurrency)
    parser.add_argument("--repeats", type=int, default=Settings.repeats)
    parser.add_argument("--max-repeats", type=int, default=Settings.max_repeats)
    parser.add_argument("--quorum", type=int, default=Settings.quorum)
    parser.add_argument("--budget-s", type=float, default=Settings.budget_s)
    parser.add_argument("--launch-s", type=float, default=TimeModel.launch_s)
    parser.add_argument("--per-node-s", type=float, default=TimeModel.per_node_s)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=1, help="trials run in this many processes at once")
    args = parser.parse_args(argv)
    settings = Settings(
        concurrency=args.concurrency,
        repeats=args.repeats,
        max_repeats=args.max_repeats,
        quorum=args.quorum,
        budget_s=args.budget_s,
    )
    print(
        f"# slow hosts {args.slow_hosts}, slow links {args.slow_links}, deficit {args.deficit:.0%}, "
        f"fleet deficit {args.fleet_deficit:.0%}, noise {args.noise:.0%}, host spread {args.host_spread:.0%}, "
        f"concurrency {args.concurrency}, quorum {args.quorum}, launch {args.launch_s:g} s + "
        f"{args.per_node_s:g} s/node"
    )
    columns = (
        "hosts", "trials", "accuracy_pct", "false_per_100", "rounds", "sim_minutes",
        "rounds_max", "minutes_max", "launches", "named_minutes",
    )  # fmt: skip
    print("  ".join(f"{c:>13}" for c in columns))
    for n in (int(x) for x in args.hosts.split(",")):
        row = run_size(n, args, settings)
        print(
            "  ".join(f"{row[c]:>13.1f}" if isinstance(row[c], float) else f"{row[c]:>13}" for c in columns)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
