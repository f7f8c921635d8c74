"""An acceptance campaign of 16,384 GPUs, simulated: days to sign-off against passes of the whole acceptance.

No hardware and no wall clock: the hosts, their failures and repairs, and the time are simulated; what the
campaign knows and decides is the real thing. Every simulated run becomes a small results document (per host
its identity and a row per phase it got through, burn-in hours per GPU, the collective with the hosts that
failed in it), recorded with ``diagnose.campaign.ledger.record_run`` into a real history database; what runs
next is ``plan(standing(load(...)))``, as ``diagnose campaign next`` asks it.

Failure model. Failures strike a host while it is under test, at one rate per host-hour: a cluster of
16,384 GPUs fails every 1.8 h (``--mtbf-hours``, ``--mtbf-gpus``), i.e. once per 1.8 x 2,048 host-hours
for hosts of 8 GPUs, so a campaign of fewer hosts fails proportionally less often. The figure is Meta's
projected mean time to failure of a 16,384-GPU job (Kokolis et al., "Revisiting Reliability in Large-Scale
Machine Learning Research Clusters", arXiv 2410.21680; about 8 h at 1,024 GPUs), as the request quoted
it: the search found the paper, not the figures. Scaled by GPU count, 1,024 GPUs would fail every 28.8 h, not every 8 h: the 1,024-GPU figure
says small jobs fail more often per GPU than this linear model, so the rate is the optimistic end. Llama 3's
own run failed 419 times in 54 days on 16,384 GPUs, once per 3.1 h.

The cause of each failure is drawn from Llama 3's Table 5 (The Llama 3 Herd of Models, arXiv 2407.21783:
419 unexpected interruptions in 54 days), weighted by its interruption counts as transcribed by
glennklockwood.com/garden/component-reliability and datacenterdynamics.com (148 faulty GPU, 72 GPU HBM3,
54 software bug, 35 network switch/cable, 32 host maintenance, 19 GPU SRAM, 17 GPU system processor, 7 NIC,
7 NCCL watchdog timeouts, 6 silent data corruption, 6 GPU thermal interface + sensor, 3 SSD, 3 power supply,
2 each server chassis, IO expansion board, dependency, CPU, system memory). The counts add up to 419; the
table's percentage column does not (30.1 % for 148 of 419; it adds up to 94.9 %), and the request's shares of
the small causes (SDC 1.6 %, SSD 1.5 %, power supply 1.4 %, ...) match neither: the counts are used.

What the campaign sees of a cause (``REPAIRS``): a GPU, HBM, SRAM, GSP, thermal or SDC cause is a GPU
replaced (a new serial in the host's identity: it voids the host's GPU phases), a switch or cable a cable
replaced, a NIC an HCA replaced (both void the fabric phases); software, NCCL timeouts, maintenance and
dependencies are repaired without a part, SSD, power supply, chassis, IO board, CPU and memory by a part the
identity does not record. Repairs take uniformly 2-4 days for a GPU (RMA or a spare from the vendor), 1-3
days for another host part, 1-2 days for a cable, an HCA or a repair without a part.

The campaign. Phases and their hours (``HOURS``): host checks 0.1, GPU stress 1, burn-in 24, fleet probes
0.25, per-NIC perftest 0.5: a batch run of every per-host phase takes 25.85 h. A cross-node collective is
proven only by the full-scale collective (``--full-scale-hours``, plus its host checks), which the plan
offers once 95 % of the hosts miss nothing else. Every step the plan gives starts at once (one ``campaign
next`` per allocation; ``--batch`` hosts a run). A host that fails is repaired when its run ends, marked
repaired (``campaign repaired``) and retested for what it misses. The operator's policy, which the tool
leaves to people: the full-scale collective starts as soon as the plan offers it until it has passed once,
afterwards only when no host is in repair or in a run (each late host would otherwise cost a 2,048-host
collective); a host that fails in a full-scale collective while no other host is outstanding is excluded
(``campaign exclude``: its repair and retest would hold the whole cluster's sign-off for days), and so is a
host at its ``--max-failures``-th failure.

Each trial's line: the sign-off day, runs, full-scale collectives started, failures, hosts excluded, late
swaps (hosts whose replaced part was first read by a run that did not retest the phases it voids, so another
run follows: a host repaired after failing only a full-scale collective goes next into a full-scale
collective, which finds its new GPU), the share of host-hours spent on phases a host had run before, and
the ledger's size.

The baseline is the repeated single pass: the whole acceptance (the same phases and the full-scale collective,
25.85 h + 2 h) on every host at once, rerun from scratch once every failed host is repaired, until one pass
has no failure anywhere. Its chance is exp(-pass hours / cluster MTBF).

Scale. The status (``campaign status``: load, standing, status lines), the planning of ``campaign next``
and the certificate (certificate.json, then certificate.html and .pdf, in a fresh interpreter whose own peak
RSS, VmHWM, is read as it ends; the whole of ``diagnose campaign certificate``) are timed on the first
trial's ledger and on a ledger of 16,384 hosts built through ``record_run`` from a few runs (four batches of
4,096, the full-scale collective, a retest). The planning is the slowest seen: in the simulation, at any
step; at 16,384 hosts, once every host waits for the full-scale collective.

    python bench/campaign.py [--gpus 16384 --gpus-per-host 8 --days 14 --seed 1 --trials 3]

Targets at 16,384 hosts: status below 2 s; the certificate within 30 s and 1 GiB.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import math
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from unittest.mock import patch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from diagnose.campaign import ledger, marks  # noqa: E402
from diagnose.campaign import phases as ph  # noqa: E402
from diagnose.campaign.plan import DEFAULT_MIN_FRACTION, Step, plan  # noqa: E402
from diagnose.campaign.standing import Standing, standing, status_lines  # noqa: E402
from diagnose.history.storage import create_db, open_db  # noqa: E402

STATUS_TARGET_S = 2.0
CERT_TARGET_S = 30.0
CERT_TARGET_MIB = 1024.0
SCALE_HOSTS = 16384
SCALE_BATCH = 4096
NAME = "sim"
START = datetime(2026, 1, 5, 8, 0, tzinfo=timezone.utc)
NEEDS = ph.Needs((ph.HOST, ph.STRESS, ph.BURNIN, ph.FLEET, ph.PERFTEST, ph.COLLECTIVE), (ph.FULL_SCALE,))
#: Hours of each per-host phase; the collective's are --full-scale-hours.
HOURS = {ph.HOST: 0.1, ph.STRESS: 1.0, ph.BURNIN: 24.0, ph.FLEET: 0.25, ph.PERFTEST: 0.5}
#: The row a phase passes or fails by (the host checks: by the part, REPAIRS); a failed row's kind of part
#: voids that part's other phases (diagnose.campaign.phases.failure_kind).
PHASE_CHECK = {
    ph.STRESS: "gpu.gemm",
    ph.BURNIN: "gpu.burnin",
    ph.FLEET: "fleet.busbw",
    ph.PERFTEST: "ib.write_bw",
    ph.COLLECTIVE: "bench.all_reduce",
}
BUSES = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")
FULL = "full scale"


@dataclass(frozen=True)
class Repair:
    """What a campaign sees of a cause: the part replaced (a key of the identity, or none), how long."""

    words: str
    part: str | None  # "gpus", "hcas", "cables": a new serial there; None: the identity shows nothing
    host_check: str  # the host checks' row that fails
    action: str
    days: tuple[float, float]


REPAIRS = {
    "gpu": Repair("GPU replaced", "gpus", "gpu.ecc", "rma_gpu", (2.0, 4.0)),
    "cable": Repair("cable replaced", "cables", "ib.port_state", "reseat_or_replace_cable", (1.0, 2.0)),
    "hca": Repair("HCA replaced", "hcas", "ib.port_state", "replace_hca", (1.0, 2.0)),
    "host": Repair("host part replaced", None, "host.reachable", "contact_support", (1.0, 3.0)),
    "none": Repair("repaired without a part", None, "host.reachable", "reboot", (1.0, 2.0)),
}
#: Llama 3, Table 5: cause, unexpected interruptions in 54 days, which repair.
CAUSES = (
    ("faulty GPU", 148, "gpu"),
    ("GPU HBM3 memory", 72, "gpu"),
    ("software bug", 54, "none"),
    ("network switch/cable", 35, "cable"),
    ("host maintenance", 32, "none"),
    ("GPU SRAM memory", 19, "gpu"),
    ("GPU system processor", 17, "gpu"),
    ("NIC", 7, "hca"),
    ("NCCL watchdog timeouts", 7, "none"),
    ("silent data corruption", 6, "gpu"),
    ("GPU thermal interface + sensor", 6, "gpu"),
    ("SSD", 3, "host"),
    ("power supply", 3, "host"),
    ("server chassis", 2, "host"),
    ("IO expansion board", 2, "host"),
    ("dependency", 2, "none"),
    ("CPU", 2, "host"),
    ("system memory", 2, "host"),
)
WEIGHTS = [count for _, count, _ in CAUSES]


@dataclass(frozen=True)
class Model:
    hosts: int
    rate: float  # failures per host-hour under test
    full_scale_hours: float

    def segments(self, phases: tuple[str, ...]) -> list[tuple[str, float, float]]:
        """(phase, start, hours) of a run doing ``phases`` in order."""
        found, begin = [], 0.0
        for phase in phases:
            hours = self.full_scale_hours if phase == ph.COLLECTIVE else HOURS[phase]
            found.append((phase, begin, hours))
            begin += hours
        return found

    def pass_hours(self) -> float:
        return sum(HOURS.values()) + self.full_scale_hours


@dataclass(frozen=True)
class Failure:
    at: float  # hours into the run
    cause: str
    repair: str


@dataclass
class Host:
    name: str
    identity: dict[str, Any]
    failures: int = 0
    ran: set[str] = field(default_factory=set)  # phases run before: running one again is a retest


@dataclass
class Run:
    id: str
    why: str
    hosts: tuple[str, ...]
    phases: tuple[str, ...]
    start: float
    end: float
    failures: dict[str, Failure]


def stamp(hours: float) -> str:
    return (START + timedelta(hours=hours)).isoformat(timespec="seconds")


def identity(rng: random.Random) -> dict[str, Any]:
    """A host of 8 GPUs, 8 HCA ports and 8 cables, with firmware, as the host stage records one."""
    ports = [f"mlx5_{i}/1" for i in range(8)]
    firmware = {f"HCA mlx5_{i}": "28.39.1002" for i in range(8)}
    firmware |= {f"VBIOS 00000000:{bus}:00.0": "96.00.74.00.01" for bus in BUSES}
    firmware |= {f"transceiver {port}": "47.140" for port in ports}
    return {
        "gpus": {f"00000000:{bus}:00.0": f"1654{rng.randrange(10**9):09d}" for bus in BUSES},
        "hcas": {port: f"0x{rng.getrandbits(64):016x}" for port in ports},
        "cables": {port: f"MT2251XZ{rng.randrange(10**7):07d}" for port in ports},
        "firmware": firmware,
        "driver": "580.159.04",
        "nccl": "2.28.9",
    }


def new_cluster(count: int, rng: random.Random) -> dict[str, Host]:
    names = [f"gpu-r{1 + i // 32:03d}n{1 + i % 32:02d}" for i in range(count)]
    return {name: Host(name, identity(rng)) for name in names}


def draw(rng: random.Random, model: Model, hours: float) -> Failure | None:
    """The failure of one host in a run of ``hours``, if one strikes before it ends."""
    at = rng.expovariate(model.rate)
    if at >= hours:
        return None
    cause, _, repair = rng.choices(CAUSES, weights=WEIGHTS)[0]
    return Failure(at, cause, repair)


def new_run(
    run_id: str,
    why: str,
    hosts: tuple[str, ...],
    phases: tuple[str, ...],
    start: float,
    model: Model,
    rng: random.Random,
) -> Run:
    hours = sum(h for _, _, h in model.segments(phases))
    failures = {h: f for h in hosts if (f := draw(rng, model, hours)) is not None}
    return Run(run_id, why, hosts, phases, start, start + hours, failures)


def check_id(phase: str, failure: Failure | None) -> str:
    """The row a phase passes or fails by: the host checks fail by the failing part's row."""
    if phase == ph.HOST:
        return REPAIRS[failure.repair].host_check if failure else "host.reachable"
    return PHASE_CHECK[phase]


def document(run: Run, model: Model, cluster: dict[str, Host]) -> dict[str, Any]:
    """The run's results as small as the ledger reads them: per host a row a phase until its failure, the
    burn-in minutes per GPU, the collective with the hosts that failed in it, a cause per failure."""
    checks: list[dict[str, Any]] = []
    stress: list[dict[str, Any]] = []
    causes: list[dict[str, Any]] = []
    in_bench: list[str] = []
    failed_bench: list[str] = []
    for name in run.hosts:
        failure = run.failures.get(name)
        for phase, begin, hours in model.segments(run.phases):
            failed = failure if failure is not None and failure.at < begin + hours else None
            if phase == ph.COLLECTIVE:
                in_bench.append(name)
                failed_bench += [name] if failed else []
            else:
                row = {"id": check_id(phase, failed), "host": name, "status": "FAIL" if failed else "PASS"}
                words = {"message": failed.cause, "action": REPAIRS[failed.repair].action} if failed else {}
                checks.append(row | words)
            if phase == ph.BURNIN and not failed:
                stress += [
                    {
                        "host": name,
                        "bus_id": bus,
                        "check": "gpu.burnin",
                        "minutes": hours * 60,
                        "verdict": "PASS",
                    }
                    for bus in cluster[name].identity["gpus"]
                ]
            if failed:
                action = REPAIRS[failed.repair].action
                named = {
                    "check": check_id(phase, failed),
                    "hosts": [name],
                    "message": f"{name}: {failed.cause}",
                }
                causes.append({"status": "FAIL", **named, "action": action})
                break
    benchmarks = []
    if in_bench:
        benchmarks.append(
            {
                "collective": "all_reduce",
                "hosts": in_bench,
                "nodes": len(in_bench),
                "status": "FAIL" if failed_bench else "PASS",
                "failed_hosts": failed_bench,
                "message": f"{len(failed_bench)} hosts failed" if failed_bench else "within the normal range",
                "rows": [{"bytes": 8 << 30, "busbw_gbps": 360.0}],
            }
        )
    return {
        "run": {
            "id": run.id,
            "started": stamp(run.start),
            "playbook": "acceptance",
            "inventory": "simulated",
        },
        "hosts": [{"name": n, "reachable": True, "identity": cluster[n].identity} for n in run.hosts],
        "checks": checks,
        "stress": stress,
        "benchmarks": benchmarks,
        "causes": causes,
        "verdict": "FAIL" if run.failures else "PASS",
    }


def replace_part(host: Host, repair: Repair, rng: random.Random) -> None:
    """A repair with a part gives one slot of the host's identity a new serial."""
    if repair.part is None:
        return
    slots = host.identity[repair.part]
    slot = rng.choice(sorted(slots))
    slots[slot] = f"{slots[slot][:-6]}{rng.randrange(10**6):06d}"


@contextmanager
def simulated_now(clock: Campaign) -> Iterator[None]:
    """The ledger stamps marks (repaired, excluded) with the wall clock; here they must carry the simulated
    time, or a repair would seem to come after every later failure."""
    with patch.object(ledger, "now_iso", clock.iso), patch.object(marks, "now_iso", clock.iso):
        yield


@dataclass
class Trial:
    """What one simulated campaign (or series of passes) came to."""

    signoff: float | None  # hours, None: not within the days
    runs: int
    host_hours: float
    retest_hours: float
    failures: int
    excluded: int = 0
    full_scale: int = 0  # full-scale collectives started
    late_swaps: int = 0  # parts replaced that the retest planned for did not retest: it takes another one
    ledger_bytes: int = 0
    slowest_next: tuple[float, float] = (0.0, 0.0)  # wall, CPU s of the slowest load, standing and plan


class Campaign:
    """One trial: the simulated cluster and operator around a real ledger in ``db``."""

    def __init__(self, args: argparse.Namespace, model: Model, rng: random.Random, db: Path) -> None:
        self.args, self.model, self.rng, self.db = args, model, rng, db
        self.cluster = new_cluster(model.hosts, rng)
        self.deadline = args.days * 24.0
        self.now = 0.0
        self.events: list[tuple[float, int, Run | str]] = []
        self.order = itertools.count()  # events at the same hour, first pushed first
        self.numbers = itertools.count()  # of runs, for their ids
        self.running: list[Run] = []
        self.in_repair: dict[str, Failure] = {}
        self.full_passed = False
        self.swapped: set[str] = set()
        self.trial = Trial(None, 0, 0.0, 0.0, 0)

    def iso(self) -> str:
        return stamp(self.now)

    def simulate(self) -> Trial:
        with simulated_now(self):
            create_db(self.db)
            with open_db(self.db) as conn, conn:
                ledger.ensure_campaign(conn, NAME, NEEDS, "acceptance", "simulated")
            marks.add_hosts(self.db, NAME, list(self.cluster))
            self.launch(self.decide()[1])
            while self.events and self.events[0][0] <= self.deadline:
                self.now = self.events[0][0]
                while self.events and self.events[0][0] == self.now:
                    _, _, item = heapq.heappop(self.events)
                    if isinstance(item, Run):
                        self.finish(item)
                    else:
                        self.repaired(item)
                state, steps = self.decide()
                self.count_late_swaps(state)
                if state.verdict == "ACCEPTED":
                    self.trial.signoff = self.now
                    break
                self.launch(steps)
        self.trial.ledger_bytes = self.db.stat().st_size
        return self.trial

    def push(self, at: float, item: Run | str) -> None:
        heapq.heappush(self.events, (at, next(self.order), item))

    def outstanding(self) -> set[str]:
        return set(self.in_repair) | {h for r in self.running for h in r.hosts}

    def decide(self) -> tuple[Standing, list[Step]]:
        """Where the campaign stands and what ``campaign next`` would run, timed: the slowest is reported."""
        decided: list[tuple[Standing, list[Step]]] = []

        def work() -> None:
            state = standing(ledger.load(self.db, NAME))
            decided.append((state, plan(state, self.args.batch, self.args.min_fraction, self.outstanding())))

        self.trial.slowest_next = max(self.trial.slowest_next, clocked(work))
        return decided[0]

    def launch(self, steps: list[Step]) -> None:
        """Start every step the plan gives, the full-scale collective under the operator's policy."""
        busy = self.outstanding()
        for step in steps:
            if step.why == FULL and (any(r.why == FULL for r in self.running) or (self.full_passed and busy)):
                continue
            run_id = f"{START + timedelta(hours=self.now):%Y%m%dT%H%M%SZ}-{next(self.numbers):04x}"
            run = new_run(run_id, step.why, step.hosts, step.phases, self.now, self.model, self.rng)
            self.trial.full_scale += step.why == FULL
            self.running.append(run)
            self.push(run.end, run)
            busy |= set(step.hosts)

    def finish(self, run: Run) -> None:
        """Record the run, account its host-hours, send its failed hosts to repair or leave them out."""
        self.running.remove(run)
        results = document(run, self.model, self.cluster)
        recorded = ledger.record_run(self.db, NAME, results, NEEDS)
        self.trial.runs += 1
        self.swapped |= {e.host for e in recorded.events if e.kind == "replaced" and e.host}
        self.full_passed |= any(b["status"] == "PASS" for b in results["benchmarks"])
        segments = self.model.segments(run.phases)
        for name in run.hosts:
            host, failure = self.cluster[name], run.failures.get(name)
            for phase, begin, hours in segments:
                spent = hours if failure is None else min(hours, failure.at - begin)
                if spent <= 0:
                    break
                self.trial.host_hours += spent
                self.trial.retest_hours += spent if phase in host.ran else 0.0
                host.ran.add(phase)
        alone = not self.outstanding()
        for name, failure in run.failures.items():
            host = self.cluster[name]
            host.failures += 1
            self.trial.failures += 1
            if run.why == FULL and alone:
                reason = f"{failure.cause} in the full-scale collective, nothing else outstanding; joins after repair"
            elif host.failures >= self.args.max_failures:
                reason = f"failed {host.failures} times, last: {failure.cause}"
            else:
                self.in_repair[name] = failure
                days = self.rng.uniform(*REPAIRS[failure.repair].days)
                self.push(self.now + 24.0 * days, name)
                continue
            marks.exclude(self.db, NAME, name, reason, "bench")
            self.trial.excluded += 1

    def repaired(self, name: str) -> None:
        failure = self.in_repair.pop(name)
        repair = REPAIRS[failure.repair]
        replace_part(self.cluster[name], repair, self.rng)
        marks.repaired(self.db, NAME, name, f"{repair.words} after {failure.cause}", "bench")

    def count_late_swaps(self, state: Standing) -> None:
        """A replaced part that voids phases the run finding it did not do: another retest run follows."""
        for host in state.hosts:
            if host.host in self.swapped and any(p != ph.COLLECTIVE for p in host.missing):
                self.trial.late_swaps += 1
        self.swapped.clear()


def single_pass(model: Model, rng: random.Random, days: float) -> Trial:
    """The whole acceptance on every host at once, again from scratch once every failed host is back."""
    hours = model.pass_hours()
    trial = Trial(None, 0, 0.0, 0.0, 0)
    now = 0.0
    while now + hours <= days * 24.0:
        trial.runs += 1
        failed = [f for _ in range(model.hosts) if (f := draw(rng, model, hours)) is not None]
        spent = (model.hosts - len(failed)) * hours + sum(f.at for f in failed)
        trial.host_hours += spent
        trial.retest_hours += spent if trial.runs > 1 else 0.0
        trial.failures += len(failed)
        now += hours
        if not failed:
            trial.signoff = now
            return trial
        now += 24.0 * max(rng.uniform(*REPAIRS[f.repair].days) for f in failed)
    return trial


def scale_ledger(
    db: Path, model: Model, rng: random.Random
) -> tuple[list[tuple[str, float]], tuple[float, float]]:
    """A ledger of ``model.hosts`` hosts through record_run: batches of every per-host phase, the
    full-scale collective over the hosts that passed, the failed ones retested after their repair.

    Returns each run with the seconds recording it took, and the planning of ``campaign next`` (load,
    standing, plan: wall and CPU s) once the batches are in: every host waits for the full-scale collective,
    the plan's largest.
    """
    cluster = new_cluster(model.hosts, rng)
    names = tuple(cluster)
    phases = (ph.HOST, ph.STRESS, ph.BURNIN, ph.FLEET, ph.PERFTEST)
    timings = []

    def record(run: Run) -> None:
        start = time.perf_counter()
        ledger.record_run(db, NAME, document(run, model, cluster), NEEDS)
        timings.append((f"{run.why} of {len(run.hosts):,} hosts", time.perf_counter() - start))

    failed: dict[str, Failure] = {}
    for i in range(0, len(names), SCALE_BATCH):
        batch = new_run(
            f"scale-{i // SCALE_BATCH}", "batch", names[i : i + SCALE_BATCH], phases, 0.0, model, rng
        )
        record(batch)
        failed |= batch.failures
    planning = clocked(lambda: plan(standing(ledger.load(db, NAME)), SCALE_BATCH))
    passed = tuple(h for h in names if h not in failed)
    record(new_run("scale-full", FULL, passed, (ph.HOST, ph.COLLECTIVE), 26.0, model, rng))
    for name, failure in failed.items():
        replace_part(cluster[name], REPAIRS[failure.repair], rng)
    record(Run("scale-retest", "retest", tuple(failed), phases, 96.0, 96.0 + sum(HOURS.values()), {}))
    return timings, planning


#: certificate.json as ``diagnose campaign certificate`` builds it; "render": the command itself, HTML and PDF.
CERTIFICATE = """
import json, sys
from pathlib import Path
db, name, out = sys.argv[1:4]
if sys.argv[4] == "render":
    from diagnose.commands.campaign import certificate_lines
    certificate_lines(db, name, out, "bench")
else:
    from diagnose.campaign import ledger
    from diagnose.campaign.certificate import build
    from diagnose.campaign.standing import standing
    book = ledger.load(db, name, full=True)
    cert = build(book, standing(book), "2026-01-20T08:00:00+00:00", "bench")
    (Path(out) / "certificate.json").write_text(json.dumps(cert, indent=1, ensure_ascii=False, default=str) + "\\n")
print(next(l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM:")))
"""


def certificate(db: Path, out: Path, render: bool) -> tuple[float, float, float]:
    """Issue the certificate in a fresh interpreter: (wall s, CPU s, peak RSS MiB) of that child.

    The peak is the child's own VmHWM: ``wait4``'s ru_maxrss of a child starts from its parent's resident
    size at the fork, and this parent holds a simulated cluster.
    """
    out.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-c", CERTIFICATE, str(db), NAME, str(out), "render" if render else "json"]
    start, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    child = subprocess.run(argv, stdout=subprocess.PIPE, text=True, check=False, cwd=ROOT)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if child.returncode != 0:
        raise SystemExit(f"certificate of {db} failed with {child.returncode}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return seconds, cpu, int(child.stdout.split()[-1]) / 1024.0


def clocked(work: Callable[[], object]) -> tuple[float, float]:
    """(wall s, CPU s) of one call of ``work``."""
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    return time.perf_counter() - wall, time.process_time() - cpu


def timed(work: Callable[[], object]) -> tuple[float, float]:
    """Median (wall s, CPU s) of three calls of ``work``."""
    samples = [clocked(work) for _ in range(3)]
    return statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples)


@dataclass(frozen=True)
class Measured:
    """Status, planning and certificate of one ledger: (wall s, CPU s) and (wall s, CPU s, peak MiB)."""

    hosts: int
    ledger_bytes: int
    status: tuple[float, float]
    planning: tuple[float, float]
    json_only: tuple[float, float, float]
    rendered: tuple[float, float, float]

    def rows(self) -> dict[str, str]:
        def child(t: tuple[float, float, float]) -> str:
            return f"{t[0]:.1f} s (CPU {t[1]:.1f}), {t[2]:.0f} MiB"

        return {
            "hosts": f"{self.hosts:,}",
            "ledger size": f"{self.ledger_bytes / 1e6:.1f} MB ({self.ledger_bytes / self.hosts / 1e3:.1f} kB a host)",
            "status (load, standing, lines)": f"{self.status[0]:.2f} s (CPU {self.status[1]:.2f})",
            "next: slowest planning": f"{self.planning[0]:.2f} s (CPU {self.planning[1]:.2f})",
            "certificate.json": child(self.json_only),
            "certificate.json + html + pdf": child(self.rendered),
        }

    def meets_targets(self) -> bool:
        """Judged on CPU time: the machine may be shared."""
        return (
            self.status[1] < STATUS_TARGET_S
            and self.rendered[1] <= CERT_TARGET_S
            and max(self.json_only[2], self.rendered[2]) <= CERT_TARGET_MIB
        )


def measure(db: Path, out: Path, planning: tuple[float, float]) -> Measured:
    """``planning``: the slowest ``campaign next`` planning seen while the ledger was written."""
    return Measured(
        hosts=len(ledger.load(db, NAME).hosts),
        ledger_bytes=db.stat().st_size,
        status=timed(lambda: status_lines(standing(ledger.load(db, NAME)))),
        planning=planning,
        json_only=certificate(db, out / "json", render=False),
        rendered=certificate(db, out / "render", render=True),
    )


def days(hours: float | None, limit: float) -> str:
    return f"{hours / 24:.1f}" if hours is not None else f"not within {limit:g}"


def print_model(model: Model, args: argparse.Namespace) -> None:
    total = sum(WEIGHTS)
    print(
        f"1. Failure model: {args.gpus:,} GPUs = {model.hosts:,} hosts of {args.gpus_per_host}; cluster MTBF "
        f"{args.mtbf_hours:g} h at {args.mtbf_gpus:,} GPUs -> one failure per {1 / model.rate:,.0f} host-hours "
        f"under test, {model.rate * model.hosts * 24:.1f} a day with every host under test\n"
    )
    print(f"{'cause (Llama 3, Table 5)':<32} {'count':>5} {'share':>6}   {'campaign sees':<26} repair days")
    for cause, count, kind in CAUSES:
        repair = REPAIRS[kind]
        low, high = repair.days
        print(f"{cause:<32} {count:>5} {100 * count / total:>5.1f}%   {repair.words:<26} {low:g}-{high:g}")
    print()


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--gpus", type=int, default=16384)
    parser.add_argument(
        "--gpus-per-host", type=int, default=8, help="for the failure rate; identities hold 8"
    )
    parser.add_argument("--days", type=float, default=14.0, help="the sign-off deadline")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--trials", type=int, default=3, help="seeds simulated (seed, seed+1, ...)")
    parser.add_argument("--batch", type=int, default=256, help="hosts a run (campaign_batch)")
    parser.add_argument("--min-fraction", type=float, default=DEFAULT_MIN_FRACTION)
    parser.add_argument("--full-scale-hours", type=float, default=2.0)
    parser.add_argument("--max-failures", type=int, default=3, help="a host's failures before it is left out")
    parser.add_argument("--mtbf-hours", type=float, default=1.8)
    parser.add_argument("--mtbf-gpus", type=int, default=16384)
    parser.add_argument("--scale-hosts", type=int, default=SCALE_HOSTS, help="0: skip the 16,384-host ledger")
    return parser.parse_args(argv)


def run_campaigns(args: argparse.Namespace, model: Model, work: Path) -> list[Trial]:
    print(
        f"2. Campaign: runs of at most {args.batch} hosts, {sum(HOURS.values()):g} h for every per-host phase "
        f"(host checks, GPU stress, burn-in, fleet, perftest); the full-scale collective "
        f"{args.full_scale_hours:g} h once {args.min_fraction:.0%} wait for it only; deadline {args.days:g} days\n"
    )
    print(
        f"{'seed':>4} {'sign-off day':>12} {'runs':>5} {'full-scale':>10} {'failures':>8} {'excluded':>8} "
        f"{'late swaps':>10} {'retest share':>12} {'ledger':>9} {'wall s':>7}"
    )
    trials = []
    for seed in range(args.seed, args.seed + args.trials):
        start = time.perf_counter()
        trial = Campaign(args, model, random.Random(seed), work / f"trial-{seed}.db").simulate()
        trials.append(trial)
        print(
            f"{seed:>4} {days(trial.signoff, args.days):>12} {trial.runs:>5} {trial.full_scale:>10} "
            f"{trial.failures:>8} {trial.excluded:>8} {trial.late_swaps:>10} "
            f"{trial.retest_hours / trial.host_hours:>12.1%} {trial.ledger_bytes / 1e6:>7.1f}MB "
            f"{time.perf_counter() - start:>7.1f}"
        )
    return trials


def run_passes(args: argparse.Namespace, model: Model) -> list[Trial]:
    print(
        f"\n3. Single pass: every host, {model.pass_hours():g} h a pass, again once every failed host is "
        f"repaired; a pass has no failure with probability {pass_chance(model):.2g}\n"
    )
    print(f"{'seed':>4} {'sign-off day':>12} {'passes':>6} {'failures':>8} {'retest share':>12}")
    trials = []
    for seed in range(args.seed, args.seed + args.trials):
        trial = single_pass(model, random.Random(seed * 7919), args.days)
        trials.append(trial)
        share = trial.retest_hours / trial.host_hours
        print(
            f"{seed:>4} {days(trial.signoff, args.days):>12} {trial.runs:>6} {trial.failures:>8} {share:>12.1%}"
        )
    return trials


def pass_chance(model: Model) -> float:
    return math.exp(-model.rate * model.hosts * model.pass_hours())


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    rate = args.gpus_per_host / (args.mtbf_hours * args.mtbf_gpus)
    model = Model(args.gpus // args.gpus_per_host, rate, args.full_scale_hours)
    print_model(model, args)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        campaigns = run_campaigns(args, model, work)
        passes = run_passes(args, model)
        print(f"\n4. Summary over {args.trials} seeds (median, min-max)\n")
        print_summary(campaigns, passes, args.days, pass_chance(model))
        first = work / f"trial-{args.seed}.db"
        scale = {
            f"{model.hosts:,} hosts (seed {args.seed})": measure(
                first, work / "c1", campaigns[0].slowest_next
            )
        }
        if args.scale_hosts:
            big = Model(args.scale_hosts, rate, args.full_scale_hours)
            timings, planning = scale_ledger(work / "scale.db", big, random.Random(args.seed))
            recorded = ", ".join(f"{what} {seconds:.1f} s" for what, seconds in timings)
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # kB on Linux
            print(
                f"\n{args.scale_hosts:,}-host ledger, record_run: {recorded}; this process's peak RSS {peak:.1f} GiB"
            )
            scale[f"{args.scale_hosts:,} hosts (built)"] = measure(work / "scale.db", work / "c2", planning)
    return print_scale(scale, args.scale_hosts)


def spread(values: list[float], fmt: str) -> str:
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


def print_summary(campaigns: list[Trial], passes: list[Trial], limit: float, success: float) -> None:
    def signoff(trials: list[Trial]) -> str:
        done = [t.signoff / 24 for t in trials if t.signoff is not None]
        if len(done) < len(trials):
            return f"not within {limit:g} days in {len(trials) - len(done)} of {len(trials)}"
        return spread(done, ".1f")

    rows = [
        ("days to sign-off", signoff(campaigns), f"{signoff(passes)} (P pass = {success:.2g})"),
        ("runs", spread([t.runs for t in campaigns], ".0f"), spread([t.runs for t in passes], ".0f")),
        (
            "host-hours",
            spread([t.host_hours for t in campaigns], ",.0f"),
            spread([t.host_hours for t in passes], ",.0f"),
        ),
        (
            "retest share of host-hours",
            spread([100 * t.retest_hours / t.host_hours for t in campaigns], ".1f") + " %",
            spread([100 * t.retest_hours / t.host_hours for t in passes], ".1f") + " %",
        ),
        (
            "failures",
            spread([t.failures for t in campaigns], ".0f"),
            spread([t.failures for t in passes], ".0f"),
        ),
        ("hosts excluded", spread([t.excluded for t in campaigns], ".0f"), "0"),
    ]
    print(f"{'':<28} {'campaign':<28} single pass")
    for label, campaign, single in rows:
        print(f"{label:<28} {campaign:<28} {single}")


def print_scale(scale: dict[str, Measured], scale_hosts: int) -> int:
    columns = {name: m.rows() for name, m in scale.items()}
    targets = {
        "status (load, standing, lines)": f"< {STATUS_TARGET_S:g} s",
        "certificate.json + html + pdf": f"<= {CERT_TARGET_S:g} s, <= {CERT_TARGET_MIB:g} MiB",
    }
    print(f"\n{'ledger':<38} " + " ".join(f"{c:<34}" for c in columns) + " target at 16,384 hosts")
    for row in next(iter(columns.values())):
        print(
            f"{row:<38} " + " ".join(f"{c[row]:<34}" for c in columns.values()) + " " + targets.get(row, "")
        )
    if not scale_hosts:
        return 0
    ok = list(scale.values())[-1].meets_targets()
    print(
        f"\ntargets at {scale_hosts:,} hosts, judged on CPU time (the machine is shared): {'PASS' if ok else 'FAIL'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
