"""The report's fabric chapter: every NIC's RDMA write bandwidth, hosts × rails, and what was named.

Built from results.json ``fabric`` (:mod:`diagnose.probes.perftest`): per NIC a record with its best
pairing's Gb/s, its share of the port's line rate and its verdict; per slow cable a ``link`` record; per
rail its median; per pair the rails together against one at a time; latencies; the stage's summary.
The heat map (hosts × rails, coloured by the share of line rate) is drawn by the HTML renderer from
:attr:`FabricView.ratios`, so this module stays free of matplotlib; its rows are numbered like the table's,
because names from the results never go into a plot.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from diagnose.core.model import SEVERITY
from diagnose.core.units import counted, duration, human_bytes, is_number, number, percent
from diagnose.render.hostlist import natural_key
from diagnose.render.text import count_of

#: Up to this many hosts every host gets a table row; beyond, only hosts with a finding (the heat map
#: keeps all of them).
ALL_ROWS_UP_TO = 64


@dataclass
class NicCell:
    text: str
    ratio: str
    status: str
    why: str


@dataclass
class HostRow:
    number: int
    host: str
    worst: str
    cells: list[NicCell | None]


@dataclass
class Line:
    """One row of a small table: its words and its status."""

    cells: list[str]
    status: str


@dataclass
class FabricView:
    rails: list[str]
    rows: list[HostRow]
    ratios: list[list[float | None]]
    rail_lines: list[Line]
    links: list[Line]
    together: list[Line]
    latency: list[Line]
    facts: list[str]
    hidden: int = 0
    svg: str = ""
    notes: list[str] = field(default_factory=list)


def _records(results: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    found = results.get("fabric")
    if not isinstance(found, list):
        return []
    return [r for r in found if isinstance(r, dict) and r.get("kind") == kind]


def _status(value: Any) -> str:
    return value if value in SEVERITY else "SKIP"


def _rail_labels(nics: list[dict[str, Any]]) -> list[str]:
    rails = sorted({int(r["rail"]) for r in nics if isinstance(r.get("rail"), int)})
    labels = []
    for rail in rails:
        hcas = sorted({str(r.get("hca")) for r in nics if r.get("rail") == rail})
        labels.append(f"rail {rail} ({hcas[0]})" if len(hcas) == 1 else f"rail {rail}")
    return labels


def _facts(summary: dict[str, Any] | None) -> list[str]:
    if not summary:
        return []
    facts = [
        counted(len(summary.get("hosts") or []), "host"),
        f"{human_bytes(summary['message_bytes'])} messages"
        if is_number(summary.get("message_bytes"))
        else "",
        f"{summary.get('duration_s')} s each way" if summary.get("duration_s") else "",
        f"GPUDirect on {counted(len(summary.get('gpudirect_hosts') or []), 'host')}, host memory elsewhere",
        f"{count_of(summary.get('rounds'), 'round')}, {count_of(summary.get('launches'), 'pair launch', 'pair launches')}, "
        f"{duration(summary.get('seconds'))}",
        f"line-rate floor {summary.get('min_nic_bw_fraction')} × the port's rate",
    ]
    return [f for f in facts if f]


def build_fabric(results: dict[str, Any]) -> FabricView | None:
    """The chapter's view model, or None when the run has no fabric records."""
    nics = [
        r
        for r in _records(results, "nic")
        if isinstance(r.get("host"), str) and isinstance(r.get("rail"), int)
    ]
    summary = next(iter(_records(results, "summary")), None)
    if not nics and summary is None:
        return None
    labels = _rail_labels(nics)
    rails = sorted({int(r["rail"]) for r in nics})
    by_host: dict[str, dict[int, dict[str, Any]]] = {}
    for record in nics:
        by_host.setdefault(record["host"], {})[record["rail"]] = record
    rows, ratios = [], []
    for index, host in enumerate(sorted(by_host, key=natural_key), start=1):
        cells: list[NicCell | None] = []
        line: list[float | None] = []
        for rail in rails:
            record = by_host[host].get(rail)
            if record is None:
                cells.append(None)
                line.append(None)
                continue
            partners = ", ".join(
                f"{p.get('host')} {number(p.get('gbps'), 0)}"
                for p in record.get("partners") or []
                if isinstance(p, dict)
            )
            cells.append(
                NicCell(
                    number(record.get("gbps"), 0),
                    percent(record.get("ratio")),
                    _status(record.get("verdict")),
                    f"{record.get('hca')}: Gb/s with {partners}" if partners else str(record.get("hca")),
                )
            )
            line.append(float(record["ratio"]) if is_number(record.get("ratio")) else None)
        statuses = [c.status for c in cells if c is not None]
        worst = max(statuses, key=lambda s: SEVERITY[s]) if statuses else "SKIP"
        rows.append(HostRow(index, host, worst, cells))
        ratios.append(line)
    hidden = 0
    if len(rows) > ALL_ROWS_UP_TO:
        flagged = [r for r in rows if r.worst not in ("PASS", "SKIP")]
        hidden, rows = len(rows) - len(flagged), flagged
    rail_lines = [
        Line(
            [
                f"rail {r.get('rail')}",
                number(r.get("pairs"), 0),
                number(r.get("median_gbps"), 0),
                number(r.get("mad_gbps"), 1),
                number(r.get("line_rate_gbps"), 0),
                number(r.get("floor_gbps"), 0),
            ],
            _status(r.get("verdict")),
        )
        for r in _records(results, "rail")
    ]
    links = [
        Line(
            [
                " ↔ ".join(
                    f"{h} {c}" for h, c in zip(r.get("hosts") or [], r.get("hcas") or [], strict=False)
                ),
                f"rail {r.get('rail')}",
                number(r.get("gbps"), 0),
                number(r.get("line_rate_gbps"), 0),
            ],
            _status(r.get("verdict")),
        )
        for r in _records(results, "link")
    ]
    together = [
        Line(
            [
                " ↔ ".join(r.get("hosts") or []),
                number(r.get("single_gbps"), 0),
                number(r.get("together_gbps"), 0),
                percent(r.get("ratio")),
            ],
            _status(r.get("verdict")),
        )
        for r in _records(results, "together")
        if r.get("verdict") != "PASS"
    ]
    latency = [
        Line(
            [
                " → ".join(
                    f"{h} {c}" for h, c in zip(r.get("hosts") or [], r.get("hcas") or [], strict=False)
                ),
                f"rail {r.get('rail')}",
                number(r.get("typical_us"), 2),
                number(r.get("p99_us"), 2),
                number(r.get("bound_us"), 1),
            ],
            _status(r.get("verdict")),
        )
        for r in _records(results, "latency")
    ]
    notes = [str(n) for n in (summary or {}).get("not_measured") or []]
    return FabricView(
        rails=labels,
        rows=rows,
        ratios=ratios,
        rail_lines=rail_lines,
        links=links,
        together=together,
        latency=latency,
        facts=_facts(summary),
        hidden=hidden,
        notes=notes,
    )
