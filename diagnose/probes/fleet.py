"""Fleet probes: the same figures measured on every host at once, each host judged against its peers.

An extra of the benchmark stage (``benchmarks.fleet_probes: true``, :mod:`diagnose.probes.registry`). On every
host at once, each in its own single-node launch: :mod:`diagnose.shipped.fleet_probe` (host memory copy; per
GPU host↔device copies from pinned memory, the PCIe path; per ordered GPU pair a peer copy, NVLink where
present), then :mod:`diagnose.shipped.collective_bench` on that host alone at the plan's largest size (the
single-node busbw; skipped with one rank per host, where a collective moves nothing). The stage takes as long
as the slowest host. A GPU metric is the host's weakest GPU (or pair): one bad link is what a job feels.
:mod:`diagnose.probes.fleet_judge` judges every metric within each *peer group* (hosts reporting the same
GPUs: an H100 is not an odd H200) and this module turns the verdicts into checks and records:

* ``fleet.busbw`` (checklist 3), ``fleet.h2d``, ``fleet.nvlink`` and ``fleet.memcpy`` (node health, H):
  one result per host that is odd (or below the floor while its fleet clears it), one ERROR per host the
  probe could not measure, and one cluster-wide line per check with the median, the MAD and the floor —
  FAIL when the fleet's median is below the floor (one finding, not one per host). A PASS with no floor and
  too few hosts to tell an odd one judged nothing: it is marked ``judged: false`` (shown, not counted PASS);
* results.json ``fleet``: per host and metric the value, the group's median and MAD, the robust z and the
  verdict, and per metric and group a summary entry (``host`` null).

With one host there is no fleet: its figures are recorded and every check is a SKIP saying so. Variables
(first host): ``fleet_mad_k`` and ``fleet_min_rel_dev_pct`` (:mod:`diagnose.probes.fleet_judge`); floors
``min_host_copy_gbps`` (h2d and d2h per GPU), ``min_peer_copy_gbps`` (per GPU pair) and, for busbw on NCCL,
the bottom of the single-node normal range (``nvlink_busbw_gbps`` × (1 − ``bench_tolerance``)).
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from diagnose.benchmarks.early_stop import probe_bytes
from diagnose.benchmarks.expect import expected_busbw
from diagnose.benchmarks.setup import Setup, startup_timeout_s
from diagnose.catalog.stage_ids import FLEET_BUSBW, FLEET_H2D, FLEET_MEMCPY, FLEET_NVLINK
from diagnose.config.host_settings import parse_bench_env
from diagnose.core.hosts import Host
from diagnose.core.model import SEVERITY, CheckResult, strongest, worst
from diagnose.core.units import human_bytes
from diagnose.core.vars import Vars
from diagnose.launchers.base import LaunchOutcome, LaunchSpec, launch_in_parallel
from diagnose.launchers.torchrun import launch
from diagnose.probes import fleet_judge as fleet
from diagnose.shipped import collective_bench, fleet_probe

#: Bytes per timed copy and timed copies per figure (each figure is their median).
COPY_BYTES = 256 << 20
COPY_REPS = 10
#: A copy row may take this long on top of moving its bytes at the floor rate before the probe counts as hung.
ROW_BASE_S = 30.0
COPY_FLOOR_GBPS = 0.2
#: Hosts probed at the same time (each holds one SSH poller while its launch runs).
MAX_PARALLEL_HOSTS = 256
SECTION = "fleet"


@dataclass(frozen=True)
class CheckSpec:
    """A fleet check: its id, checklist section, what it measures and what to do about an odd host."""

    id: str
    checklist: str
    title: str
    remediation: str


CHECKS = {
    FLEET_BUSBW: CheckSpec(
        FLEET_BUSBW,
        "3",
        "single-node busbw",
        "Compare this host with a peer: NVLink/NVSwitch state and errors (gpu.nvlink, gpu.fabricmanager), "
        "clocks and throttling (gpu.clocks), and its NCCL environment (nccl.env). A host slower than identical "
        "peers in its own node's collectives has a local fault.",
    ),
    FLEET_H2D: CheckSpec(
        FLEET_H2D,
        "H",
        "host↔device copy bandwidth",
        "Check the named GPU's PCIe link (gpu.pcie: width, and generation under load; `lspci -vv -s <bus id>` "
        "LnkSta against LnkCap), the BIOS PCIe/IOMMU settings and the PCIe switch or riser behind it.",
    ),
    FLEET_NVLINK: CheckSpec(
        FLEET_NVLINK,
        "H",
        "GPU peer copy bandwidth",
        "Check `nvidia-smi nvlink --status` and the NVLink error counters of the named pair (gpu.nvlink), the "
        "fabric manager (gpu.fabricmanager), and whether the pair has peer access at all (p2p in the record).",
    ),
    FLEET_MEMCPY: CheckSpec(
        FLEET_MEMCPY,
        "H",
        "host memory copy bandwidth",
        "Check the host's memory population (`dmidecode -t memory`: every channel filled alike), the CPU "
        "frequency governor and power capping, and processes competing for the CPUs.",
    ),
}
METRIC_CHECK = {"h2d": FLEET_H2D, "d2h": FLEET_H2D, "peer": FLEET_NVLINK, "memcpy": FLEET_MEMCPY}
SHORTFALL_REMEDIATION = (
    "The whole fleet falls short of the profile's floor: check that the profile matches this hardware "
    "(nvlink_busbw_gbps, min_host_copy_gbps, min_peer_copy_gbps) and the settings every host shares "
    "(BIOS, driver, NCCL environment) before chasing single hosts."
)


def check_of(metric: str) -> str:
    return FLEET_BUSBW if metric.startswith("busbw.") else METRIC_CHECK[metric]


def metric_order(metric: str) -> tuple[int, str]:
    """Metrics as the report lists them: collectives first, then the copies from PCIe to memory."""
    return (0, metric) if metric.startswith("busbw.") else (1 + list(METRIC_CHECK).index(metric), metric)


@dataclass
class HostFigures:
    """What one host's probes measured: a figure per metric (its weakest GPU or pair), the rows behind it,
    what it could not measure, and why a check could not be measured there at all."""

    host: str
    group: str = ""
    values: dict[str, float] = field(default_factory=dict)
    detail: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    not_measured: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    evidence: dict[str, str] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------------------
# From launch outcomes to figures (pure)


def group_label(start: Mapping[str, Any] | None) -> str:
    """The peer group a probe's ``start`` line puts its host in: the GPUs it reports, or a CPU host."""
    if not start:
        return ""
    gpus = list(start.get("gpus") or [])
    if not gpus:
        return "CPU host"
    counts = Counter(gpus)
    return " + ".join(f"{n}× {name}" for name, n in sorted(counts.items()))


def _where(metric: str, row: Mapping[str, Any]) -> str:
    if metric == "peer":
        return f"GPU {row.get('src')}→{row.get('dst')}"
    if metric in ("h2d", "d2h"):
        return f"GPU {row.get('gpu')}"
    return ""


def copy_figures(figures: HostFigures, outcome: LaunchOutcome) -> None:
    """Fill ``figures`` from the copy probe's outcome: every row kept, the weakest per metric as the value."""
    figures.group = group_label(outcome.start)
    if outcome.start:
        figures.not_measured.extend(outcome.start.get("not_measured") or [])
    for row in outcome.rows:
        metric = row.get("collective")
        if metric not in fleet_probe.METRICS or not isinstance(row.get("gbps"), int | float):
            continue
        keep = {k: row[k] for k in ("gpu", "name", "src", "dst", "p2p", "threads", "gbps") if k in row}
        keep["where"] = _where(metric, row)
        samples = row.get("samples_gbps") or []
        if len(samples) > 1:
            keep["spread_pct"] = round((max(samples) - min(samples)) / statistics.median(samples) * 100.0, 1)
        figures.detail.setdefault(metric, []).append(keep)
    for metric, rows in figures.detail.items():
        figures.values[metric] = min(float(r["gbps"]) for r in rows)
    evidence = outcome.evidence.get(f"{figures.host}:out.txt")
    if evidence:
        for check in (FLEET_H2D, FLEET_NVLINK, FLEET_MEMCPY):
            figures.evidence[check] = evidence
    if outcome.status != "done":
        why = outcome.message or f"the copy probe ended {outcome.status}"
        for check in (FLEET_H2D, FLEET_NVLINK, FLEET_MEMCPY):
            figures.errors.setdefault(check, f"copy probe: {why}")


def busbw_figures(figures: HostFigures, outcome: LaunchOutcome, collectives: Sequence[str]) -> None:
    """Fill ``figures`` from the single-node collective launch: busbw at the largest size per collective."""
    for collective in collectives:
        rows = [r for r in outcome.rows if r.get("collective") == collective and not r.get("wrong")]
        if rows:
            last = max(rows, key=lambda r: r["bytes"])
            figures.values[f"busbw.{collective}"] = float(last["busbw_gbps"])
            figures.detail[f"busbw.{collective}"] = [
                {"bytes": last["bytes"], "gbps": last["busbw_gbps"], "where": human_bytes(int(last["bytes"]))}
            ]
    evidence = outcome.evidence.get(f"{figures.host}:out.txt")
    if evidence:
        figures.evidence[FLEET_BUSBW] = evidence
    wrong = [r["collective"] for r in outcome.rows if r.get("wrong")]
    if wrong:
        figures.errors[FLEET_BUSBW] = f"wrong results in {', '.join(sorted(set(wrong)))} on this host alone"
    elif outcome.status != "done":
        figures.errors[FLEET_BUSBW] = outcome.message or f"the single-node launch ended {outcome.status}"


# ---------------------------------------------------------------------------------------------------------
# From figures to verdicts, checks and records (pure)


@dataclass(frozen=True)
class Settings:
    """Thresholds and floors, read once from the first host's variables."""

    thresholds: fleet.Thresholds
    floors: dict[str, float | None]


def settings_from(host_vars: Vars, setup: Setup, collectives: Sequence[str]) -> Settings:
    thresholds = fleet.Thresholds(
        mad_k=host_vars.float("fleet_mad_k", fleet.DEFAULT_MAD_K) or fleet.DEFAULT_MAD_K,
        min_rel_dev_pct=host_vars.float("fleet_min_rel_dev_pct", fleet.DEFAULT_MIN_REL_DEV_PCT) or 0.0,
    )
    host_copy = host_vars.float("min_host_copy_gbps")
    floors: dict[str, float | None] = {
        "h2d": host_copy,
        "d2h": host_copy,
        "peer": host_vars.float("min_peer_copy_gbps"),
        "memcpy": None,
    }
    for collective in collectives:
        low = None
        if setup.backend == "nccl":
            low = expected_busbw(collective, 1, setup.nproc, host_vars).low_gbps
        floors[f"busbw.{collective}"] = low
    return Settings(thresholds, floors)


def _metric_label(metric: str) -> str:
    if metric.startswith("busbw."):
        return f"{metric[len('busbw.') :]} single-node busbw"
    return {
        "h2d": "host→device copy",
        "d2h": "device→host copy",
        "peer": "peer copy",
        "memcpy": "memory copy",
    }[metric]


def unmeasured(item: HostFigures, check_id: str) -> list[str]:
    """What the host's probe said it could not measure for ``check_id`` ("peer: one GPU, no pair")."""
    said = []
    for note in item.not_measured:
        metrics = [m.strip() for m in note.partition(":")[0].split(",")]
        if any(m in METRIC_CHECK and METRIC_CHECK[m] == check_id for m in metrics):
            said.append(note)
    return said


def groups_of(figures: Sequence[HostFigures]) -> dict[str, list[HostFigures]]:
    """Hosts by peer group; a host whose probe said nothing joins the most common group."""
    named = Counter(f.group for f in figures if f.group)
    fallback = named.most_common(1)[0][0] if named else "hosts"
    grouped: dict[str, list[HostFigures]] = {}
    for item in figures:
        grouped.setdefault(item.group or fallback, []).append(item)
    return grouped


@dataclass
class Judgement:
    """Everything the probes conclude: checks to emit and records for results.json ``fleet``."""

    checks: list[CheckResult] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)


def _host_record(
    item: HostFigures, metric: str, group: str, verdict: fleet.FleetVerdict | None
) -> dict[str, Any]:
    value = item.values[metric]
    record: dict[str, Any] = {
        "host": item.host,
        "metric": metric,
        "check": check_of(metric),
        "group": group,
        "unit": "GB/s",
        "value": round(value, 3),
        "detail": item.detail.get(metric, []),
    }
    host = next((h for h in verdict.hosts if h.host == item.host), None) if verdict else None
    if verdict is None or host is None or verdict.median is None:
        record.update(
            dict.fromkeys(("median", "mad", "robust_z", "deviation_pct")), verdict="SKIP", why="no fleet"
        )
        return record
    record.update(
        {
            "median": round(verdict.median, 3),
            "mad": round(verdict.mad or 0.0, 3),
            "robust_z": host.robust_z,
            "deviation_pct": host.deviation_pct,
            "verdict": host.status,
            "why": host.why,
            "floor": verdict.floor,
            "fleet_hosts": len(verdict.hosts),
        }
    )
    return record


def _summary_record(group: str, verdict: fleet.FleetVerdict) -> dict[str, Any]:
    return {
        "host": None,
        "metric": verdict.metric,
        "check": check_of(verdict.metric),
        "group": group,
        "unit": verdict.unit,
        "hosts": len(verdict.hosts),
        "median": None if verdict.median is None else round(verdict.median, 3),
        "mad": None if verdict.mad is None else round(verdict.mad, 3),
        "floor": verdict.floor,
        "shortfall": verdict.shortfall,
        "weak": verdict.weak,
        "verdict": verdict.status,
        "message": verdict.message,
        "mad_k": verdict.thresholds.mad_k,
        "min_rel_dev_pct": verdict.thresholds.min_rel_dev_pct,
    }


def _host_line(item: HostFigures, metric: str, host: fleet.HostVerdict, verdict: fleet.FleetVerdict) -> str:
    rows = item.detail.get(metric, [])
    weakest = min(rows, key=lambda r: r["gbps"]) if rows else {}
    where = f" ({weakest['where']}, the host's slowest of {len(rows)})" if len(rows) > 1 else ""
    median = verdict.median or 0.0
    return (
        f"{_metric_label(metric)} {host.value:.1f} GB/s{where}: {host.deviation_pct:+.1f} % against the "
        f"median {median:.1f} GB/s of {len(verdict.hosts)} hosts ({host.why})"
    )


#: Said of a weak fleet of CPU hosts: their copies share cores with everything else on the machine, and
#: fewer than four of them have no spread to tell a slow host from that jitter.
CPU_WEAK_NOTE = " (CPU hosts, fewer than 4: the gap is shown, not judged)"


def judge_fleet(
    figures: Sequence[HostFigures], settings: Settings, skipped: Mapping[str, str], cpu_only: bool = False
) -> Judgement:
    """Checks and records for every fleet check; ``skipped`` maps a check id to why it was not measured.

    ``cpu_only``: the hosts have no GPU (gloo), so a weak fleet's warnings are shown as PASS with a note.
    """
    out = Judgement()
    grouped = groups_of(figures)
    # (check, host) → [(status, line, what was observed)]
    per_host: dict[tuple[str, str], list[tuple[str, str, dict[str, Any]]]] = {}
    actions: dict[tuple[str, str], list[str]] = {}
    summaries: dict[str, list[tuple[str, str]]] = {}
    # Checks where some group's PASS judged something: a floor, or a fleet strong enough to name odd hosts.
    judged: set[str] = set()
    for group, members in grouped.items():
        for metric in sorted({m for item in members for m in item.values}, key=metric_order):
            check = check_of(metric)
            # A host whose own row says ERROR (its probe ended early, so maybe before its weakest GPU) has
            # no figure here: the fleet's line never quotes what that row says was not measured.
            values = {
                i.host: i.values[metric] for i in members if metric in i.values and check not in i.errors
            }
            if check in skipped or not values:
                continue
            verdict = fleet.judge(
                metric, values, settings.floors.get(metric), settings.thresholds, label=_metric_label(metric)
            )
            prefix = f"[{group}] " if len(grouped) > 1 else ""
            out.records += [_host_record(i, metric, group, verdict) for i in members if i.host in values]
            out.records.append(_summary_record(group, verdict))
            quiet = cpu_only and verdict.weak
            status = "PASS" if quiet and verdict.status == "WARN" else verdict.status
            note = CPU_WEAK_NOTE if quiet else ""
            summaries.setdefault(check, []).append((status, prefix + verdict.message + note))
            if settings.floors.get(metric) is not None or not verdict.weak:
                judged.add(check)
            by_host = {i.host: i for i in members}
            for host in verdict.flagged():
                if quiet and host.status == "WARN":
                    continue
                line = _host_line(by_host[host.host], metric, host, verdict)
                seen = {
                    "metric": metric,
                    "value": round(host.value, 3),
                    "median": round(verdict.median or 0.0, 3),
                    "deviation_pct": host.deviation_pct,
                    "robust_z": host.robust_z,
                }
                per_host.setdefault((check, host.host), []).append((host.status, prefix + line, seen))
                speeds = [r.get("gbps") for r in by_host[host.host].detail.get(metric, [])]
                actions.setdefault((check, host.host), []).append(fleet.host_action(check, speeds))
    evidence = {(c, i.host): i.evidence.get(c) for i in figures for c in CHECKS}
    for check_id, spec in CHECKS.items():
        if check_id in skipped:
            why = skip_line(check_id, skipped, figures)
            out.checks.append(CheckResult(check_id, None, spec.checklist, "SKIP", message=why))
            continue
        for item in figures:
            if check_id in item.errors:
                out.checks.append(
                    CheckResult(
                        check_id,
                        item.host,
                        spec.checklist,
                        "ERROR",
                        message=f"{spec.title} not measured on {item.host}: {item.errors[check_id]}",
                        evidence=evidence[(check_id, item.host)],
                    )
                )
        for (check, host), lines in sorted(per_host.items()):
            if check != check_id:
                continue
            status = worst([s for s, _, _ in lines])
            out.checks.append(
                CheckResult(
                    check_id,
                    host,
                    spec.checklist,
                    status,
                    observed=[seen for _, _, seen in lines],
                    expected="within the fleet's spread",
                    message=f"{host} against its peers: " + "; ".join(line for _, line, _ in lines),
                    remediation=spec.remediation,
                    evidence=evidence[(check_id, host)],
                    action=strongest(actions[(check, host)]) if status != "PASS" else None,
                )
            )
        lines = summaries.get(check_id)
        unsaid = [
            f"{i.host} ({'; '.join(notes)})"
            for i in figures
            if (notes := unmeasured(i, check_id)) and not any(check_of(m) == check_id for m in i.values)
        ]
        gaps = f"; not measured on {', '.join(unsaid)}" if unsaid else ""
        if not lines:
            out.checks.append(
                CheckResult(
                    check_id,
                    None,
                    spec.checklist,
                    "ERROR" if any(check_id in i.errors for i in figures) else "SKIP",
                    message=f"{spec.title}: no host measured it{gaps}",
                )
            )
            continue
        status = worst([s for s, _ in lines])
        out.checks.append(
            CheckResult(
                check_id,
                None,
                spec.checklist,
                status,
                message="; ".join(line for _, line in lines) + gaps,
                remediation=SHORTFALL_REMEDIATION if status == "FAIL" else None,
                action="check_config" if status in ("FAIL", "WARN") else None,
                # No floor and too few hosts to tell an odd one: the figures are shown, not judged.
                judged=status != "PASS" or check_id in judged,
            )
        )
    return out


def single_host(figures: HostFigures, skipped: Mapping[str, str]) -> Judgement:
    """One host: its figures recorded, every check a SKIP (there is no fleet to judge it against)."""
    out = Judgement()
    for metric in sorted(figures.values, key=metric_order):
        out.records.append(_host_record(figures, metric, figures.group, None))
    for check_id, spec in CHECKS.items():
        if check_id in skipped:
            why = skip_line(check_id, skipped, [figures])
        elif check_id in figures.errors:
            why = f"one host, and {spec.title} could not be measured: {figures.errors[check_id]}"
        elif unmeasured(figures, check_id) and not any(check_of(m) == check_id for m in figures.values):
            why = f"one host, and not measured there: {'; '.join(unmeasured(figures, check_id))}"
        else:
            shown = ", ".join(
                f"{_metric_label(m)} {figures.values[m]:.1f} GB/s"
                for m in sorted(figures.values, key=metric_order)
                if check_of(m) == check_id
            )
            why = f"one host: no fleet to judge it against; recorded {shown or 'nothing'}"
        out.checks.append(CheckResult(check_id, None, spec.checklist, "SKIP", message=why))
    return out


# ---------------------------------------------------------------------------------------------------------
# Measuring (I/O): one thread per host, each running its own single-node launches


def _copy_budget(reps: int) -> Callable[[str, int], float]:
    return lambda metric, nbytes: ROW_BASE_S + (reps + 1) * nbytes / (COPY_FLOOR_GBPS * 1e9)


def skipped_checks(setup: Setup, collectives: Sequence[str]) -> dict[str, str]:
    """Checks that cannot be measured with this setup, and why."""
    skipped = {}
    if not collectives:
        skipped[FLEET_BUSBW] = "not measured: the playbook names no collective diagnose's program runs"
    elif setup.nproc < 2:
        skipped[FLEET_BUSBW] = (
            f"not measured: one rank per host ({setup.backend}), so a single-node collective moves nothing "
            "between ranks (bench_procs_per_host ≥ 2 measures it on CPU hosts)"
        )
    if setup.backend != "nccl":
        skipped[FLEET_H2D] = "not measured: no GPU on these hosts (gloo backend)"
        skipped[FLEET_NVLINK] = "not measured: no GPU on these hosts (gloo backend)"
    elif setup.nproc < 2:
        skipped[FLEET_NVLINK] = "not measured: one GPU per host, no GPU pair"
    return skipped


def skip_line(check_id: str, skipped: Mapping[str, str], figures: Sequence[HostFigures]) -> str:
    """Why ``check_id`` was skipped. A copy over PCIe skipped on CPU hosts points to the memory copy only
    where a host measured one: the checklist's H.9 must not claim a copy that H.10 says could not be made."""
    if check_id == FLEET_H2D and any("memcpy" in i.values and FLEET_MEMCPY not in i.errors for i in figures):
        return f"{skipped[check_id]}; memory copy measured instead"
    return skipped[check_id]


class FleetProbes:
    """The probes of one stage: launches on every host at once, then the verdicts."""

    def __init__(self, stage: Any, setup: Setup) -> None:
        self.stage = stage
        self.ctx = stage.ctx
        self.setup = setup
        self.collectives = [c for c in stage.plan.collectives if c in collective_bench.COLLECTIVES]
        self.busbw_bytes, self.busbw_note = probe_bytes(stage.records, stage.plan.max_bytes)

    def copy_spec(self, index: int, host: Host) -> LaunchSpec:
        device = "cuda" if self.setup.backend == "nccl" else "cpu"
        gpus = self.setup.nproc if device == "cuda" else 0
        return LaunchSpec(
            run_id=self.ctx.run_id,
            tag=f"fleet-{index}-copy",
            hosts=[host],
            connections=self.ctx.connections,
            nproc=1,
            backend=self.setup.backend,
            program_args=["--device", device, "--bytes", str(COPY_BYTES), "--reps", str(COPY_REPS)],
            expected_rows=fleet_probe.expected_rows(gpus, COPY_BYTES, device),
            row_budget_s=_copy_budget(COPY_REPS),
            out_dir=self.ctx.out_dir,
            startup_timeout_s=startup_timeout_s(self.stage.first),
            deadline=self.ctx.deadline,
            host_env={host.name: parse_bench_env(host.vars.get("bench_env"))},
            program=Path(fleet_probe.__file__),
            told=self.ctx.told,
        )

    def measure(self, index: int, host: Host, busbw: bool) -> HostFigures:
        """Both probes on one host, one after the other (they share its GPUs); a lone host's are only shown."""
        figures = HostFigures(host.name)
        missing, deadline = self.stage.torch_missing([host], len(self.setup.hosts) > 1), self.ctx.deadline
        if missing is None and deadline is not None and time.monotonic() > deadline:
            missing = "the run's time budget ran out before the fleet probes"
        if missing is not None:
            for check in CHECKS:
                figures.errors[check] = missing
            return figures
        copy_figures(figures, launch(self.copy_spec(index, host)))
        if busbw:
            single, size = Setup(self.setup.backend, self.setup.nproc, [host], []), self.busbw_bytes
            outcome = self.stage.launch(single, [host], f"fleet-{index}-busbw", self.collectives, size, size)
            busbw_figures(figures, outcome, self.collectives)
        return figures

    def run(self) -> None:
        ctx, setup = self.ctx, self.setup
        skipped = skipped_checks(setup, self.collectives)
        hosts = list(setup.hosts)
        busbw = FLEET_BUSBW not in skipped
        figures = launch_in_parallel(
            lambda pair: self.measure(pair[0], pair[1], busbw), list(enumerate(hosts)), MAX_PARALLEL_HOSTS
        )
        if len(figures) == 1:
            judgement = single_host(figures[0], skipped)
        else:
            assert self.stage.first is not None
            settings = settings_from(self.stage.first.vars, setup, self.collectives)
            if self.busbw_note:  # the floor is a plateau figure: a smaller size is judged against peers only
                settings.floors.update(dict.fromkeys((f"busbw.{c}" for c in self.collectives), None))
            judgement = judge_fleet(figures, settings, skipped, cpu_only=self.setup.backend != "nccl")
        for record in judgement.records:
            ctx.emit_record(SECTION, record)
        for check in sorted(judgement.checks, key=lambda c: (c.id, c.host is not None, -SEVERITY[c.status])):
            if check.id == FLEET_BUSBW and check.host is None and self.busbw_note:  # say why it is smaller
                check.message = f"{check.message}; {self.busbw_note}"
            ctx.emit_check(check)


def run(stage: Any, setup: Setup) -> None:
    """The extra's entry point (:mod:`diagnose.probes.registry`): probe every host, judge the fleet."""
    if not setup.hosts:
        return
    FleetProbes(stage, setup).run()
