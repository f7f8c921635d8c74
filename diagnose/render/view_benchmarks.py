"""The benchmarks chapter: each collective's verdict, sweep and transport, as the run recorded them.

The verdict, its message, the expected busbw, the normal range and the size from which busbw was judged
are read from the benchmark entry, never worked out again here: a report rendered next year from an old
results.json shows what the run decided then, not what today's rules would say. Where an older file lacks
a figure, the report shows none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from diagnose.catalog.stage_ids import BENCH_STRAGGLER, bench_id
from diagnose.core.model import SEVERITY, SHOWN
from diagnose.core.units import MISSING, human_bytes, is_number, number
from diagnose.render.checklist import curve_shape
from diagnose.render.hostlist import summarize
from diagnose.render.tally import shown_only
from diagnose.render.text import MESSAGE_CHARS, count_of, host_label, show

#: The most straggler verdicts a benchmark lists line by line, the worst first.
STRAGGLER_LINES = 12


@dataclass
class BenchRow:
    size: str
    bytes: int
    time_us: str
    algbw: str
    busbw: str
    wrong: str
    wrong_bad: bool
    below: bool  # a size the verdict judged, under the recorded normal range


@dataclass
class Benchmark:
    index: int
    collective: str
    status: str
    message: str
    tool: str
    backend: str
    #: As results.json records them, for the report's ``counted`` filter (MISSING where absent).
    nodes: int | None
    ranks: int | None
    hosts: str
    expected: float | None
    normal: tuple[float, float] | None  # the normal range the run recorded
    judged_from: str  # the smallest size the verdict read busbw at, as recorded; "" when not recorded
    reference: str  # what busbw was measured against, in the run's recorded figures
    peak: str
    inter_node: str
    intra_node: str
    gdrdma: str
    straggler: list[str]
    curve: tuple[str, str]
    rows: list[BenchRow]
    raw_rows: list[dict[str, Any]]
    shared_gpu: str = ""  # why the figures describe a shared GPU, as the run recorded it; "" when not
    svg: str = ""  # filled in by the HTML renderer, which owns the plotting


def _straggler(bench: dict[str, Any], stragglers: list[dict[str, Any]]) -> list[str]:
    """The pair search's verdicts (``stragglers``: the ``bench.straggler`` checks) that concern this
    benchmark's collective, worst first. Past :data:`STRAGGLER_LINES` one line counts the rest: each verdict
    is a result of its own under the findings and in the matrix, and a search over thousands of hosts may
    name hundreds (a page and a half of the PDF for each collective they were slow in)."""
    collective = str(bench.get("collective", ""))
    mine = [row for row in stragglers if collective and collective in str(row.get("message") or "")]
    mine.sort(key=lambda row: -SEVERITY.get(str(row.get("status")), 0))
    lines = [
        f"{host_label(row.get('host'))} ({row.get('status')}): {show(row.get('message') or '', MESSAGE_CHARS)}"
        for row in mine[:STRAGGLER_LINES]
    ]
    rest = len(mine) - len(lines)
    if rest:
        lines.append(
            f"and {count_of(rest, 'more host')} the pair search judged in {collective}: "
            "each is a bench.straggler result under the findings and in the matrix"
        )
    return lines


def _hosts(bench: dict[str, Any], folded: dict[tuple[str, ...], str]) -> str:
    """The benchmark's hosts folded into ranges, each distinct list folded once."""
    hosts = tuple(str(h) for h in bench.get("hosts") or [])
    if hosts not in folded:
        folded[hosts] = summarize(hosts) or MISSING
    return folded[hosts]


def _shared_gpu(bench: dict[str, Any]) -> str:
    """The line a benchmark measured beside foreign compute processes carries (``shared_gpu``)."""
    if bench.get("shared_gpu") is not True:
        return ""
    hosts = summarize(str(h) for h in bench.get("shared_gpu_hosts") or []) or "a host"
    return (
        f"Measured while compute processes diagnose did not start held GPUs of {hosts} (see gpu.processes): "
        "these figures describe a shared GPU, not the node."
    )


def _normal_range(bench: dict[str, Any]) -> tuple[float, float] | None:
    """The normal busbw range the run recorded; None when it recorded none (gloo, no profile, old file)."""
    recorded = bench.get("normal_range_gbps")
    if isinstance(recorded, list) and len(recorded) == 2 and all(is_number(v) for v in recorded):
        return float(recorded[0]), float(recorded[1])
    return None


def _judged_from(bench: dict[str, Any]) -> int | None:
    """The smallest size whose busbw the verdict read, as recorded (``judged_from_bytes``); older files: None."""
    recorded = bench.get("judged_from_bytes")
    return recorded if isinstance(recorded, int) and not isinstance(recorded, bool) and recorded > 0 else None


def _reference(expected: float | None, normal: tuple[float, float] | None, judged_from: int | None) -> str:
    """The expected busbw and normal range of the run, in its own figures; says so when it recorded none."""
    parts = []
    if expected is not None:
        parts.append(f"expected {number(expected, 1)} GB/s")
    if normal is not None:
        since = f" from {human_bytes(judged_from)}" if judged_from is not None else ""
        parts.append(f"normal range {number(normal[0], 0)}–{number(normal[1], 0)} GB/s{since}")
    return " · ".join(parts) or "no expected value"


def _below(row: dict[str, Any], normal: tuple[float, float] | None, judged_from: int | None) -> bool:
    busbw = row.get("busbw_gbps")
    return (
        normal is not None
        and judged_from is not None
        and is_number(busbw)
        and isinstance(row.get("bytes"), int)
        and row["bytes"] >= judged_from
        and busbw < normal[0]
    )


def _row(row: dict[str, Any], normal: tuple[float, float] | None, judged_from: int | None) -> BenchRow:
    size = row.get("bytes")
    return BenchRow(
        size=human_bytes(size) if isinstance(size, int) else show(size),
        bytes=size if isinstance(size, int) else 0,
        time_us=number(row.get("time_us"), 1, grouped=True),
        algbw=number(row.get("algbw_gbps"), grouped=True),
        busbw=number(row.get("busbw_gbps"), grouped=True),
        wrong=show(row.get("wrong")),
        wrong_bad=isinstance(row.get("wrong"), int) and row["wrong"] > 0,
        below=_below(row, normal, judged_from),
    )


def _inter_node(bench: dict[str, Any], transport: dict[str, Any]) -> str:
    """What carried the traffic between nodes: NCCL's log says it; gloo writes none and always uses TCP."""
    if transport.get("inter_node"):
        return str(transport["inter_node"])
    if bench.get("backend") == "gloo" and is_number(bench.get("nodes")) and bench["nodes"] > 1:
        return "TCP (gloo; NCCL not used)"
    return "none (single node or not seen in the log)"


def _count(value: Any) -> int | None:
    return int(value) if is_number(value) else None


def build_benchmarks(results: dict[str, Any]) -> list[Benchmark]:
    """One view per benchmark entry, in the order the run measured them."""
    # Picked once, not once per benchmark: at 16,384 hosts the checks are some 230,000 rows.
    stragglers = [row for row in results.get("checks") or [] if row.get("id") == BENCH_STRAGGLER]
    shown = {
        row.get("id") for row in results.get("checks") or [] if row.get("host") is None and shown_only(row)
    }
    folded: dict[tuple[str, ...], str] = {}  # the sweeps of one run mostly share their host list
    out = []
    for index, bench in enumerate(results.get("benchmarks") or [], start=1):
        raw_rows = [r for r in bench.get("rows") or [] if isinstance(r, dict)]
        raw_rows.sort(key=lambda r: r.get("bytes") if isinstance(r.get("bytes"), int) else -1)
        busbws = [r["busbw_gbps"] for r in raw_rows if is_number(r.get("busbw_gbps"))]
        transport = bench.get("transport") if isinstance(bench.get("transport"), dict) else {}
        intra = transport.get("intra_node")
        gdr = transport.get("gdrdma")
        recorded = bench.get("expected_busbw_gbps")
        expected = float(recorded) if is_number(recorded) else None
        normal = _normal_range(bench)
        judged_from = _judged_from(bench) if normal is not None else None
        out.append(
            Benchmark(
                index=index,
                collective=str(bench.get("collective") or "?"),
                status=SHOWN
                if bench_id(bench.get("collective")) in shown and bench.get("status") == "PASS"
                else str(bench.get("status") or "ERROR"),
                message=show(bench.get("message") or "", MESSAGE_CHARS),
                tool=str(bench.get("tool") or MISSING),
                backend=str(bench.get("backend") or MISSING),
                nodes=_count(bench.get("nodes")),
                ranks=_count(bench.get("ranks")),
                hosts=_hosts(bench, folded),
                expected=expected,
                normal=normal,
                judged_from=human_bytes(judged_from) if judged_from is not None else "",
                reference=_reference(expected, normal, judged_from),
                peak=number(max(busbws), 1, grouped=True) if busbws else MISSING,
                inter_node=_inter_node(bench, transport),
                intra_node=", ".join(str(x) for x in intra) if isinstance(intra, list) and intra else MISSING,
                gdrdma="yes" if gdr is True else "no" if gdr is False else "unknown",
                straggler=_straggler(bench, stragglers),
                curve=curve_shape(raw_rows),
                rows=[_row(r, normal, judged_from) for r in raw_rows],
                raw_rows=raw_rows,
                shared_gpu=_shared_gpu(bench),
            )
        )
    return out
