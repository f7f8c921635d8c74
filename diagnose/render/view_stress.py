"""The report's GPU stress chapter: every GPU's figures under load, the stage's timings, the burn-in plots.

Built from results.json ``stress`` (:mod:`diagnose.probes.stress`): per GPU and metric a record with the
value, its share of the model's measured reference (and of the datasheet peak, as information), the floor,
the fleet deviation and the SM clock and power the GPU reported while it ran (gpu.gemm, gpu.hbm), the memory
test's coverage and mismatches (gpu.memtest), the checksum (gpu.sdc) and the burn-in's summary and series
(gpu.burnin); per host a ``stage`` record with each phase's seconds. One row per GPU, one cell per figure,
coloured by that figure's verdict; the plots (clock and temperature per GPU over the burn-in) are drawn by
the HTML renderer from :attr:`StressView.burnin`, so this module stays free of matplotlib.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from diagnose.core.model import SEVERITY, worst
from diagnose.core.units import MISSING, decimal_bytes, duration, is_number, number, percent
from diagnose.render.hostlist import natural_key
from diagnose.render.text import count_of

COLUMNS = (
    ("gemm.bf16", "bf16 TFLOP/s"),
    ("gemm.tf32", "tf32 TFLOP/s"),
    ("gemm.fp8", "fp8 TFLOP/s"),
    ("hbm.copy", "copy GB/s"),
    ("hbm.triad", "triad GB/s"),
    ("memtest", "memory test"),
    ("sdc", "checksum"),
    ("burnin", "burn-in"),
)
#: Hosts whose burn-in is plotted: those with a finding first, then in name order, up to this many.
PLOTTED_HOSTS = 8


@dataclass
class Cell:
    """One figure of one GPU: the value as shown, a second line, its verdict and why."""

    text: str
    detail: str
    status: str
    why: str


@dataclass
class GpuRow:
    host: str
    gpu: str
    name: str
    worst: str
    cells: list[Cell | None]
    shared: bool = False


@dataclass
class StageRow:
    """One host's stage: how its launch ended and each phase's seconds."""

    host: str
    device: str
    gpus: str
    status: str
    message: str
    phases: str
    wall: str


@dataclass
class BurninPlot:
    """One host's burn-in series, by GPU label: what the HTML renderer draws."""

    host: str
    status: str
    series: dict[str, dict[str, list[Any]]]
    svg: str = ""


@dataclass
class StressView:
    labels: list[str]
    rows: list[GpuRow]
    stages: list[StageRow]
    burnin: list[BurninPlot] = field(default_factory=list)
    cpu_only: bool = False
    shared_hosts: list[str] = field(default_factory=list)


def _shares(record: dict[str, Any]) -> list[str]:
    """Where a figure stands: its share of the measured reference, and of the datasheet peak as information.
    A record written before the references (issue 33) has only ``fraction_of_peak``: "72 % of peak"."""
    if "reference" not in record:
        share = record.get("fraction_of_peak")
        return [f"{percent(share)} of peak"] if is_number(share) else []
    parts = []
    if is_number(record.get("fraction_of_reference")) and is_number(record.get("reference")):
        parts.append(f"{percent(record['fraction_of_reference'])} of ref {record['reference']:g}")
    elif record.get("reference") is None:
        parts.append("peers only")
    if is_number(record.get("fraction_of_peak")) and is_number(record.get("peak")):
        parts.append(f"{percent(record['fraction_of_peak'])} of {record['peak']:g} datasheet")
    return parts


def _readings(record: dict[str, Any]) -> str:
    """``1365 MHz, 698/700 W``: what the GPU reported while the phase ran, or empty."""
    clock, power, limit = (record.get(k) for k in ("sm_clock_mhz", "power_w", "power_limit_w"))
    parts = [f"{clock:.0f} MHz" if is_number(clock) else ""]
    if is_number(power):
        parts.append(f"{power:.0f}/{limit:.0f} W" if is_number(limit) else f"{power:.0f} W")
    return ", ".join(p for p in parts if p)


def _throughput(record: dict[str, Any]) -> Cell:
    value = record.get("value")
    digits = 1 if is_number(value) and value >= 10 else 3
    deviation = record.get("deviation_pct")
    parts = [
        *_shares(record),
        f"{deviation:+.1f} % vs median" if is_number(deviation) else "",
        _readings(record),
    ]
    return Cell(
        number(value, digits),
        " · ".join(p for p in parts if p),
        str(record.get("verdict")),
        str(record.get("why") or ""),
    )


def _memtest(record: dict[str, Any]) -> Cell:
    tested = record.get("tested_bytes")
    text = decimal_bytes(int(tested)) if is_number(tested) else MISSING
    mismatches = record.get("mismatches")
    passes = count_of(record.get("passes"), "pass", "passes")
    detail = f"{percent(record.get('tested_fraction'))} of free, {passes}, {mismatches} wrong"
    return Cell(text, detail, str(record.get("verdict")), str(record.get("why") or ""))


def _sdc(record: dict[str, Any]) -> Cell:
    checksum = str(record.get("checksum") or MISSING)
    reference = record.get("reference")
    detail = "" if reference in (None, checksum) else f"fleet: {str(reference)[:12]}…"
    return Cell(checksum[:12] + "…", detail, str(record.get("verdict")), str(record.get("why") or ""))


def _burnin(record: dict[str, Any]) -> Cell:
    summary = record.get("summary") or {}
    clock = f"{number(summary.get('min_sm_mhz'), 0)}/{number(summary.get('median_sm_mhz'), 0)} MHz"
    heat = f"{number(summary.get('max_temp_c'), 0)} °C, {number(summary.get('max_power_w'), 0)} W"
    throttled = ", ".join(
        f"{name} {seconds:g} s" for name, seconds in (summary.get("reason_s") or {}).items()
    )
    detail = heat + (f"; {throttled}" if throttled else "")
    return Cell(clock, detail, str(record.get("verdict")), str(record.get("why") or ""))


def _cell(metric: str, record: dict[str, Any]) -> Cell:
    if metric == "memtest":
        return _memtest(record)
    if metric == "sdc":
        return _sdc(record)
    if metric == "burnin":
        return _burnin(record)
    return _throughput(record)


def _stage(record: dict[str, Any]) -> StageRow:
    seconds = record.get("seconds") or {}
    phases = ", ".join(f"{name} {duration(value)}" for name, value in seconds.items() if is_number(value))
    return StageRow(
        host=str(record.get("host")),
        device=str(record.get("device") or MISSING),
        gpus=f"{record.get('gpus')} × {', '.join(record.get('names') or []) or '?'}",
        status=str(record.get("status") or MISSING),
        message=str(record.get("message") or ""),
        phases=phases or MISSING,
        wall=duration(record.get("wall_s")),
    )


def build_stress(results: dict[str, Any]) -> StressView | None:
    """The chapter's view model, or None when the run has no stress records."""
    found = results.get("stress")
    records = [r for r in found if isinstance(r, dict)] if isinstance(found, list) else []
    if not records:
        return None
    stages = [_stage(r) for r in records if r.get("metric") == "stage"]
    by_gpu: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    names: dict[tuple[str, str], str] = {}
    shared: set[str] = set()
    for record in records:
        if record.get("metric") == "stage":
            if record.get("shared_gpu"):
                shared.add(str(record.get("host")))
            continue
        gpu = record.get("gpu")
        label = f"GPU {gpu}" if gpu is not None else f"rank {record.get('rank')}"
        key = (str(record.get("host")), label)
        by_gpu.setdefault(key, {})[str(record.get("metric"))] = record
        names[key] = str(record.get("name") or "")
    metrics = [(m, label) for m, label in COLUMNS if any(m in cells for cells in by_gpu.values())]
    rows = []
    for (host, label), by_metric in by_gpu.items():
        cells = [_cell(m, by_metric[m]) if m in by_metric else None for m, _ in metrics]
        statuses = [c.status for c in cells if c is not None and c.status in SEVERITY]
        rows.append(
            GpuRow(
                host,
                label,
                names[(host, label)],
                worst(statuses) if statuses else "SKIP",
                cells,
                host in shared,
            )
        )
    rows.sort(key=lambda r: (natural_key(r.host), natural_key(r.gpu)))
    return StressView(
        labels=[label for _, label in metrics],
        rows=rows,
        stages=sorted(stages, key=lambda s: natural_key(s.host)),
        burnin=_plots(records),
        cpu_only=all(s.device == "cpu" for s in stages) if stages else False,
        shared_hosts=sorted(shared, key=natural_key),
    )


def _plots(records: list[dict[str, Any]]) -> list[BurninPlot]:
    """Per host, each GPU's burn-in series; hosts with a finding first, at most :data:`PLOTTED_HOSTS`."""
    plots: dict[str, BurninPlot] = {}
    for record in records:
        series = record.get("series")
        if record.get("metric") != "burnin" or not isinstance(series, dict) or not series.get("t_s"):
            continue
        host = str(record.get("host"))
        plot = plots.setdefault(host, BurninPlot(host, "PASS", {}))
        gpu = record.get("gpu")
        plot.series[f"GPU {gpu}" if gpu is not None else f"rank {record.get('rank')}"] = series
        if record.get("verdict") in SEVERITY:
            plot.status = worst([plot.status, str(record["verdict"])])
    ordered = sorted(plots.values(), key=lambda p: (-SEVERITY.get(p.status, 0), natural_key(p.host)))
    return ordered[:PLOTTED_HOSTS]
