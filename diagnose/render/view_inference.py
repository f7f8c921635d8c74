"""The report's inference chapter: KV-cache transfer per pair, request length and method, the verdicts of
checklist section 5, and a serving benchmark's result when one was given (``diagnose trace --serving``).

Reads only results.json (its ``inference`` list and the ``infer.*`` checks), so ``diagnose report``
re-renders it for any old run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from diagnose.catalog.stage_ids import INFER_SERVING, KV_TRANSFER
from diagnose.core.units import MISSING, decimal_bytes, gbps, is_number, number, tokens_label

VERDICT_IDS = (*KV_TRANSFER, INFER_SERVING)
METHOD_NAMES = {"block": "block by block", "packed": "packed", "staged": "staged via host"}
#: A packed row's parts as the program records them (``parts``), each with the reference it is held to.
PARTS = (
    ("pack", "gather (prefill GPU)", "device copy", "copy_gbps"),
    ("wire", "message", "plain send/recv", "plain_gbps"),
    ("unpack", "scatter (decode GPU)", "device copy", "copy_gbps"),
)


def _ms(us: Any) -> str:
    """A latency the probe records in µs, shown in ms (the unit of the chapter's columns)."""
    return number(us / 1000 if isinstance(us, int | float) else None, 3)


@dataclass
class RowView:
    request: str
    size: str
    method: str
    samples: int
    p50: str
    p99: str
    max: str
    gbps: str
    tail: str
    note: str
    wrong: bool
    first: bool  # first row of its request length: the length is shown once


@dataclass
class PartView:
    """One part of a packed request beside its reference: the chapter shows the link's share apart from
    the gather and scatter around it."""

    request: str
    part: str
    p50: str
    gbps: str
    reference: str
    reference_gbps: str
    share: str
    first: bool


@dataclass
class PairView:
    pair: str
    link: str
    transport: str
    roles: str
    env: str
    outcome: str
    message: str
    rows: list[RowView] = field(default_factory=list)
    parts: list[PartView] = field(default_factory=list)


@dataclass
class VerdictView:
    id: str
    status: str
    message: str


@dataclass
class ServingView:
    file: str
    model: str
    status: str
    message: str
    totals: list[tuple[str, str]]
    metrics: list[tuple[str, list[tuple[str, str]]]]


@dataclass
class InferenceView:
    model: str
    backend: str
    pairs: list[PairView]
    verdicts: list[VerdictView]
    serving: list[ServingView]


def _row(row: dict[str, Any], first: bool) -> RowView:
    notes = []
    if row.get("host_copy_gbps"):
        notes.append(
            f"D2H {_ms(row.get('d2h_us'))} · host hop {_ms(row.get('hop_us'))} · H2D {_ms(row.get('h2d_us'))} ms; "
            f"host copy {gbps(row['host_copy_gbps'])}"
        )
    if row.get("method") == "block" and row.get("blocks"):
        notes.append(f"{row['blocks']} blocks, {number(row['p50_us'] / row['blocks'], 1)} µs each")
    p50 = row.get("p50_us") or 0.0
    return RowView(
        request=tokens_label(int(row["tokens"])),
        size=decimal_bytes(int(row["bytes"])),
        method=METHOD_NAMES.get(str(row.get("method")), str(row.get("method"))),
        samples=int(row.get("samples") or 0),
        p50=_ms(row.get("p50_us")),
        p99=_ms(row.get("p99_us")),
        max=_ms(row.get("max_us")),
        gbps=number(row.get("gbps", 0.0), 1),
        tail=number(row["p99_us"] / p50, 2) if p50 and row.get("p99_us") else MISSING,
        note="; ".join(notes),
        wrong=bool(row.get("wrong")),
        first=first,
    )


def _parts(row: dict[str, Any]) -> list[PartView]:
    """A packed row's parts (rows of results.json from before issue 33 have none: nothing to show)."""
    parts = row.get("parts")
    if not isinstance(parts, dict):
        return []
    views = []
    for key, name, reference, reference_key in PARTS:
        part = parts.get(key)
        if not isinstance(part, dict):
            continue
        value, base = part.get("gbps"), part.get(reference_key)
        share = value / base if is_number(value) and is_number(base) and base else None
        views.append(
            PartView(
                request=tokens_label(int(row["tokens"])),
                part=name,
                p50=_ms(part.get("p50_us")),
                gbps=number(value, 1),
                reference=reference,
                reference_gbps=number(base, 1),
                share=number(share, 2, unit="×"),
                first=not views,
            )
        )
    return views


def _pair(record: dict[str, Any]) -> PairView:
    rows, parts, seen = [], [], set()
    for row in sorted(record.get("rows") or [], key=lambda r: (r.get("tokens", 0), str(r.get("method")))):
        rows.append(_row(row, row.get("tokens") not in seen))
        seen.add(row.get("tokens"))
        parts.extend(_parts(row))
    env = ", ".join(f"{k}={v}" for k, v in (record.get("env") or {}).items())
    transport = "/".join(record.get("transport") or []) or MISSING
    if record.get("gdrdma") is not None:
        transport += " (GPUDirect RDMA)" if record["gdrdma"] else " (no GPUDirect RDMA)"
    return PairView(
        pair=str(record.get("pair")),
        link=str(record.get("link")),
        transport=transport,
        roles=", ".join(record.get("roles") or []),
        env=env,
        outcome=str(record.get("outcome")),
        message=str(record.get("message") or ""),
        rows=rows,
        parts=parts,
    )


def _serving(record: dict[str, Any]) -> ServingView:
    totals = []
    for key, label in (
        ("completed", "completed"),
        ("failed", "failed"),
        ("request_rate", "request rate (req/s)"),
        ("max_concurrency", "max concurrency"),
        ("request_throughput", "requests/s"),
        ("output_throughput", "output tokens/s"),
        ("duration", "duration (s)"),
    ):
        value = record.get(key)
        if value is not None:
            totals.append((label, number(value, 2) if isinstance(value, float) else str(value)))
    metrics = []
    for name, stats in (record.get("metrics") or {}).items():
        metrics.append((name.upper(), [(stat, number(value, 1)) for stat, value in stats.items()]))
    return ServingView(
        file=str(record.get("file")),
        model=str(record.get("model_id") or MISSING),
        status=str(record.get("status")),
        message=str(record.get("message") or ""),
        totals=totals,
        metrics=metrics,
    )


def build_inference(results: dict[str, Any]) -> InferenceView | None:
    """The chapter's data, or None when the run measured no KV transfer and judged no serving result."""
    entries = [e for e in results.get("inference") or [] if isinstance(e, dict)]
    transfers = [e for e in entries if e.get("kind") == "kv_transfer"]
    serving = [e for e in entries if e.get("kind") == "serving"]
    verdicts = [
        VerdictView(str(c["id"]), str(c.get("status")), str(c.get("message") or ""))
        for c in results.get("checks") or []
        if c.get("id") in VERDICT_IDS
    ]
    if not transfers and not serving and not verdicts:
        return None
    model = ""
    if transfers:
        shape = transfers[0].get("model") or {}
        per_token = transfers[0].get("bytes_per_token")
        model = (
            f"{shape.get('layers')} layers × {shape.get('kv_heads')} KV heads × head dim {shape.get('head_dim')}, "
            f"{shape.get('dtype')}, {shape.get('block_tokens')} tokens per block"
            + (f" ({number(per_token / 1024, 0, unit=' KiB')} per token)" if per_token else "")
        )
    return InferenceView(
        model=model,
        backend=str(transfers[0].get("backend")) if transfers else "",
        pairs=[_pair(t) for t in transfers],
        verdicts=verdicts,
        serving=[_serving(s) for s in serving],
    )
