"""Verdicts of gpu.gemm, gpu.hbm, gpu.memtest and gpu.sdc from what every host's GPUs measured. Pure.

* gpu.gemm / gpu.hbm: each GPU against the median of every GPU of its model in the fleet with
  :mod:`diagnose.probes.fleet_judge`'s robust statistics (a GPU is the member, so one 8-GPU node already
  makes a fleet): odd among its peers is FAIL (WARN with fewer than four GPUs). Then against the floor of
  :mod:`diagnose.probes.stress_floor` — its model's measured reference less ``gemm_max_below_ref_pct``
  (``hbm_max_below_ref_pct``), scaled to the power limit it ran under — which catches what a fleet cannot
  (a lone GPU, every GPU slow alike): below it is FAIL. A model without a measured reference is judged by
  its peers only, and the verdict says so. The message names the slow GPU with its deficit, its SM clock
  and power while it ran; the datasheet peak is shown as information, never judged against.
* gpu.memtest: any mismatching word is FAIL with the GPU, the count and the first byte offsets; a CUDA
  error that says ECC or uncorrectable is FAIL (the test hit bad memory), any other error is ERROR; less
  than ``memtest_min_fraction`` of the free memory tested is a WARN.
* gpu.sdc (:mod:`diagnose.probes.stress_sdc`): a GPU whose repeats of the seeded product differ, or whose checksum differs from the majority
  of the same GPU model on its host, is FAIL; across hosts (same model, same torch and CUDA) a host whose
  GPUs agree among themselves but not with the fleet's majority is FAIL from three hosts on, WARN with two.

CPU hosts (torch CPU, the test bed) get SKIP with their numbers: "CPU host: not judged against a GPU".
Every verdict of a host whose GPUs had a foreign compute process (gpu.processes) says so.

The actions (docs/actions.md) follow what the judge saw: a slow GPU is ``reset_gpu`` (an RMA if it stays
slow, which the message says), every GPU of a host slow alike is a host-wide setting (``check_config``:
power limit, clocks), a figure taken beside another job's processes is ``check_user_app``; a GPU whose
product gives different bits is ``rma_gpu``, every GPU of a host agreeing on other bits than the fleet is
a software difference (``check_config``) before it is eight faulty GPUs; a memory test reading a word back
wrong is ``rma_gpu``, one stopped by an uncorrectable ECC error ``reset_gpu``.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from diagnose.catalog.stage_ids import GPU_GEMM, GPU_HBM, GPU_MEMTEST, GPU_SDC
from diagnose.core.model import CheckResult, worst
from diagnose.core.units import decimal_bytes
from diagnose.core.vars import Vars, source_of
from diagnose.probes import fleet_judge
from diagnose.probes.stress_figures import THROUGHPUT, GpuStress, HostStress
from diagnose.probes.stress_floor import DEFAULT_MAX_BELOW_REF_PCT, Floor, Readings, floor_of
from diagnose.probes.stress_skus import OVERRIDES

CHECKLIST = "H"
CPU_NOTE = "CPU host: not judged against a GPU"
DEFAULT_MEMTEST_FRACTION = 0.9
METRICS = {GPU_GEMM: ("gemm.bf16", "gemm.tf32", "gemm.fp8"), GPU_HBM: ("hbm.copy", "hbm.triad")}
REMEDIATION = {
    GPU_GEMM: "Compare the named GPU with its peers: clocks and clock-event reasons under load (gpu.burnin, "
    "gpu.clocks), power cap (`nvidia-smi -q -d POWER`), a foreign process on it (gpu.processes); then field "
    "diagnostics (gpu.dcgm level 3). A GPU slow on an idle, cool node is an RMA candidate.",
    GPU_HBM: "HBM below its bandwidth: check the memory clock under load (`nvidia-smi -q -d CLOCK`), row "
    "remapping and ECC (gpu.memory), then field diagnostics (gpu.dcgm level 3, memory bandwidth test).",
    GPU_MEMTEST: "A word read back differently than written is a memory fault ECC did not catch: drain the "
    "node, reset the GPU and test again; if it repeats, run field diagnostics and RMA the GPU.",
    GPU_SDC: "The same computation gave different bits on this GPU: silent data corruption. Drain the node "
    "and run field diagnostics (gpu.dcgm level 3); a repeatable difference is an RMA.",
}
SLOW_GPU_NEXT = "reset the GPU and measure again; a GPU still slow after the reset is an RMA candidate"
SLOW_HOST_NEXT = (
    "every GPU of the host is slow alike: a host-wide setting (power limit, application clocks, a clock "
    "lock) before a GPU fault"
)


@dataclass(frozen=True)
class Settings:
    """The thresholds of one host, from its variables."""

    gemm_below_pct: float = DEFAULT_MAX_BELOW_REF_PCT
    hbm_below_pct: float = DEFAULT_MAX_BELOW_REF_PCT
    memtest_fraction: float = DEFAULT_MEMTEST_FRACTION
    overrides: dict[str, float] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # metric -> the campaign that set its override
    thresholds: fleet_judge.Thresholds = field(default_factory=fleet_judge.Thresholds)

    @classmethod
    def of(cls, host_vars: Vars) -> Settings:
        overrides = {m: v for m, name in OVERRIDES.items() if (v := host_vars.float(name)) is not None}
        return cls(
            gemm_below_pct=_pct(host_vars.float("gemm_max_below_ref_pct")),
            hbm_below_pct=_pct(host_vars.float("hbm_max_below_ref_pct")),
            memtest_fraction=host_vars.float("memtest_min_fraction", DEFAULT_MEMTEST_FRACTION) or 0.0,
            overrides=overrides,
            sources={m: w for m in overrides if (w := source_of(host_vars, OVERRIDES[m])) is not None},
            thresholds=fleet_judge.Thresholds(
                mad_k=host_vars.float("fleet_mad_k", fleet_judge.DEFAULT_MAD_K) or fleet_judge.DEFAULT_MAD_K,
                min_rel_dev_pct=host_vars.float("fleet_min_rel_dev_pct", fleet_judge.DEFAULT_MIN_REL_DEV_PCT)
                or 0.0,
            ),
        )

    def floor(self, metric: str, name: str, readings: Readings | None = None) -> Floor:
        """What a GPU named ``name`` is judged by for ``metric``, under the power limit it reported."""
        below = self.hbm_below_pct if metric.startswith("hbm.") else self.gemm_below_pct
        return floor_of(metric, name, self.overrides, below, readings or Readings(), self.sources.get(metric))


def _pct(value: float | None) -> float:
    """A tolerance in per cent, kept between 0 and 100 (null: the default)."""
    return DEFAULT_MAX_BELOW_REF_PCT if value is None else min(max(value, 0.0), 100.0)


@dataclass
class Judgement:
    """Checks to emit and results.json ``stress`` records."""

    checks: list[CheckResult] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)


def base_record(host: HostStress, gpu: GpuStress, check_id: str, metric: str) -> dict[str, Any]:
    record: dict[str, Any] = {
        "host": host.host,
        "gpu": gpu.gpu,
        "rank": gpu.rank,
        "bus_id": gpu.bus_id,
        "name": gpu.name,
        "check": check_id,
        "metric": metric,
    }
    if host.foreign:  # the engine adds shared_gpu: true (diagnose/benchmarks/shared_gpu.py)
        record["foreign_processes"] = host.foreign
    return record


def shared_note(host: HostStress) -> str:
    if not host.foreign:
        return ""
    return f"; measured while foreign compute processes ran (gpu.processes): {'; '.join(host.foreign)}"


def units(count: int, cpu: bool) -> str:
    """``8 GPUs``, ``1 GPU``, ``2 ranks``."""
    return f"{count} {'rank' if cpu else 'GPU'}{'' if count == 1 else 's'}"


def _fmt(value: float, unit: str) -> str:
    return f"{value:.1f} {unit}" if value >= 10 else f"{value:.3g} {unit}"


def broken_checks(
    hosts: Sequence[HostStress], check_id: str, phase: str
) -> tuple[list[CheckResult], set[str]]:
    """ERROR per host whose launch ended before the phase delivered, and those hosts' names."""
    checks, names = [], set()
    for host in hosts:
        why = host.broken(phase)
        if why is not None:
            names.add(host.host)
            checks.append(
                CheckResult(
                    check_id,
                    host.host,
                    CHECKLIST,
                    "ERROR",
                    message=f"{phase} not measured on {host.host}: {why}",
                )
            )
    return checks, names


# --------------------------------------------------------------------------------------------- throughput


def _fleet_verdicts(
    hosts: Sequence[HostStress], metric: str, thresholds: fleet_judge.Thresholds
) -> dict[str, tuple[fleet_judge.FleetVerdict, fleet_judge.HostVerdict]]:
    """Every GPU's figure against the median of the fleet's GPUs of its model, by GPU key."""
    groups: dict[str, dict[str, float]] = {}
    for host in hosts:
        if host.cpu:
            continue
        for gpu in host.gpus:
            if metric in gpu.values:
                groups.setdefault(gpu.name, {})[gpu.key] = gpu.values[metric]
    out = {}
    for values in groups.values():
        verdict = fleet_judge.judge(metric, values, None, thresholds, unit=THROUGHPUT[metric][1])
        for member in verdict.hosts:
            out[member.host] = (verdict, member)
    return out


def judge_throughput(hosts: Sequence[HostStress], settings: dict[str, Settings], check_id: str) -> Judgement:
    """gpu.gemm or gpu.hbm: one check per host, a record per GPU and metric."""
    out = Judgement()
    phase = METRICS[check_id][0].partition(".")[0]
    broken, skip = broken_checks(hosts, check_id, phase)
    out.checks += broken
    fleets = {
        m: _fleet_verdicts(hosts, m, next(iter(settings.values())).thresholds) for m in METRICS[check_id]
    }
    for host in hosts:
        if host.host in skip or phase not in host.phases:
            continue
        host_settings = settings[host.host]
        lines: list[tuple[str, str]] = []
        slow: set[str] = set()
        for gpu in host.gpus:
            for metric in METRICS[check_id]:
                record, line = _judge_metric(host, gpu, metric, host_settings, fleets[metric].get(gpu.key))
                if record is not None:
                    out.records.append(record)
                if line is not None:
                    lines.append(line)
                    slow |= {gpu.key} if line[0] in ("FAIL", "WARN") else set()
        check = _throughput_check(host, check_id, lines, host_settings)
        out.checks.append(_with_slow_action(check, host, len(slow)))
    return out


def _judge_metric(
    host: HostStress,
    gpu: GpuStress,
    metric: str,
    settings: Settings,
    fleet: tuple[fleet_judge.FleetVerdict, fleet_judge.HostVerdict] | None,
) -> tuple[dict[str, Any] | None, tuple[str, str] | None]:
    check_id, unit, _ = THROUGHPUT[metric]
    if metric in gpu.errors:
        return None, ("ERROR", f"{gpu.label} {metric} failed: {gpu.errors[metric]}")
    if metric not in gpu.values:
        return None, None
    value = gpu.values[metric]
    readings = Readings.of(gpu.entries[metric])
    record = {**base_record(host, gpu, check_id, metric), "unit": unit, "value": round(value, 3)}
    record["samples"] = [round(s, 3) for s in gpu.entries[metric].get("samples") or []]
    record.update(readings.record())
    if host.cpu:
        record.update({"verdict": "SKIP", "why": CPU_NOTE})
        return record, None
    expect = settings.floor(metric, gpu.name, readings)
    record.update(_expectation_record(expect, value))
    status, why = _against_floor(expect, value, unit, readings)
    if fleet is not None:
        verdict, member = fleet
        record.update(
            {
                "median": round(verdict.median or 0.0, 3),
                "deviation_pct": member.deviation_pct,
                "robust_z": member.robust_z,
                "fleet_gpus": len(verdict.hosts),
            }
        )
        if member.odd:
            status = worst([status, member.status])
            why += (
                f"; {member.deviation_pct:+.1f} % against the median {_fmt(verdict.median or 0.0, unit)} of "
                f"{len(verdict.hosts)} {gpu.name} GPUs ({member.why})"
            )
    record.update({"verdict": status, "why": why})
    if status == "PASS":
        return record, None
    name = metric.partition(".")[2]
    return record, (status, f"{gpu.label} {name} {_fmt(value, unit)}{readings.text()}: {why}")


def _expectation_record(expect: Floor, value: float) -> dict[str, Any]:
    """The record's reference, floor and datasheet share (the last for information only)."""
    floor = expect.floor
    return {
        "reference": expect.reference,
        "reference_source": expect.source,
        "reference_power_w": expect.reference_power_w,
        "fraction_of_reference": round(value / expect.reference, 4) if expect.reference else None,
        "max_below_ref_pct": expect.below_pct,
        "floor_scale": round(expect.scale, 4),
        "floor": None if floor is None else round(floor, 3),
        "peak": expect.peak,
        "peak_source": f"{expect.label} datasheet" if expect.peak else None,
        "fraction_of_peak": round(value / expect.peak, 4) if expect.peak else None,
    }


def _against_floor(expect: Floor, value: float, unit: str, readings: Readings) -> tuple[str, str]:
    """PASS or FAIL against the floor, and why; a GPU without a reference passes with the note."""
    floor = expect.floor
    if floor is None or expect.reference is None:
        return "PASS", expect.source
    if value >= floor:
        return "PASS", f"above the floor {_fmt(floor, unit)}"
    scaled = expect.scaled_by(readings.power_limit_w)
    return "FAIL", (
        f"{value / expect.reference * 100:.0f} % of the {expect.label} reference {_fmt(expect.reference, unit)} "
        f"({expect.brief}), below the floor {_fmt(floor, unit)} ({expect.below_pct:g} % under the reference"
        f"{scaled})"
    )


def _throughput_check(
    host: HostStress, check_id: str, lines: list[tuple[str, str]], settings: Settings
) -> CheckResult:
    observed = {
        metric: {g.label: round(g.values[metric], 2) for g in host.gpus if metric in g.values}
        for metric in METRICS[check_id]
    }
    observed = {m: v for m, v in observed.items() if v}
    summary = _summary(host, check_id, settings)
    note = shared_note(host)
    if host.cpu:
        return CheckResult(
            check_id, host.host, CHECKLIST, "SKIP", observed, message=f"{CPU_NOTE}; measured {summary}{note}"
        )
    if not observed and not lines:
        return CheckResult(
            check_id, host.host, CHECKLIST, "ERROR", message=f"nothing measured on {host.host}"
        )
    if lines:
        status = worst([s for s, _ in lines])
        message = f"{host.host}: " + "; ".join(text for _, text in lines) + f" (all: {summary}){note}"
        remediation = REMEDIATION[check_id]
    else:
        status, remediation = "PASS", None
        message = f"{host.host}: {summary}, {_pass_clause(host, check_id, settings)}{note}"
    return CheckResult(
        check_id,
        host.host,
        CHECKLIST,
        status,
        observed,
        "within the fleet's spread and ≥ the floor (the model's measured reference less "
        f"{'hbm' if check_id == GPU_HBM else 'gemm'}_max_below_ref_pct, scaled to the power limit)",
        message,
        remediation,
    )


def _pass_clause(host: HostStress, check_id: str, settings: Settings) -> str:
    """How a passing host was judged: above its floors, and which figures had no reference to judge by."""
    floors = [settings.floor(m, g.name) for g in host.gpus for m in METRICS[check_id] if m in g.values]
    notes = sorted({f.source for f in floors if f.reference is None})
    judged = any(f.reference is not None for f in floors)
    clause = "every GPU above its floor and within its fleet" if judged else "no GPU odd among its peers"
    return clause + "".join(f"; {n}" for n in notes)


def _with_slow_action(check: CheckResult, host: HostStress, slow: int) -> CheckResult:
    """The action of a FAIL or WARN throughput result, and the next step said in its message."""
    if check.status not in ("FAIL", "WARN") or not slow:
        return check
    if host.foreign:  # the message already ends with the foreign processes
        check.action = "check_user_app"
        return check
    if slow == len(host.gpus) > 1:
        check.action, step = "check_config", SLOW_HOST_NEXT
    else:
        check.action, step = "reset_gpu", SLOW_GPU_NEXT
    check.message = f"{check.message} → {step}"
    return check


def _summary(host: HostStress, check_id: str, settings: Settings) -> str:
    """``8 GPUs: bf16 min 781.2 / median 790.3 TFLOP/s (111 % of the reference 711.7; 80 % of the 989
    datasheet peak), ...``; skipped metrics with why."""
    parts = []
    for metric in METRICS[check_id]:
        values = [g.values[metric] for g in host.gpus if metric in g.values]
        unit = THROUGHPUT[metric][1]
        name = metric.partition(".")[2]
        if values:
            middle = statistics.median(values)
            share = "" if host.cpu else _shares(settings.floor(metric, host.gpus[0].name), middle)
            parts.append(f"{name} min {_fmt(min(values), unit)} / median {_fmt(middle, unit)}{share}")
        skipped = {g.skipped[metric] for g in host.gpus if metric in g.skipped}
        if skipped and not values:
            parts.append(f"{name} not measured ({'; '.join(sorted(skipped))})")
    return f"{units(len(host.gpus), host.cpu)}: " + ", ".join(parts)


def _shares(expect: Floor, middle: float) -> str:
    """`` (100 % of the reference 711.7; 72 % of the 989 datasheet peak)``: where a median stands."""
    shares = []
    if expect.reference:
        shares.append(f"{middle / expect.reference * 100:.0f} % of the reference {expect.reference:g}")
    if expect.peak:
        shares.append(f"{middle / expect.peak * 100:.0f} % of the {expect.peak:g} datasheet peak")
    return f" ({'; '.join(shares)})" if shares else ""


# --------------------------------------------------------------------------------------------- memtest


def _memtest_gpu(
    host: HostStress, gpu: GpuStress, settings: Settings
) -> tuple[dict[str, Any] | None, str, str]:
    if "memtest" in gpu.errors:
        error = gpu.errors["memtest"]
        hardware = any(word in error.lower() for word in ("ecc", "uncorrectable"))
        return None, "FAIL" if hardware else "ERROR", f"{gpu.label}: the memory test failed: {error}"
    entry = gpu.entries.get("memtest")
    if entry is None:
        return None, "ERROR", f"{gpu.label}: no memory test result"
    tested, free = int(entry.get("tested_bytes") or 0), int(entry.get("free_bytes") or 0)
    share = tested / free if free else 0.0
    record = {
        **base_record(host, gpu, GPU_MEMTEST, "memtest"),
        **{
            k: entry.get(k)
            for k in ("tested_bytes", "free_bytes", "passes", "patterns", "mismatches", "seconds")
        },
        "tested_fraction": round(share, 4),
        "first": entry.get("first") or [],
    }
    count = int(entry.get("mismatches") or 0)
    scope = f"{decimal_bytes(tested)} ({share * 100:.0f} % of free), {entry.get('passes')} passes"
    if host.cpu:
        status, line = "SKIP", f"{gpu.label}: {scope}, {count} mismatching words"
    elif count:
        first = ", ".join(
            f"0x{f['offset']:x} ({f['pattern']}: wrote {f['expected']}, read {f['read']})"
            for f in record["first"][:4]
        )
        status, line = "FAIL", f"{gpu.label}: {count} mismatching words in {scope}; first at {first}"
    elif share < settings.memtest_fraction:
        status = "WARN"
        line = (
            f"{gpu.label}: tested only {scope}, under {settings.memtest_fraction:.0%} (memtest_min_fraction)"
        )
    else:
        status, line = "PASS", f"{gpu.label}: {scope}"
    record.update({"verdict": status, "why": line})
    return record, status, line


def judge_memtest(hosts: Sequence[HostStress], settings: dict[str, Settings]) -> Judgement:
    out = Judgement()
    broken, skip = broken_checks(hosts, GPU_MEMTEST, "memtest")
    out.checks += broken
    for host in hosts:
        if host.host in skip or "memtest" not in host.phases:
            continue
        results = [_memtest_gpu(host, gpu, settings[host.host]) for gpu in host.gpus]
        out.records += [r for r, _, _ in results if r is not None]
        statuses = [s for _, s, _ in results] or ["ERROR"]
        status = worst(statuses)
        action = _memtest_action(status, [line for _, s, line in results if s == status])
        shown = [line for _, s, line in results if s == status] if status not in ("PASS", "SKIP") else []
        seconds = max((g.entries.get("memtest", {}).get("seconds") or 0.0 for g in host.gpus), default=0.0)
        patterns = "walking ones, random words, address and its complement"
        if host.cpu:
            message = f"{CPU_NOTE}; " + "; ".join(line for _, _, line in results)
        elif shown:
            message = f"{host.host}: " + "; ".join(shown)
        else:
            first = results[0][2].partition(": ")[2] if results else ""
            message = (
                f"{host.host}: {units(len(results), False)}, no mismatching word ({patterns}; {first} each, "
                f"{seconds:.0f} s)"
            )
        out.checks.append(
            CheckResult(
                GPU_MEMTEST,
                host.host,
                CHECKLIST,
                status,
                {g.label: (g.entries.get("memtest") or {}).get("mismatches") for g in host.gpus},
                "no mismatching word",
                message + shared_note(host),
                REMEDIATION[GPU_MEMTEST] if status in ("FAIL", "ERROR") else None,
                action=action,
            )
        )
    return out


def _memtest_action(status: str, lines: Sequence[str]) -> str | None:
    """A word read back wrong is ``rma_gpu``; the test stopped by an uncorrectable ECC error is
    ``reset_gpu`` (the page is retired or the row remapped at the next reset, as gpu.memory says); too
    little memory tested is ``check_config`` (memory held by something else, memtest_min_fraction)."""
    if status == "FAIL":
        return "rma_gpu" if any("mismatching words" in line for line in lines) else "reset_gpu"
    return "check_config" if status == "WARN" else None
