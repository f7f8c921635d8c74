"""The controller's side of the sweep's early stop: the floors it hands the shipped program, and the verdict's
words when the program stopped before its largest size.

The rule itself runs on the hosts (:func:`diagnose.shipped.collective_bench.stop_after`): after each size it
knows at once, and a transport fallback (NET/Socket where NVLink or RDMA was expected, 100× slower) costs
seconds instead of minutes. The floor is the bottom of the normal range the verdict judges against
(:mod:`diagnose.benchmarks.expect`), so the stop can only ever confirm a FAIL the full sweep would give.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from diagnose.benchmarks.expect import LARGE_BYTES, busbw_override, expected_busbw
from diagnose.core.units import decimal_bytes, human_bytes
from diagnose.core.vars import Vars


def floors_arg(host_vars: Vars, backend: str, collectives: Sequence[str], nodes: int, nproc: int) -> str:
    """The program's ``--floors``: per collective, the bottom of the range it is judged by.

    gloo is never judged against the profile, so it gets a floor only where the operator set one
    (``expected_busbw_<collective>_gbps``); NCCL without a profile figure gets none: nothing stops early.
    """
    floors = []
    for collective in collectives:
        expectation = expected_busbw(collective, nodes, nproc, host_vars)
        explicit = busbw_override(host_vars, collective, nodes) is not None
        if expectation.low_gbps and (backend == "nccl" or explicit):
            floors.append(f"{collective}={expectation.low_gbps:g}")
    return ",".join(floors)


def stopped_of(rows: Sequence[dict[str, Any]], collective: str) -> dict[str, Any] | None:
    """The ``stopped`` note of the row after which ``collective``'s sweep stopped, or None."""
    return next((r["stopped"] for r in rows if r.get("collective") == collective and "stopped" in r), None)


def stopped_sentence(stopped: dict[str, Any]) -> str:
    """Why a sweep stopped before its largest size, as the verdict says it."""
    skipped = stopped["skipped_bytes"]
    left_out = human_bytes(skipped[0]) + (f"–{human_bytes(skipped[-1])}" if len(skipped) > 1 else "")
    share = stopped["busbw_gbps"] / stopped["floor_gbps"]
    return (
        f"stopped early: {stopped['busbw_gbps']:.3g} GB/s at {human_bytes(stopped['after_bytes'])} is "
        f"{share:.1%} of the floor {stopped['floor_gbps']:g} GB/s (below a tenth at two sizes, and no larger "
        f"size could reach it: {stopped['plateau_gbps']:.3g} GB/s at any size); larger sizes ({left_out}) "
        "skipped"
    )


def stopped_sweeps(records: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The sweep's collectives that stopped early, each with its ``stopped_early`` note.

    The probes after the sweep read it: a transport the sweep found at a hundredth of its floor would make
    each of them spend minutes on sizes and repetitions meant for a healthy one.
    """
    return {c: r["stopped_early"] for c, r in records.items() if r.get("stopped_early")}


def probe_bytes(records: dict[str, dict[str, Any]], planned: int) -> tuple[int, str | None]:
    """The size a probe after the sweep moves per launch, and why it is smaller than ``planned`` if it is.

    Where the sweep stopped early, no size beyond its last one is worth moving: the probe uses that one
    (the smallest over the collectives that stopped), so it costs what the sweep's last row cost.
    """
    stopped = stopped_sweeps(records)
    if not stopped:
        return planned, None
    collective, note = min(stopped.items(), key=lambda item: item[1]["after_bytes"])
    size = min(planned, int(note["after_bytes"]))
    if size >= planned:
        return planned, None
    return size, (
        f"measured at {human_bytes(size)}, not {human_bytes(planned)}: the sweep's {collective} stopped early "
        f"there ({note['busbw_gbps']:.3g} GB/s against the floor {note['floor_gbps']:g} GB/s)"
    )


#: Timed repetitions a probe keeps per row on a transport the sweep stopped early on: enough for a median.
BROKEN_SAMPLES = 3


def probe_samples(records: dict[str, dict[str, Any]], planned: int) -> tuple[int, str | None]:
    """The least repetitions a probe after the sweep times per row, and why it is fewer than ``planned``.

    A probe sized for a healthy transport insists on ``planned`` samples whatever they cost (20 KV transfers
    of 10 GB: a minute per row at NET/Socket's 3 GB/s); where the sweep stopped early, a median of
    ``BROKEN_SAMPLES`` gives the figure the verdict needs.
    """
    stopped = stopped_sweeps(records)
    if not stopped or planned <= BROKEN_SAMPLES:
        return planned, None
    collective, note = next(iter(stopped.items()))
    return BROKEN_SAMPLES, (
        f"at least {BROKEN_SAMPLES} samples per row, not {planned}: the sweep's {collective} stopped early "
        f"({note['busbw_gbps']:.3g} GB/s against the floor {note['floor_gbps']:g} GB/s)"
    )


#: Seconds one message of a probe after the sweep may take at the figure a stopped sweep measured.
BROKEN_MESSAGE_S = 0.5


def probe_sizes(
    records: dict[str, dict[str, Any]], sizes: Sequence[int], seconds: float = BROKEN_MESSAGE_S
) -> tuple[list[int], str | None]:
    """The message sizes (bytes, as planned) a probe after the sweep keeps, and why it keeps fewer.

    Where the sweep stopped early, a size that would take more than ``seconds`` per message at the busbw
    it measured there is left out (the smallest is always kept): a KV request of 10.7 GB takes 3 s per
    transfer on NET/Socket, and the probe repeats it dozens of times per method. The busbw of a collective
    stands in for a point-to-point send's rate (on the lent 4× H200 over NET/Socket: 3.1 GB/s against a
    plain send/recv's 3.5): close enough to size a budget, never used as a figure.
    """
    stopped = stopped_sweeps(records)
    if not stopped or not sizes:
        return list(sizes), None
    collective, note = min(stopped.items(), key=lambda item: item[1]["busbw_gbps"])
    limit = seconds * float(note["busbw_gbps"]) * 1e9
    kept = [size for size in sizes if size <= limit] or [min(sizes)]
    if len(kept) == len(sizes):
        return list(sizes), None
    return kept, (
        f"sizes above {decimal_bytes(limit)} left out ({len(sizes) - len(kept)} of {len(sizes)}): at the "
        f"{note['busbw_gbps']:.3g} GB/s the sweep's {collective} stopped at, each would take over {seconds:g} s"
    )


def between_nodes_gbps(records: dict[str, dict[str, Any]]) -> tuple[str, float] | None:
    """The slowest multi-node collective of the sweep by the best busbw it reached at bandwidth-bound sizes
    (LARGE_BYTES and up, as the verdict reads it), or None: a sweep of small sizes measures latency, which
    says nothing of how long a large transfer takes."""
    best = {}
    for collective, record in records.items():
        rows = [
            row["busbw_gbps"]
            for row in record.get("rows") or []
            if row.get("busbw_gbps") and (row.get("bytes") or 0) >= LARGE_BYTES
        ]
        if (record.get("nodes") or 0) >= 2 and rows:
            best[collective] = max(rows)
    return min(best.items(), key=lambda item: item[1]) if best else None


def between_nodes_sizes(
    records: dict[str, dict[str, Any]], sizes: Sequence[int], seconds: float = BROKEN_MESSAGE_S
) -> tuple[list[int], str | None]:
    """The message sizes a probe across nodes keeps at the rate the sweep measured between the nodes.

    A fabric without RDMA (host sockets, 4.6 GB/s busbw between two hosts on a lent 4× H200 split in two)
    is no fault where the profile expects none, but a KV request of 10.7 GB takes 2.7 s a transfer there,
    and the probe repeats each dozens of times: 5 minutes of a 9-minute run. At a healthy RDMA fabric's
    rate nothing is left out (0.5 s carries 20 GB at 40 GB/s, more than the largest request).
    """
    measured = between_nodes_gbps(records)
    if measured is None or not sizes:
        return list(sizes), None
    collective, gbps = measured
    limit = seconds * gbps * 1e9
    kept = [size for size in sizes if size <= limit] or [min(sizes)]
    if len(kept) == len(sizes):
        return list(sizes), None
    return kept, (
        f"across nodes, sizes above {decimal_bytes(limit)} left out ({len(sizes) - len(kept)} of {len(sizes)}): "
        f"at the {gbps:.3g} GB/s the sweep's {collective} reached between the nodes, each would take over "
        f"{seconds:g} s"
    )
