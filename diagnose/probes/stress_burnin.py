"""gpu.burnin: what sustained load did to each GPU, from the stress program's burn-in minutes. Pure.

The program keeps every GPU of a host busy with bf16 products for ``burnin_minutes`` while rank 0 samples
``nvidia-smi --query-gpu`` every second or two. Per GPU this module summarises the samples taken under
load (utilisation at least :data:`LOADED_UTIL_PCT`): minimum and median SM clock, maximum GPU and HBM
temperature, maximum power, the seconds each clock-event reason was active, the growth of the volatile
uncorrectable ECC count, whether a row remap became pending, and the TFLOP/s of each minute. The rules
are those of the snapshot checks, applied to every sample:

* a hardware clock-event reason (HW slowdown, HW thermal, HW power brake; the table of
  :mod:`diagnose.catalog.clock_events` that gpu.clocks judges one snapshot with), an uncorrectable ECC
  error during the load, or a GPU that failed or a host lost during it: FAIL;
* SW thermal slowdown, a row remap pending, or a GPU that lost more than ``burnin_max_drop_pct`` of its
  first minute's throughput by its last: WARN;
* SW power cap is the GPU working at its power limit, as a full bf16 load does: shown, not judged.

Each finding carries its own action (docs/actions.md), and the host's result the one that covers them all:
heat, clock brakes and a throughput that sags are the site's cooling and power (``contact_support``); an
uncorrectable ECC error or a pending row remap is applied at the next GPU reset (``reset_gpu``), as is a
GPU that failed under load, unless its error names an Xid (the Xid catalog's action); a host lost under
load is ``reboot``; a GPU that could not be sampled is the sampler's setup (``check_config``).

PCIe generation under load and the NVLink and PCIe error counters over the whole benchmark stage (the
burn-in included) stay with gpu.pcie and gpu.nvlink, which the engine samples and snapshots around it.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from typing import Any

from diagnose.catalog import xid
from diagnose.catalog.clock_events import BITS, FAULTS, LABELS, WARNINGS
from diagnose.catalog.stage_ids import GPU_BURNIN
from diagnose.core.model import CheckResult, strongest, worst
from diagnose.probes.stress_figures import GpuStress, HostStress
from diagnose.probes.stress_judge import CHECKLIST, CPU_NOTE, Judgement, base_record, shared_note, units

LOADED_UTIL_PCT = 90.0
DEFAULT_MAX_DROP_PCT = 10.0
#: Points of each GPU's series kept in results.json for the report's plot (the evidence keeps them all).
SERIES_POINTS = 150
SERIES_FIELDS = ("clocks.sm", "temperature.gpu", "power.draw", "clocks_throttle_reasons.active")
REMEDIATION = (
    "A GPU that slows down, overheats or reports memory errors under sustained load fails in training too: "
    "check the node's cooling (inlet temperature, fans, airflow, blanking panels) and power delivery "
    "(PSUs, power brake from the BMC), then run field diagnostics (gpu.dcgm level 3); an uncorrectable "
    "ECC error or a pending row remap needs a GPU reset, a repeat an RMA."
)
#: An Xid the driver's error text names (``Xid 79``, ``Xid: 48``), whose catalog row says what to do.
XID_IN_TEXT = re.compile(r"\bXid\b\D{0,4}(\d{1,4})", re.IGNORECASE)
COOLING, RESET, HOST_LOST, SAMPLER = "contact_support", "reset_gpu", "reboot", "check_config"


def _column(samples: Sequence[Sequence[Any]], fields: Sequence[str], name: str) -> list[float | None]:
    if name not in fields:
        return [None] * len(samples)
    index = fields.index(name) + 1
    return [s[index] if index < len(s) and isinstance(s[index], int | float) else None for s in samples]


def summary(gpu: GpuStress, fields: Sequence[str], interval_s: float) -> dict[str, Any]:
    """The burn-in of one GPU in figures (see the module docstring)."""
    samples = gpu.samples
    util = _column(samples, fields, "utilization.gpu")
    loaded = [s for s, u in zip(samples, util, strict=True) if u is None or u >= LOADED_UTIL_PCT] or samples
    sm = [v for v in _column(loaded, fields, "clocks.sm") if v is not None]
    masks = [int(v) for v in _column(samples, fields, "clocks_throttle_reasons.active") if v is not None]
    ecc = [v for v in _column(samples, fields, "ecc.errors.uncorrected.volatile.total") if v is not None]
    tflops = [float(m["tflops"]) for m in gpu.burnin if isinstance(m.get("tflops"), int | float)]
    out: dict[str, Any] = {
        "samples": len(samples),
        "loaded_samples": len(loaded),
        "min_sm_mhz": min(sm) if sm else None,
        "median_sm_mhz": statistics.median(sm) if sm else None,
        "tflops_by_minute": [round(t, 2) for t in tflops],
        "reason_s": {
            name: round(sum(1 for m in masks if m & bit) * interval_s, 1)
            for name, bit in BITS.items()
            if any(m & bit for m in masks) and name != "gpu_idle"
        },
        "ecc_uncorrected_delta": int(ecc[-1] - ecc[0]) if len(ecc) > 1 else 0,
        "remap_pending": any(v for v in _column(samples, fields, "remapped_rows.pending") if v),
        "drop_pct": round((1.0 - tflops[-1] / tflops[0]) * 100.0, 1)
        if len(tflops) > 1 and tflops[0]
        else None,
    }
    for key, name in (("max_temp_c", "temperature.gpu"), ("max_hbm_temp_c", "temperature.memory")):
        values = [v for v in _column(samples, fields, name) if v is not None]
        out[key] = max(values) if values else None
    power = [v for v in _column(loaded, fields, "power.draw") if v is not None]
    out["max_power_w"] = max(power) if power else None
    return out


def series(gpu: GpuStress, fields: Sequence[str]) -> dict[str, Any]:
    """Seconds since the burn-in began and the plotted fields, thinned to :data:`SERIES_POINTS`."""
    samples = gpu.samples
    step = max(1, -(-len(samples) // SERIES_POINTS))
    kept = samples[::step]
    origin = kept[0][0] if kept else 0.0
    out: dict[str, Any] = {"t_s": [round(s[0] - origin, 1) for s in kept]}
    for name in SERIES_FIELDS:
        out[name] = _column(kept, fields, name)
    return out


def error_action(error: str) -> str:
    """A GPU that failed under load: the Xid catalog's action when the error names one, else a reset."""
    named = XID_IN_TEXT.search(error)
    return xid.action(int(named.group(1)), error) if named else RESET


def _verdict(
    gpu: GpuStress, figures: dict[str, Any], max_drop: float, sampled: bool
) -> tuple[str, list[str], list[str]]:
    """(status, findings, their actions) of one GPU."""
    findings: list[tuple[str, str, str]] = []
    if "burnin" in gpu.errors:
        error = gpu.errors["burnin"]
        findings.append(("FAIL", f"failed under load: {error}", error_action(error)))
    reasons = figures["reason_s"]
    for name in FAULTS:
        if name in reasons:
            findings.append(("FAIL", f"{LABELS[name]} for {reasons[name]:.0f} s", COOLING))
    if figures["ecc_uncorrected_delta"] > 0:
        text = f"{figures['ecc_uncorrected_delta']} uncorrectable ECC errors during the load (reset the GPU)"
        findings.append(("FAIL", text, RESET))
    for name in WARNINGS:
        if name in reasons:
            text = f"{LABELS[name]} for {reasons[name]:.0f} s (max {figures['max_temp_c']} °C)"
            findings.append(("WARN", text, COOLING))
    if figures["remap_pending"]:
        findings.append(("WARN", "a row remap became pending (reset the GPU)", RESET))
    drop = figures["drop_pct"]
    if drop is not None and drop > max_drop:
        first, last = figures["tflops_by_minute"][0], figures["tflops_by_minute"][-1]
        text = f"throughput fell {drop:.1f} % ({first:.0f} → {last:.0f} TFLOP/s)"
        findings.append(("WARN", text, COOLING))
    if not sampled:
        findings.append(("WARN", "not sampled: clocks, temperature and power unknown", SAMPLER))
    status = worst([s for s, _, _ in findings] or ["PASS"])
    return status, [text for _, text, _ in findings], [a for _, _, a in findings]


def _describe(figures: dict[str, Any]) -> str:
    def num(key: str, unit: str) -> str:
        value = figures.get(key)
        return f"{value:.0f} {unit}" if isinstance(value, int | float) else "?"

    tflops = figures["tflops_by_minute"]
    rate = f", {statistics.median(tflops):.0f} TFLOP/s" if tflops else ""
    return (
        f"SM clock min {num('min_sm_mhz', 'MHz')} / median {num('median_sm_mhz', 'MHz')}, max "
        f"{num('max_temp_c', '°C')} (HBM {num('max_hbm_temp_c', '°C')}), max {num('max_power_w', 'W')}{rate}"
    )


def judge_burnin(
    hosts: Sequence[HostStress], minutes: dict[str, float], max_drop: dict[str, float]
) -> Judgement:
    """gpu.burnin per host; ``minutes`` and ``max_drop`` are each host's burnin_minutes and drop limit."""
    out = Judgement()
    for host in hosts:
        asked = minutes.get(host.host, 0.0)
        if asked <= 0:
            out.checks.append(
                CheckResult(
                    GPU_BURNIN,
                    host.host,
                    CHECKLIST,
                    "SKIP",
                    message="burnin_minutes is 0: no sustained load in this run (the acceptance playbooks "
                    "burn in for 10 minutes)",
                )
            )
            continue
        out.checks.append(_host_check(host, asked, max_drop.get(host.host, DEFAULT_MAX_DROP_PCT), out))
    return out


def _host_check(host: HostStress, asked: float, max_drop: float, out: Judgement) -> CheckResult:
    lost = host.status != "done" and host.in_progress == "burnin"
    if not any(g.burnin for g in host.gpus):
        status = "FAIL" if lost else "ERROR"
        why = host.broken("burnin") or "no burn-in minute arrived"
        return CheckResult(
            GPU_BURNIN,
            host.host,
            CHECKLIST,
            status,
            message=f"{host.host}: {why}",
            action=HOST_LOST if lost else None,
        )
    lines: list[tuple[str, str]] = []
    actions: list[str] = []
    summaries = {g.label: summary(g, host.fields, host.interval_s) for g in host.gpus}
    for gpu in host.gpus:
        figures = summaries[gpu.label]
        status, findings, found = (
            ("SKIP", [], []) if host.cpu else _verdict(gpu, figures, max_drop, bool(gpu.samples))
        )
        actions += found
        described = _describe(figures) if not host.cpu else f"{figures['tflops_by_minute']} TFLOP/s by minute"
        why = "; ".join(findings) or described
        record = {**base_record(host, gpu, GPU_BURNIN, "burnin"), "minutes": asked, "summary": figures}
        record.update({"series": series(gpu, host.fields), "verdict": status, "why": why})
        out.records.append(record)
        lines.append((status, f"{gpu.label}: {why}" if findings else f"{gpu.label}: {described}"))
    done = max(len(g.burnin) for g in host.gpus)
    head = f"{host.host}: {units(len(host.gpus), host.cpu)}, {done} of {asked:g} min of bf16 load"
    note = shared_note(host)
    if host.cpu:
        return CheckResult(GPU_BURNIN, host.host, CHECKLIST, "SKIP", message=f"{CPU_NOTE}; {head}{note}")
    status = worst([s for s, _ in lines])
    if lost:
        status = "FAIL"
        head += f"; the host stopped during the burn-in ({host.message})"
        actions.append(HOST_LOST)
    flagged = [text for s, text in lines if s != "PASS"]
    power = sorted({r for figures in summaries.values() for r in figures["reason_s"]} - set(FAULTS))
    benign = (
        f"; clock-event reasons seen: {', '.join(LABELS[r] for r in power)}" if power and not flagged else ""
    )
    body = "; ".join(flagged) if flagged else "; ".join(text for _, text in lines)
    if host.sampler_problem:
        body += f" ({host.sampler_problem})"
    return CheckResult(
        GPU_BURNIN,
        host.host,
        CHECKLIST,
        status,
        summaries,
        "no HW clock-event reason, no ECC error, throughput held",
        f"{head}: {body}{benign}{note}",
        REMEDIATION if status in ("FAIL", "WARN") else None,
        action=strongest(actions) if status in ("FAIL", "WARN") and actions else None,
    )
