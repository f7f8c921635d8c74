"""The report's GPU stress chapter: every GPU's figures under load, the stage's timings, the burn-in plots.

Built from results.json ``stress`` (:mod:`diagnose.probes.stress`): per GPU and metric a record with the
value, its share of the model's measured reference (and of the datasheet peak, as information), the floor,
the fleet deviation and the SM clock and power the GPU reported while it ran (gpu.gemm, gpu.hbm), the memory
test's coverage and mismatches (gpu.memtest), the checksum (gpu.sdc) and the burn-in's summary and series
(gpu.burnin); per host a ``stage`` record with each phase's seconds. One row per GPU, one cell per figure,
coloured by that figure's verdict, holding the figure and at most a short note: with the reference, floor,
clocks and power in every cell, a 4-GPU table was a paragraph a cell and the figure could not be found at a
glance. What every cell of a column shares is said once, under the table (:class:`Basis`); the plots (clock
and temperature per GPU over the burn-in) are drawn by the HTML renderer from :attr:`StressView.burnin`, so
this module stays free of matplotlib.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from diagnose.catalog.stage_ids import STRESS_NO_TORCH
from diagnose.core.model import SEVERITY, worst
from diagnose.core.units import MISSING, counted, decimal_bytes, duration, is_number, number, percent
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
    ("burnin", "burn-in MHz"),
)
#: Hosts whose burn-in is plotted: those with a finding first, then in name order, up to this many.
PLOTTED_HOSTS = 8


#: The longest note a cell holds; the whole "why" is the cell's hover text and the finding's message.
NOTE_CHARS = 28


@dataclass
class Cell:
    """One figure of one GPU: the value as shown, a short note (only where the figure is not PASS: how far
    off it is), its verdict and the whole why."""

    text: str
    note: str
    status: str
    why: str


@dataclass
class Basis:
    """What one column's figures of one GPU model are judged against and how they spread over the GPUs,
    said once under the table instead of in each cell."""

    label: str
    model: str
    against: str  # "reference 682, floor 579.7; datasheet 989 (information)"
    spread: str  # "98–102 % of the reference; -1.8 to +1.4 % from the median"
    readings: str  # "SM clock 1432–1575 MHz; 437–521 W of 700 W"
    source: str = ""  # how the reference was measured, in the records' words: the browser's hover text


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
    #: Per column, a line under its label that every GPU shares ("ref 682 · floor 580"), else empty.
    headers: list[str] = field(default_factory=list)
    basis: list[Basis] = field(default_factory=list)
    #: Where the references were measured, each machine once (the first clause of each record's source).
    reference_machines: list[str] = field(default_factory=list)
    burnin: list[BurninPlot] = field(default_factory=list)
    cpu_only: bool = False
    shared_hosts: list[str] = field(default_factory=list)


def _short(note: str) -> str:
    return note if len(note) <= NOTE_CHARS else note[: NOTE_CHARS - 1].rstrip() + "…"


def _judged(record: dict[str, Any]) -> bool:
    """A figure whose verdict is worth a note in its cell: not PASS, and not a SKIP (a CPU figure, never
    judged: the chapter says so once)."""
    return str(record.get("verdict")) in ("FAIL", "WARN", "ERROR")


def _throughput(record: dict[str, Any]) -> Cell:
    value = record.get("value")
    digits = 1 if is_number(value) and value >= 10 else 3
    note = ""
    if _judged(record):
        share, peak = record.get("fraction_of_reference"), record.get("fraction_of_peak")
        if is_number(share):
            note = f"{percent(share)} of ref"
        elif is_number(peak) and "reference" not in record:
            note = f"{percent(peak)} of peak"  # judged against the datasheet, before the references
        elif is_number(record.get("deviation_pct")):
            note = f"{record['deviation_pct']:+.1f} % vs median"
    return Cell(number(value, digits), note, str(record.get("verdict")), str(record.get("why") or ""))


def _memtest(record: dict[str, Any]) -> Cell:
    tested = record.get("tested_bytes")
    text = decimal_bytes(int(tested)) if is_number(tested) else MISSING
    mismatches = record.get("mismatches")
    note = f"{mismatches} wrong" if _judged(record) and is_number(mismatches) and mismatches else ""
    return Cell(text, note, str(record.get("verdict")), str(record.get("why") or ""))


def _sdc(record: dict[str, Any]) -> Cell:
    checksum = str(record.get("checksum") or MISSING)
    reference = record.get("reference")
    note = "" if reference in (None, checksum) else "differs from the fleet"
    return Cell(checksum[:8] + "…", note, str(record.get("verdict")), str(record.get("why") or ""))


def _burnin(record: dict[str, Any]) -> Cell:
    summary = record.get("summary") or {}
    clock = f"{number(summary.get('min_sm_mhz'), 0)}/{number(summary.get('median_sm_mhz'), 0)}"
    note = ""
    if _judged(record):
        reasons = summary.get("reason_s") or {}
        worst_reason = max(reasons.items(), key=lambda item: item[1], default=None)
        note = f"{worst_reason[0]} {worst_reason[1]:g} s" if worst_reason else ""
    return Cell(clock, note, str(record.get("verdict")), str(record.get("why") or ""))


def _cell(metric: str, record: dict[str, Any]) -> Cell:
    if metric == "memtest":
        cell = _memtest(record)
    elif metric == "sdc":
        cell = _sdc(record)
    elif metric == "burnin":
        cell = _burnin(record)
    else:
        cell = _throughput(record)
    cell.note = _short(cell.note)
    return cell


def _span(values: list[float], digits: int = 0, unit: str = "") -> str:
    """``1432–1575 MHz``, or one value where all agree; empty without values."""
    if not values:
        return ""
    low, high = f"{min(values):.{digits}f}", f"{max(values):.{digits}f}"
    return (low if low == high else f"{low}–{high}") + unit


def _signed(value: float) -> str:
    """``+1.4``, ``-0.7``; a deviation that rounds to nothing is ``0.0``, never ``-0.0``."""
    return "0.0" if round(value, 1) == 0 else f"{value:+.1f}"


def _numbers(records: list[dict[str, Any]], key: str, scale: float = 1.0) -> list[float]:
    return [scale * r[key] for r in records if is_number(r.get(key))]


def _throughput_basis(label: str, model: str, records: list[dict[str, Any]]) -> Basis:
    references = {r.get("reference") for r in records}
    floors = _numbers(records, "floor")
    peaks = _numbers(records, "peak")
    against = []
    if all("reference" not in r for r in records):  # written before the measured references
        against.append(f"datasheet peak {_span(peaks, 0)}" if peaks else "")
    elif references == {None}:
        against.append("peers only (no reference measured for this GPU model)")
    else:
        against.append(f"reference {_span(_numbers(records, 'reference'), 1)}")
        if floors:
            against.append(f"floor {_span(floors, 1)}")
        if peaks:
            against.append(f"datasheet {_span(peaks, 0)} (information, not judged)")
    spread = []
    shares = _numbers(records, "fraction_of_reference", 100)
    if shares:
        spread.append(f"{_span(shares)} % of the reference")
    elif _numbers(records, "fraction_of_peak"):
        spread.append(f"{_span(_numbers(records, 'fraction_of_peak', 100))} % of the datasheet peak")
    deviations = _numbers(records, "deviation_pct")
    if deviations:
        spread.append(f"{_signed(min(deviations))} to {_signed(max(deviations))} % from the median")
    readings = []
    clocks = _numbers(records, "sm_clock_mhz")
    if clocks:
        readings.append(f"SM clock {_span(clocks, unit=' MHz')}")
    power, limits = _numbers(records, "power_w"), _numbers(records, "power_limit_w")
    if power:
        readings.append(_span(power, unit=" W") + (f" of {_span(limits, unit=' W')}" if limits else ""))
    sources = sorted({str(r["reference_source"]) for r in records if r.get("reference_source")})
    return Basis(
        label,
        model,
        ", ".join(a for a in against if a) or MISSING,
        "; ".join(spread) or MISSING,
        "; ".join(readings),
        " | ".join(sources),
    )


def _basis(label: str, metric: str, model: str, records: list[dict[str, Any]]) -> Basis:
    """One column's shared facts for one GPU model: what each cell of it used to repeat."""
    if metric == "memtest":
        passes = sorted({str(count_of(r.get("passes"), "pass", "passes")) for r in records})
        return Basis(
            label,
            model,
            "no word read back wrong",
            f"{_span(_numbers(records, 'tested_fraction', 100))} % of free memory, {' or '.join(passes)}",
            "",
        )
    if metric == "sdc":
        agree = sum(1 for r in records if r.get("reference") in (None, r.get("checksum")))
        return Basis(
            label,
            model,
            "the checksum most GPUs agree on",
            f"{agree} of {counted(len(records), 'GPU')} agree{'s' if len(records) == 1 else ''}",
            "",
        )
    if metric == "burnin":
        summaries = [r.get("summary") or {} for r in records]
        reasons: dict[str, float] = {}
        for summary in summaries:
            for name, seconds in (summary.get("reason_s") or {}).items():
                if is_number(seconds):
                    reasons[name] = max(reasons.get(name, 0.0), seconds)
        heat = [
            _span(_numbers(summaries, "max_temp_c"), unit=" °C"),
            _span(_numbers(summaries, "max_power_w"), unit=" W"),
        ]
        return Basis(
            label,
            model,
            "no hardware clock brake or uncorrectable ECC error under load; SW power cap is shown, not judged",
            "max " + ", ".join(h for h in heat if h) if any(heat) else MISSING,
            "clock events: " + ", ".join(f"{name} up to {seconds:g} s" for name, seconds in reasons.items())
            if reasons
            else "",
        )
    return _throughput_basis(label, model, records)


def _header(metric: str, records: list[dict[str, Any]]) -> str:
    """``ref 682 · floor 580`` under a throughput column's label when every GPU of the run shares them."""
    if metric == "burnin":
        return "SM min/median"
    if metric in ("memtest", "sdc"):
        return ""
    references = {r.get("reference") for r in records}
    floors = {r.get("floor") for r in records}
    if len(references) != 1 or len(floors) != 1:
        return "see below" if any(is_number(r.get("reference")) for r in records) else ""
    (reference,), (floor,) = references, floors
    if not is_number(reference):
        return ""
    return f"ref {reference:g}" + (f" · floor {floor:.1f}" if is_number(floor) else "")


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
    by_column = {
        m: [(names[key], cells[m]) for key, cells in sorted(by_gpu.items()) if m in cells] for m, _ in metrics
    }
    basis = [
        _basis(label, m, model, [r for name, r in by_column[m] if name == model])
        for m, label in metrics
        for model in sorted({name for name, _ in by_column[m]})
    ]
    return StressView(
        labels=[label for _, label in metrics],
        rows=rows,
        stages=sorted(stages, key=lambda s: natural_key(s.host)),
        headers=[_header(m, [r for _, r in by_column[m]]) for m, _ in metrics],
        basis=basis,
        reference_machines=sorted(
            {str(r["reference_source"]).split(";")[0] for r in records if r.get("reference_source")}
        ),
        burnin=_plots(records),
        cpu_only=all(s.device == "cpu" for s in stages) if stages else False,
        shared_hosts=sorted(shared, key=natural_key),
    )


def stress_measured(data: StressView) -> bool:
    """Whether the chapter has anything to show: figures of a GPU, or a launch that started (a failed one
    says how it ended). Hosts whose Python could not import torch never started it; their cause says why."""
    return bool(data.rows) or any(stage.status != STRESS_NO_TORCH for stage in data.stages)


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
