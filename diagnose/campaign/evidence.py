"""What one run is evidence of, read from its results document alone. Pure.

Per host and phase, a verdict with the words that explain it: the worst of the phase's rows on that host.
Rows about the whole run (a fleet or KV row with no host) count for every host the run measured, except a
failure, which counts only against the hosts its cause names. A collective counts for a host it ran on; a
failed one only against the hosts the straggler search or a cause named. A failure nobody is named for is
evidence against no host, nor for any: those hosts stay pending. The causes are grouped by today's code
(diagnose.render.causes), not read from the run's record. Beside the verdicts: the hosts' identities (results.json ``hosts[].identity``), the parts the
watch list named, the cluster's collectives and training probe, the burn-in GPU-hours per GPU, and the figures
a campaign may keep as the cluster's reference.

An interrupted run is evidence of its failures only: what it passed may be half a phase.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from diagnose.benchmarks.expect import large_message_busbw
from diagnose.campaign import phases as ph
from diagnose.catalog.stage_ids import BENCH_LINK, BENCH_STRAGGLER, GPU_BURNIN, HISTORY_WATCH
from diagnose.core.model import SEVERITY
from diagnose.render.causes import causes_json

_FAILED = ("FAIL", "ERROR")


@dataclass(frozen=True)
class Evidence:
    """One host's result in one phase of one run."""

    host: str
    phase: str
    verdict: str  # PASS, WARN, SKIP, FAIL, ERROR
    check: str | None  # the row that decided it
    message: str
    action: str | None = None
    nodes: int | None = None  # collective: the most nodes the host passed one on

    @property
    def passed(self) -> bool:
        return self.verdict in ("PASS", "WARN", "SKIP")

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "check": self.check,
            "message": self.message,
            "action": self.action,
            "nodes": self.nodes,
        }


@dataclass(frozen=True)
class ClusterRun:
    """A cluster phase measured by the run: a collective across ``hosts``, or the training probe."""

    phase: str
    verdict: str
    hosts: tuple[str, ...]
    detail: str


@dataclass
class RunEvidence:
    run_id: str
    started: str
    verdict: str
    interrupted: bool
    hosts: tuple[str, ...]
    evidence: dict[str, dict[str, Evidence]] = field(default_factory=dict)  # host -> phase -> evidence
    identities: dict[str, dict[str, Any]] = field(default_factory=dict)
    watched: dict[str, list[str]] = field(default_factory=dict)  # host -> components the watch list named
    cluster: list[ClusterRun] = field(default_factory=list)
    burnin_hours: dict[str, dict[str, float]] = field(default_factory=dict)  # host -> bus id -> GPU-hours
    figures: dict[str, list[tuple[str, float]]] = field(
        default_factory=dict
    )  # reference key -> (host, value)


def _cause_hosts(
    causes: Iterable[Mapping[str, Any]], known: set[str]
) -> dict[tuple[str, str | None], set[str]]:
    """(check id, host or None) of a result -> the hosts the cause explaining it names."""
    named: dict[tuple[str, str | None], set[str]] = {}
    for cause in causes:
        hosts = {str(h) for h in cause.get("hosts") or []} & known
        if not hosts:
            continue
        named.setdefault((str(cause.get("check")), None), set()).update(hosts)
        for consequence in cause.get("consequences") or []:
            named.setdefault((str(consequence.get("id")), consequence.get("host")), set()).update(hosts)
    return named


def _cause_of(causes: Iterable[Mapping[str, Any]], host: str) -> tuple[str, str | None] | None:
    """The first (worst) failing cause that is ``host``'s alone: its line and action. A cause grouping one
    fault on several hosts words it for one of them; each host then keeps its own row's words."""
    for cause in causes:
        if cause.get("status") in _FAILED and list(cause.get("hosts") or []) == [host]:
            return str(cause.get("message") or ""), cause.get("action")
    return None


class _Phase:
    """The rows of one host in one phase, folded to the worst."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, str | None]] = []  # status, check id, message, action
        self.nodes: int | None = None
        self.unproven = False  # a failure of the phase that names no host: nobody passed it either
        self.benches: set[int] = set()  # collective: which of the run's benchmarks it passed

    def add(self, status: str, check: str, message: str, action: str | None) -> None:
        self.rows.append((status, check, message, action))

    def fold(self, host: str, phase: str) -> Evidence | None:
        if not self.rows or (self.unproven and not any(r[0] in _FAILED for r in self.rows)):
            return None
        judged = [r for r in self.rows if r[0] != "SKIP"] or self.rows
        status, check, message, action = max(judged, key=lambda r: SEVERITY.get(r[0], 0))
        return Evidence(host, phase, status, check, message, action, self.nodes)


def _measured_hosts(results: Mapping[str, Any]) -> list[str]:
    return [str(h["name"]) for h in results.get("hosts") or [] if h.get("reachable")]


def _collectives(
    results: Mapping[str, Any],
    named: Mapping[tuple[str, str | None], set[str]],
    into: dict[str, dict[str, _Phase]],
) -> list[ClusterRun]:
    """Each benchmark counts for its hosts: PASS for all, a failure against the stragglers the run named."""
    stragglers = {
        str(c["host"])
        for c in results.get("checks") or []
        if c.get("id") in (BENCH_STRAGGLER, BENCH_LINK) and c.get("host") and c.get("status") in _FAILED
    }
    runs = []
    for index, bench in enumerate(results.get("benchmarks") or []):
        hosts = [str(h) for h in bench.get("hosts") or []]
        nodes = int(bench.get("nodes") or len(hosts))
        status = str(bench.get("status") or "ERROR")
        collective = str(bench.get("collective"))
        busbw, _ = large_message_busbw(bench.get("rows") or [])
        figure = f", {busbw:g} GB/s busbw" if busbw is not None else ""
        runs.append(ClusterRun(ph.FULL_SCALE, status, tuple(hosts), f"{collective} on {nodes} nodes{figure}"))
        if nodes < 2:
            continue
        blamed = (
            set(bench.get("failed_hosts") or [])
            | stragglers
            | named.get((f"bench.{collective}", None), set())
        )
        for host in hosts:
            phase = into.setdefault(host, {}).setdefault(ph.COLLECTIVE, _Phase())
            if status in _FAILED and not blamed:
                phase.unproven = True  # a failure nobody was named for proves nothing about this host
                continue
            own = status if host in blamed or status not in _FAILED else "PASS"
            words = bench.get("message") or status
            if own != status:
                words = f"{status}, explained by {', '.join(sorted(blamed))}"
            phase.add(
                own, f"bench.{collective}", f"{collective} on {nodes} nodes: {words}", bench.get("action")
            )
            if own not in _FAILED:
                phase.nodes = max(phase.nodes or 0, nodes)
                phase.benches.add(index)
    return runs


def _training(results: Mapping[str, Any]) -> ClusterRun | None:
    rows = [c for c in results.get("checks") or [] if str(c.get("id", "")).startswith("train.")]
    if not rows:
        return None
    judged = [r for r in rows if r.get("status") != "SKIP"]
    if not judged:
        return ClusterRun(ph.TRAINING, "SKIP", (), str(rows[0].get("message") or "not measured"))
    worst = max(judged, key=lambda r: SEVERITY.get(str(r.get("status")), 0))
    ranks = {str(r.get("host")) for r in results.get("training") or [] if r.get("host")}
    hosts = tuple(sorted(ranks)) or tuple(_measured_hosts(results))
    return ClusterRun(
        ph.TRAINING, str(worst["status"]), hosts, f"{worst['id']}: {worst.get('message') or ''}"
    )


def _burnin(results: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    hours: dict[str, dict[str, float]] = {}
    for record in results.get("stress") or []:
        if record.get("check") != GPU_BURNIN or record.get("verdict") in (None, "SKIP", "ERROR"):
            continue
        minutes = record.get("minutes")
        if isinstance(minutes, int | float) and minutes > 0 and record.get("host"):
            gpu = str(record.get("bus_id") or record.get("gpu"))
            per_host = hours.setdefault(str(record["host"]), {})
            per_host[gpu] = per_host.get(gpu, 0.0) + float(minutes) / 60.0
    return hours


def _figures(results: Mapping[str, Any]) -> dict[str, list[tuple[str, float]]]:
    """Reference candidates: GEMM and HBM per GPU model and kind, busbw per collective and node count,
    perftest GB/s per NIC line rate; each a list of (source, value) from rows that passed. A collective
    nobody could judge (WARN: no fabric in the profile) counts: that is the figure the cluster lacks."""
    figures: dict[str, list[tuple[str, float]]] = {}
    for record in results.get("stress") or []:
        if record.get("check") in ("gpu.gemm", "gpu.hbm") and record.get("verdict") == "PASS":
            value = record.get("value")
            if isinstance(value, int | float) and record.get("name") and record.get("host"):
                key = f"{record['metric']}|{record['name']}"
                source = f"{record['host']} {record.get('bus_id') or record.get('gpu')}"
                figures.setdefault(key, []).append((source, float(value)))
    for bench in results.get("benchmarks") or []:
        busbw, _ = large_message_busbw(bench.get("rows") or [])
        if bench.get("status") in ("PASS", "WARN") and busbw is not None and not bench.get("shared_gpu"):
            key = f"busbw|{bench.get('collective')}|{int(bench.get('nodes') or 0)}"
            figures.setdefault(key, []).append((",".join(bench.get("hosts") or []), busbw))
    for record in results.get("fabric") or []:
        alone = (
            record.get("kind") == "reading"
            and record.get("tool") == "ib_write_bw"
            and record.get("mode") == "alone"
        )
        if alone and isinstance(record.get("gbps"), int | float) and record.get("line_rate_gbps"):
            key = f"perftest|{record['line_rate_gbps']:g}"
            source = f"{record.get('writer')} {record.get('writer_hca')}"
            figures.setdefault(key, []).append((source, float(record["gbps"])))
    return figures


def _healthy(
    figures: dict[str, list[tuple[str, float]]], evidence: Mapping[str, Mapping[str, Evidence]]
) -> dict[str, list[tuple[str, float]]]:
    """Only figures of hosts that failed nothing in the run: a reference measured beside a fault is not
    what the hardware can do (a collective counts when every host in it is clean)."""
    failed = {h for h, by_phase in evidence.items() if any(not e.passed for e in by_phase.values())}
    kept: dict[str, list[tuple[str, float]]] = {}
    for key, values in figures.items():
        clean = [
            (source, value) for source, value in values if not failed & set(source.split(" ")[0].split(","))
        ]
        if clean:
            kept[key] = clean
    return kept


def _without_passes_beside(
    failed: set[str],
    faulty: set[str],
    results: Mapping[str, Any],
    evidence: dict[str, dict[str, Evidence]],
    phases: Mapping[str, Mapping[str, _Phase]],
) -> dict[str, dict[str, Evidence]]:
    """A run in which a host failed proves nothing good about it (what it measured stood beside the fault);
    a host ``faulty`` outside the collective (a GPU shared, a port down) spoils the collectives it took part
    in for its partners too, while a straggler the search named leaves them theirs: the search measured
    them fast without it."""
    spoiled = {
        index
        for index, bench in enumerate(results.get("benchmarks") or [])
        if faulty.intersection(str(h) for h in bench.get("hosts") or [])
    }
    kept: dict[str, dict[str, Evidence]] = {}
    for host, by_phase in evidence.items():
        for phase, found in by_phase.items():
            if found.passed and host in failed:
                continue
            if found.passed and phase == ph.COLLECTIVE and phases[host][phase].benches & spoiled:
                continue
            kept.setdefault(host, {})[phase] = found
    return kept


def run_evidence(results: Mapping[str, Any]) -> RunEvidence:
    """Everything a campaign learns from one results document."""
    run = results.get("run") or {}
    interrupted = bool(run.get("interrupted")) or results.get("verdict") == "INCOMPLETE"
    causes = causes_json(dict(results))  # today's grouping, not the one recorded with the run
    named = _cause_hosts(causes, {str(h.get("name")) for h in results.get("hosts") or []})
    measured = _measured_hosts(results)
    all_hosts = [str(h["name"]) for h in results.get("hosts") or []]
    phases: dict[str, dict[str, _Phase]] = {}
    watched: dict[str, list[str]] = {}
    for row in results.get("checks") or []:
        check, host, status = str(row.get("id")), row.get("host"), str(row.get("status"))
        if check == HISTORY_WATCH and host and isinstance(row.get("observed"), dict):
            watched.setdefault(str(host), []).append(str(row["observed"].get("component")))
        phase = ph.phase_of(check)
        if phase is None or (phase == ph.COLLECTIVE and check.startswith("bench.") and host is None):
            continue
        if host:
            targets = [str(host)]
        elif status in _FAILED and named.get((check, None)):
            targets = sorted(named[(check, None)])
            explained = f"{check} {status}, explained by {', '.join(targets)}"
            for other in measured:  # the cause is the named hosts': the others measured as they should
                if other not in named[(check, None)]:
                    phases.setdefault(other, {}).setdefault(phase, _Phase()).add(
                        "PASS", check, explained, None
                    )
        elif status in _FAILED:  # nobody named: no host failed it, and none of them passed it
            for target in measured:
                phases.setdefault(target, {}).setdefault(phase, _Phase()).unproven = True
            continue
        else:
            targets = measured
        for target in targets:
            entry = phases.setdefault(target, {}).setdefault(phase, _Phase())
            entry.add(status, check, str(row.get("message") or ""), row.get("action"))
    cluster = _collectives(results, named, phases)
    training = _training(results)
    if training is not None:
        cluster.append(training)
    evidence: dict[str, dict[str, Evidence]] = {}
    for host, by_phase in phases.items():
        cause = _cause_of(causes, host)
        for phase, rows in by_phase.items():
            folded = rows.fold(host, phase)
            if folded is None:
                continue
            if folded.verdict in _FAILED and cause is not None:
                folded = Evidence(
                    host, phase, folded.verdict, folded.check, cause[0], cause[1] or folded.action
                )
            if interrupted and folded.passed:
                continue
            if phase == ph.COLLECTIVE and folded.passed and folded.nodes is None:
                continue  # a transport row alone, or a one-node sweep, proves no cross-node collective
            evidence.setdefault(host, {})[phase] = folded
    failed = {h for h, by_phase in evidence.items() if any(not e.passed for e in by_phase.values())}
    faulty = {h for h in failed if any(not e.passed and p != ph.COLLECTIVE for p, e in evidence[h].items())}
    evidence = _without_passes_beside(failed, faulty, results, evidence, phases)
    cluster = [c for c in cluster if c.verdict in _FAILED or not failed & set(c.hosts)]
    return RunEvidence(
        run_id=str(run.get("id")),
        started=str(run.get("started") or ""),
        verdict=str(results.get("verdict") or "ERROR"),
        interrupted=interrupted,
        hosts=tuple(all_hosts),
        evidence=evidence,
        identities={str(h["name"]): dict(h.get("identity") or {}) for h in results.get("hosts") or []},
        watched=watched,
        cluster=[] if interrupted else cluster,
        burnin_hours={} if interrupted else _burnin(results),
        figures={} if interrupted else _healthy(_figures(results), evidence),
    )
