"""What bus bandwidth a healthy cluster of this profile and size should reach, and the verdict on a result.

Across nodes the ceiling is the fabric: ``line_rate_gbps`` per NIC × ``expected_hca_count`` NICs per host,
in GB/s (÷ 8). The share of it that collectives reach falls with the node count, because rings and trees
get longer and more traffic crosses spine links; the seed figures are those measured on 400 Gb/s-class
fabrics — 85 % at 2 nodes, 68 % at 8, 39 % at 125 — and the curve between (and beyond) them is linear in
log(nodes). Inside one node the figure is the profile's ``nvlink_busbw_gbps``.

Between the trays of one NVL72 rack the ranks talk over NVLink through the rack's NVSwitch trays, not over the
fabric (NCCL says so: ``MNNVL 1 ... nvlDomainSize``). Such a collective is judged against the profile's
``nvlink_domain_busbw_gbps``, whatever the tray count: an NVSwitch domain is non-blocking, so busbw does not fall
with the trays as a fabric's does, and the basis names the domain's size. Ranks spread over more than one domain
(racks) are the fabric's again.

all_to_all and sendrecv do not spread over every NIC the way rings do: each rank's traffic leaves the
node through its own share of the fabric, so their ceiling is the per-rank share (for all_to_all scaled by
the fraction of peers that are off-node, the (n-1)/n busbw factor against the (n-local)/n that crosses).

A result is judged against a normal range of ± ``bench_tolerance`` (default 15 %) around the expected
value; below it is a FAIL, above it is fine, and the message always states the range so that "is 156 GB/s
at 125 nodes normal?" has an answer on the page.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from diagnose.core.errors import ConfigError
from diagnose.core.units import human_bytes
from diagnose.core.vars import Vars, source_of

SEED_EFFICIENCY: tuple[tuple[int, float], ...] = ((2, 0.85), (8, 0.68), (125, 0.39))
DEFAULT_TOLERANCE = 0.15
# Below this size latency, not bandwidth, dominates; bandwidth is judged from here up.
LARGE_BYTES = 64 << 20
_PER_RANK_SHARE = ("all_to_all", "sendrecv")


def fabric_efficiency(nodes: int) -> float:
    """Share of the fabric's line rate that large collectives reach on ``nodes`` nodes (log-linear)."""
    points = [(math.log(n), e) for n, e in SEED_EFFICIENCY]
    x = math.log(max(nodes, 2))
    if x <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    (x0, y0), (x1, y1) = points[-2], points[-1]
    return max(0.05, y1 + (y1 - y0) * (x - x1) / (x1 - x0))


@dataclass(frozen=True)
class Expectation:
    """An expected busbw with its normal range and the sentence that explains where it comes from."""

    expected_gbps: float | None
    low_gbps: float | None
    high_gbps: float | None
    basis: str

    @property
    def judged(self) -> bool:
        return self.expected_gbps is not None


def busbw_table(host_vars: Vars, name: str) -> float | dict[int, float] | None:
    """``expected_busbw_<collective>_gbps`` as set: one figure, or a figure per node count.

    A mapping in YAML (``{1: 340, 2: 4.2}``) or ``1:340,2:4.2`` in INI and ``-e``. Raises ConfigError naming
    the variable for anything else, so the run refuses it before any host is touched.
    """
    value = host_vars.get(name)
    if value is None or value == "":
        return None
    where = f" for host {host_vars.host}" if host_vars.host else ""
    if isinstance(value, str) and ":" in value:
        value = dict(item.split(":", 1) for item in value.replace(" ", "").split(",") if item)
    if isinstance(value, dict):
        try:
            table = {int(k): float(v) for k, v in value.items()}
        except (TypeError, ValueError):
            table = {}
        if not table or any(nodes < 1 or gbps <= 0 for nodes, gbps in table.items()):
            raise ConfigError(
                f"variable {name}{where} must map node counts to GB/s (YAML {{1: 340, 2: 4.2}}, or "
                f"1:340,2:4.2), got {host_vars.get(name)!r}"
            )
        return table
    figure = host_vars.float(name)
    if figure is not None and figure <= 0:
        raise ConfigError(f"variable {name}{where} must be a positive number of GB/s, got {figure!r}")
    return figure


def check_busbw_setting(host_vars: Vars, name: str) -> str | None:
    """The run's settings check (diagnose.probes.registry.HOST_SETTINGS) of one busbw override."""
    busbw_table(host_vars, name)
    return None


def busbw_override(host_vars: Vars, collective: str, nodes: int) -> tuple[float, str] | None:
    """The operator's own figure for ``collective`` on ``nodes`` nodes, with the words that name it, or None.

    ``expected_busbw_<collective>_gbps`` is one number (every node count) or a figure per node count, since
    bandwidth falls with the node count and a fabric without a datasheet (host sockets) has no profile
    curve; a node count the table does not name keeps the profile's figure.
    """
    name = f"expected_busbw_{collective}_gbps"
    value = busbw_table(host_vars, name)
    campaign = source_of(host_vars, name)
    if isinstance(value, dict) and campaign is not None:
        figure = _between(value, nodes)
        measured = (
            "measured" if nodes in value else f"interpolated from {', '.join(map(str, sorted(value)))} nodes"
        )
        return figure, f"{campaign}: {collective} on {nodes} node{'s' if nodes != 1 else ''} ({measured})"
    if isinstance(value, dict):
        if nodes not in value:
            return None
        return value[nodes], f"set by {name} for {nodes} node{'s' if nodes != 1 else ''}"
    return (value, f"set by {name}") if value is not None else None


def _between(table: dict[int, float], nodes: int) -> float:
    """A campaign's busbw at ``nodes`` from the node counts it measured: linear in log(nodes) between two
    of them; beyond the last, the fabric curve's fall from it (SEED_EFFICIENCY's shape); below the first,
    the first."""
    counts = sorted(table)
    if nodes in table:
        return table[nodes]
    if nodes < counts[0]:
        return table[counts[0]]
    if nodes > counts[-1]:
        last = counts[-1]
        return table[last] * fabric_efficiency(nodes) / fabric_efficiency(last)
    low = max(c for c in counts if c < nodes)
    high = min(c for c in counts if c > nodes)
    share = (math.log(nodes) - math.log(low)) / (math.log(high) - math.log(low))
    return table[low] + (table[high] - table[low]) * share


def nvlink_domain_of(transport: Mapping[str, Any] | None, nodes: int, ranks: int) -> int | None:
    """The GPUs of the one NVLink domain every rank of a multi-node collective sat in, from NCCL's own log
    (multi-node NVLink on, not turned off, a domain at least as large as the ranks); None for a fabric one."""
    mnnvl = (transport or {}).get("mnnvl")
    if nodes < 2 or not mnnvl or not mnnvl.get("enabled") or mnnvl.get("disabled_by_env"):
        return None
    size = mnnvl.get("domain_size")
    return ranks if size and size >= ranks else None


def expected_busbw(
    collective: str, nodes: int, ranks_per_node: int, host_vars: Vars, nvlink_domain: int | None = None
) -> Expectation:
    """The expectation for one collective on ``nodes`` nodes of ``ranks_per_node`` ranks each; those ranks all
    in one NVLink domain of ``nvlink_domain`` GPUs (nvlink_domain_of) are judged as that domain."""
    tolerance = host_vars.float("bench_tolerance", DEFAULT_TOLERANCE) or DEFAULT_TOLERANCE
    override = busbw_override(host_vars, collective, nodes)
    if override is not None:
        return _range(override[0], tolerance, override[1])
    if nvlink_domain:
        where = f"NVLink domain of {nvlink_domain} GPUs on {nodes} trays (multi-node NVLink)"
        figure = host_vars.float("nvlink_domain_busbw_gbps", None)
        if figure is None:
            return Expectation(None, None, None, f"{where}: the profile sets no nvlink_domain_busbw_gbps")
        return _range(figure, tolerance, f"{where}: the profile's nvlink_domain_busbw_gbps = {figure:g} GB/s")
    if nodes <= 1:
        nvlink = host_vars.float("nvlink_busbw_gbps", None)
        if nvlink is None:
            return Expectation(None, None, None, "the profile sets no nvlink_busbw_gbps for one node")
        return _range(nvlink, tolerance, f"one node: the profile's nvlink_busbw_gbps = {nvlink:g} GB/s")
    line_rate = host_vars.float("line_rate_gbps", None)
    nics = host_vars.int("expected_hca_count", None)
    if not line_rate or not nics:
        return Expectation(
            None, None, None, "the profile sets no RDMA fabric (line_rate_gbps × expected_hca_count)"
        )
    fabric = line_rate * nics / 8.0
    efficiency = fabric_efficiency(nodes)
    basis = f"{efficiency:.0%} of {nics} × {line_rate:g} Gb/s = {fabric:g} GB/s at {nodes} nodes"
    if collective not in _PER_RANK_SHARE:
        return _range(fabric * efficiency, tolerance, basis)
    share = fabric / max(1, ranks_per_node)
    value = share * efficiency
    if collective == "all_to_all":
        ranks = nodes * ranks_per_node
        value *= (ranks - 1) / max(1, ranks - ranks_per_node)
    return _range(value, tolerance, f"{basis}, one rank's share ({share:g} GB/s)")


def _range(expected: float, tolerance: float, basis: str) -> Expectation:
    return Expectation(
        round(expected, 1), round(expected * (1 - tolerance), 1), round(expected * (1 + tolerance), 1), basis
    )


def _gbps(value: float | None) -> str:
    """A busbw figure in a verdict: whole GB/s from 10 up; below, one decimal (host sockets: 4.5 GB/s expected
    read as "≈ 4", its range as "4–5")."""
    return "?" if value is None else f"{value:.0f}" if value >= 10 else f"{value:.1f}"


def judge_busbw(
    collective: str,
    measured_gbps: float | None,
    at_bytes: int | None,
    nodes: int,
    expectation: Expectation,
    backend: str,
) -> tuple[str, str]:
    """(status, message) for the large-message busbw of one collective."""
    where = f"{nodes} node{'s' if nodes != 1 else ''}"
    if backend == "gloo":
        measured = "" if measured_gbps is None else f" busbw {measured_gbps:.2f} GB/s"
        size = "" if at_bytes is None else f" at {human_bytes(at_bytes)}"
        return "PASS", (
            f"{collective}{measured}{size} on {where} with gloo on CPU hosts: this shows the ranks can talk; "
            "it is not representative of a GPU fabric and its bandwidth is not judged"
        )
    if measured_gbps is None or at_bytes is None:
        return "WARN", (
            f"{collective}: no row at {human_bytes(LARGE_BYTES)} or more, bandwidth not judged "
            "(raise the sweep's max_bytes)"
        )
    head = f"{collective} busbw {measured_gbps:.1f} GB/s at {human_bytes(at_bytes)} on {where}"
    if not expectation.judged:
        return "WARN", f"{head}; not judged: {expectation.basis}"
    assert expectation.low_gbps is not None and expectation.high_gbps is not None
    normal = f"normal range {_gbps(expectation.low_gbps)}–{_gbps(expectation.high_gbps)} GB/s"
    explain = f"expected ≈ {_gbps(expectation.expected_gbps)} GB/s, {expectation.basis}"
    if measured_gbps < expectation.low_gbps:
        return "FAIL", f"{head}: below the {normal} ({explain})"
    if measured_gbps > expectation.high_gbps:
        return "PASS", f"{head}: above the {normal} ({explain})"
    return "PASS", f"{head}: within the {normal} ({explain})"


def large_message_busbw(rows: list[dict]) -> tuple[float | None, int | None]:
    """The best busbw over the rows of LARGE_BYTES or more (the plateau nccl-tests users read)."""
    big = [r for r in rows if r.get("bytes", 0) >= LARGE_BYTES and r.get("busbw_gbps") is not None]
    if not big:
        return None, None
    best = max(big, key=lambda r: r["busbw_gbps"])
    return float(best["busbw_gbps"]), int(best["bytes"])
