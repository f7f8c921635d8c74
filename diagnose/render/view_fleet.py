"""The report's fleet chapter: every host against its peers, one column per measured figure.

Built from results.json ``fleet`` (:mod:`diagnose.probes.fleet`): per host and metric a record with
the value, its group's median, MAD, robust z and verdict; per metric and group a summary (``host`` null).
The table shows the deviation from the median, so "is 52 GB/s normal here?" reads as "−6 % against 55
GB/s on 16 identical hosts"; odd hosts are coloured. On a large fleet only the hosts with a finding are
listed (every one of them), the rest are counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from diagnose.core.model import SEVERITY, SHOWN, worst
from diagnose.core.units import number, signed
from diagnose.render.hostlist import natural_key
from diagnose.render.tally import shown_only

#: Up to this many hosts every host gets a row; beyond, only hosts with a finding do.
ALL_ROWS_UP_TO = 64
_LABELS = {
    "h2d": "host→device",
    "d2h": "device→host",
    "peer": "GPU peer",
    "memcpy": "memory copy",
}


def metric_label(metric: str) -> str:
    if metric.startswith("busbw."):
        return f"{metric[len('busbw.') :]} busbw"
    return _LABELS.get(metric, metric)


@dataclass
class Cell:
    """One host's figure for one metric: value, deviation from its group's median, robust z, verdict."""

    value: str
    deviation: str
    z: str
    status: str
    why: str
    where: str


@dataclass
class Row:
    host: str
    group: str
    worst: str
    cells: list[Cell | None]


@dataclass
class Summary:
    """One metric over one peer group."""

    metric: str
    group: str
    hosts: str
    median: str
    mad: str
    floor: str
    status: str
    message: str


@dataclass
class FleetView:
    metrics: list[str]
    labels: list[str]
    rows: list[Row]
    summaries: list[Summary]
    groups: list[str]
    hidden: int = 0
    single: bool = False
    thresholds: dict[str, Any] = field(default_factory=dict)


def _weakest(detail: Any) -> str:
    """Which GPU or pair the host's figure is, when it has several."""
    rows = (
        [d for d in detail if isinstance(d, dict) and isinstance(d.get("gbps"), int | float)]
        if isinstance(detail, list)
        else []
    )
    if len(rows) < 2:
        return ""
    weakest = min(rows, key=lambda d: d["gbps"])
    return f"slowest of {len(rows)}: {weakest.get('where') or '?'}"


def _order(metric: str) -> tuple[int, str]:
    order = ("h2d", "d2h", "peer", "memcpy")
    return (0, metric) if metric.startswith("busbw.") else (1 + order.index(metric), metric)


def build_fleet(results: dict[str, Any]) -> FleetView | None:
    """The chapter's view model, or None when the run has no fleet records."""
    found = results.get("fleet")
    records = (
        [r for r in found if isinstance(r, dict) and isinstance(r.get("metric"), str)]
        if isinstance(found, list)
        else []
    )
    if not records:
        return None
    known = [m for m in {r["metric"] for r in records} if m.startswith("busbw.") or m in _LABELS]
    metrics = sorted(known, key=_order)
    per_host: dict[str, dict[str, dict[str, Any]]] = {}
    groups: dict[str, str] = {}
    summaries = []
    # A fleet result that judged no figure (too few hosts, no floor) is shown, as the tally counts it; its
    # line then carries the result's message, which says why, instead of the raw two-host WARN.
    shown = {
        str(c.get("id")): str(c.get("message") or "")
        for c in results.get("checks") or []
        if isinstance(c, dict) and c.get("host") is None and shown_only(c)
    }
    for record in records:
        if record["metric"] not in metrics:
            continue
        if record.get("host") is None:
            summaries.append(
                Summary(
                    metric_label(record["metric"]),
                    str(record.get("group") or ""),
                    number(record.get("hosts"), 0),
                    number(record.get("median"), 1),
                    number(record.get("mad"), 2),
                    number(record.get("floor"), 1),
                    SHOWN if record.get("check") in shown else str(record.get("verdict") or "SKIP"),
                    shown.get(str(record.get("check"))) or str(record.get("message") or ""),
                )
            )
            continue
        host = str(record["host"])
        per_host.setdefault(host, {})[record["metric"]] = record
        groups[host] = str(record.get("group") or "")
    rows = []
    for host, by_metric in per_host.items():
        cells: list[Cell | None] = []
        for metric in metrics:
            record = by_metric.get(metric)
            if record is None:
                cells.append(None)
                continue
            cells.append(
                Cell(
                    number(record.get("value"), 1),
                    signed(record.get("deviation_pct"), unit=" %"),
                    signed(record.get("robust_z")),
                    str(record.get("verdict") or "SKIP"),
                    str(record.get("why") or ""),
                    _weakest(record.get("detail") or []),
                )
            )
        statuses = [c.status for c in cells if c is not None and c.status in SEVERITY]
        rows.append(Row(host, groups[host], worst(statuses) if statuses else "SKIP", cells))
    rows.sort(key=lambda r: (-SEVERITY.get(r.worst, 0), natural_key(r.host)))
    hidden = 0
    if len(rows) > ALL_ROWS_UP_TO:
        flagged = [r for r in rows if r.worst not in ("PASS", "SKIP")]
        hidden, rows = len(rows) - len(flagged), flagged
    thresholds = next(
        (
            {"mad_k": r.get("mad_k"), "min_rel_dev_pct": r.get("min_rel_dev_pct")}
            for r in records
            if "mad_k" in r
        ),
        {},
    )
    return FleetView(
        metrics=metrics,
        labels=[metric_label(m) for m in metrics],
        rows=rows,
        summaries=summaries,
        groups=sorted(set(groups.values())),
        hidden=hidden,
        single=len(per_host) == 1,
        thresholds=thresholds,
    )
