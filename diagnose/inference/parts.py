"""A packed KV transfer in its parts, each held to its own reference (``infer.kv_transfer``).

The shipped program (:mod:`diagnose.shipped.kv_probe`) times a packed request's gather on the prefill GPU,
its message and its scatter on the decode GPU apart, and beside them, in the same repetitions, a contiguous
copy of the same bytes on each GPU and one plain send/recv of them between the same two GPUs. A request's
latency is the sum of the three, but only the message is the link's: a figure that mixed them read a healthy
NVLink pair as 28 % slower than NCCL moves the same bytes (the lent 4× H200 of issue 33). The rules:

* the message is the transfer. The judge holds it to the pair's link figure; here it is held to the plain
  send/recv measured alongside, and below ``plain_min_fraction`` of it (0.85) it WARNs: the probe's path
  lost bandwidth NCCL has on that pair (contention on its GPUs, another transport), so the figure is not the
  link's;
* a gather or a scatter of whole blocks reads and writes each byte once, as a contiguous copy does: below
  ``copy_min_fraction`` (0.5) of the copy on the same GPU it WARNs, since the gather (or scatter), not the
  link, then sets the request's latency.

Rows of older results.json have no parts: their transfer is the whole row (gather and scatter included).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from diagnose.core.units import significant

PARTS = ("pack", "wire", "unpack")
#: What each part is called in messages, and what it is compared with.
NAMES = {"pack": "gathering the blocks on the prefill GPU", "unpack": "scattering them on the decode GPU"}


def parts_of(row: Mapping[str, Any]) -> Mapping[str, Mapping[str, Any]] | None:
    """The row's parts where the program measured them (packed rows since issue 33), else None."""
    parts = row.get("parts")
    if isinstance(parts, Mapping) and all(isinstance(parts.get(name), Mapping) for name in PARTS):
        return parts
    return None


def transfer_gbps(row: Mapping[str, Any]) -> float:
    """What the link carried: the message alone where the row has parts, else the whole row's GB/s."""
    parts = parts_of(row)
    return float(parts["wire"]["gbps"]) if parts else float(row["gbps"])


def _ms(us: float) -> str:
    return significant(us / 1000, 3, " ms")


def _ratio(value: float, reference: float) -> float:
    return value / reference if reference else float("inf")


def message_text(row: Mapping[str, Any]) -> str | None:
    """``the message alone 29 ms = 370.2 GB/s, 1.00× a plain send/recv of the same bytes (371.5 GB/s)``."""
    parts = parts_of(row)
    if parts is None:
        return None
    wire = parts["wire"]
    return (
        f"the message alone {_ms(wire['p50_us'])} = {wire['gbps']:.1f} GB/s, "
        f"{_ratio(wire['gbps'], wire['plain_gbps']):.2f}× a plain send/recv of the same bytes "
        f"({wire['plain_gbps']:.1f} GB/s)"
    )


def copies_text(row: Mapping[str, Any]) -> str | None:
    """``gather 4.9 ms (0.91× a device copy), scatter 5.1 ms (0.88×)``."""
    parts = parts_of(row)
    if parts is None:
        return None
    pack, unpack = parts["pack"], parts["unpack"]
    return (
        f"gather {_ms(pack['p50_us'])} ({_ratio(pack['gbps'], pack['copy_gbps']):.2f}× a device copy), "
        f"scatter {_ms(unpack['p50_us'])} ({_ratio(unpack['gbps'], unpack['copy_gbps']):.2f}×)"
    )


def part_findings(
    pair: str, row: Mapping[str, Any], plain_min_fraction: float, copy_min_fraction: float
) -> list[tuple[str, str]]:
    """(status, message) for each part of ``row`` below its reference; none for a row without parts."""
    parts = parts_of(row)
    if parts is None:
        return []
    findings = []
    wire = parts["wire"]
    ratio = _ratio(wire["gbps"], wire["plain_gbps"])
    if ratio < plain_min_fraction:
        findings.append(
            (
                "WARN",
                f"{pair}: the KV message alone moved {wire['gbps']:.1f} GB/s, {ratio:.2f}× a plain send/recv "
                f"of the same bytes between the same GPUs in the same run ({wire['plain_gbps']:.1f} GB/s; "
                f"limit {plain_min_fraction:g}×): the figure is not the link's (contention on the pair's GPUs, "
                "or another transport for the KV buffer)",
            )
        )
    for name in ("pack", "unpack"):
        part = parts[name]
        ratio = _ratio(part["gbps"], part["copy_gbps"])
        if ratio < copy_min_fraction:
            findings.append(
                (
                    "WARN",
                    f"{pair}: {NAMES[name]} took {_ms(part['p50_us'])} = {part['gbps']:.1f} GB/s, {ratio:.2f}× "
                    f"a contiguous copy of the same bytes on that GPU ({part['copy_gbps']:.1f} GB/s; limit "
                    f"{copy_min_fraction:g}×): the gather or scatter, not the link, sets the request's latency",
                )
            )
    return findings
