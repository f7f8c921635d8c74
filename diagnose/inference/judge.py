"""Verdicts on measured KV transfers: ``infer.kv_transfer``, ``infer.placement`` and ``infer.staging``.

Each takes the ``inference`` records of the pairs (see :mod:`diagnose.probes.kv_transfer` for their shape)
and the limits of the profile, and returns a status with a message naming each pair.

* Transfer: the packed transfer of the longest request is bandwidth-bound, so its message (timed apart
  from the gather and scatter around it; the whole row in older results) is held against what the pair's
  link should carry (NVLink from the profile, PCIe, one NIC's line rate across nodes) and against a plain
  send/recv of the same bytes measured alongside, and the gather and scatter against a device copy
  (:mod:`diagnose.inference.parts`); the packed rows' p99/p50 is bounded (a tail that serving would see as
  TTFT jitter); block-by-block rows are judged by what each block costs on top of the packed transfer
  (per-message overhead).
* Staging: a device-to-device path that goes through host memory — NCCL's log says SHM (or a network
  transport inside one host, or sockets between hosts), or its bandwidth is no better than the
  pinned-host copies the staged method measured on the same pair — is named, with what it costs
  against a direct pair of the same link class.
* Placement: each pair of the deployment's prefill and decode groups is on the fastest path the
  topology offers (NV# inside a node, the same rail across nodes), or the measured penalty is given.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from diagnose.core.model import worst
from diagnose.core.units import counted, tokens_label
from diagnose.inference.pairs import NETWORK, path_rank
from diagnose.inference.parts import copies_text, message_text, part_findings, parts_of, transfer_gbps
from diagnose.parsers.nvidia_smi import PCIE_RANK, nvlink_links

#: Rows with fewer samples than this have a p99 that is little more than their maximum: not judged for tail.
TAIL_MIN_SAMPLES = 20
#: A device-to-device path within this factor of the pinned-host copy bandwidth looks like host staging.
STAGING_RATIO = 1.5
#: The tail is judged on the packed transfer: one message, so its spread is the link's and the GPUs'. Block
#: by block posts one message per block from Python, whose tail is the host's scheduling more than the link:
#: it is shown in the report and judged by its per-block cost instead.
TAIL_METHOD = "packed"


@dataclass(frozen=True)
class Limits:
    """What the profile expects of a pair (see the ``kv_*`` variables in diagnose.config.profiles)."""

    min_link_fraction: float = 0.5
    p99_p50_max: float = 1.5
    nvlink_gbps: float | None = None
    pcie_gbps: float = 25.0
    line_rate_gbps: float | None = None
    block_overhead_max_us: float = 50.0
    plain_min_fraction: float = 0.85
    copy_min_fraction: float = 0.5


@dataclass(frozen=True)
class Verdict:
    status: str
    message: str
    observed: Any = None
    expected: Any = None
    judged: bool = True  # False: the mechanics were shown to work, no figure judged (gloo on CPU hosts)


def _ms(us: float) -> str:
    return f"{us / 1000:.3g} ms" if us >= 1000 else f"{us:.0f} µs"


def _gb(nbytes: int) -> str:
    return f"{nbytes / 1e9:.3g} GB" if nbytes >= 1e9 else f"{nbytes / 1e6:.3g} MB"


def expected_gbps(link: str, limits: Limits) -> tuple[float | None, str]:
    """What a pair's link should carry one way, in GB/s, and where the figure comes from."""
    if nvlink_links(link) is not None:
        if limits.nvlink_gbps:
            return limits.nvlink_gbps, f"NVLink figure {limits.nvlink_gbps:g} GB/s"
        return None, "no NVLink figure in the profile (nvlink_busbw_gbps or kv_nvlink_gbps)"
    if link in PCIE_RANK and link != "X":
        return limits.pcie_gbps, f"PCIe figure {limits.pcie_gbps:g} GB/s (kv_pcie_gbps)"
    if link == NETWORK:
        if limits.line_rate_gbps:
            rate = limits.line_rate_gbps / 8
            return rate, f"one NIC at {limits.line_rate_gbps:g} Gb/s = {rate:g} GB/s"
        return None, "no line_rate_gbps in the profile"
    return None, f"no figure for a {link} link"


def largest(record: Mapping[str, Any], method: str) -> dict[str, Any] | None:
    """The row of ``method`` at the longest request length, or None."""
    found = [r for r in record.get("rows") or [] if r.get("method") == method]
    return max(found, key=lambda r: r["tokens"]) if found else None


def _row(record: Mapping[str, Any], method: str, tokens: int) -> dict[str, Any] | None:
    return next(
        (r for r in record.get("rows") or [] if r.get("method") == method and r.get("tokens") == tokens), None
    )


def bandwidth_row(record: Mapping[str, Any]) -> dict[str, Any] | None:
    """The row judged for bandwidth: packed at the longest length (block by block where packed is absent)."""
    return largest(record, "packed") or largest(record, "block")


def host_copy_gbps(record: Mapping[str, Any]) -> float | None:
    """The pinned-host copy bandwidth the staged method measured on this pair (its largest request)."""
    values = [r["host_copy_gbps"] for r in record.get("rows") or [] if r.get("host_copy_gbps")]
    return max(values) if values else None


def penalty(record: Mapping[str, Any], reference: Mapping[str, Any]) -> str | None:
    """What ``record`` costs against ``reference``: p50 of the packed (else block) transfer at the longest
    length both measured, as extra time and a factor."""
    for method in ("packed", "block"):
        common = {r["tokens"] for r in record.get("rows") or [] if r.get("method") == method} & {
            r["tokens"] for r in reference.get("rows") or [] if r.get("method") == method
        }
        if not common:
            continue
        tokens = max(common)
        mine, theirs = _row(record, method, tokens), _row(reference, method, tokens)
        assert mine is not None and theirs is not None
        extra = mine["p50_us"] - theirs["p50_us"]
        factor = mine["p50_us"] / theirs["p50_us"] if theirs["p50_us"] else float("inf")
        return (
            f"{'+' if extra >= 0 else '−'}{_ms(abs(extra))} p50 for {tokens_label(tokens)} tokens {method} "
            f"({_ms(mine['p50_us'])} vs {_ms(theirs['p50_us'])}, {factor:.2f}× {reference['pair']} "
            f"({reference['link']}))"
        )
    return None


def _not_measured(record: Mapping[str, Any]) -> str | None:
    if not record.get("rows"):
        return f"{record['pair']}: not measured ({record.get('message') or record.get('outcome')})"
    if record.get("outcome") != "done":
        return (
            f"{record['pair']}: stopped before the end ({record.get('message')}); the rows measured are kept"
        )
    return None


def _summary(record: Mapping[str, Any]) -> dict[str, Any]:
    row = bandwidth_row(record)
    summary = {
        "link": record["link"],
        "transport": record.get("transport"),
        "gbps": row["gbps"] if row else None,
        "p50_us": row["p50_us"] if row else None,
        "tokens": row["tokens"] if row else None,
        "method": row["method"] if row else None,
    }
    parts = parts_of(row) if row else None
    if parts:
        summary.update(
            transfer_gbps=parts["wire"]["gbps"],
            plain_gbps=parts["wire"]["plain_gbps"],
            pack_gbps=parts["pack"]["gbps"],
            pack_copy_gbps=parts["pack"]["copy_gbps"],
            unpack_gbps=parts["unpack"]["gbps"],
            unpack_copy_gbps=parts["unpack"]["copy_gbps"],
        )
    return summary


def _gloo_line(record: Mapping[str, Any]) -> str:
    row = bandwidth_row(record)
    assert row is not None
    return (
        f"{record['pair']}: {len(record['rows'])} rows, {tokens_label(row['tokens'])} tokens {row['method']} "
        f"p50 {_ms(row['p50_us'])} over {row['samples']} samples"
    )


def judge_transfer(records: Sequence[Mapping[str, Any]], limits: Limits, backend: str) -> Verdict:
    """``infer.kv_transfer``: p50 against the link, the p99/p50 tail, and per-block overhead."""
    findings: list[tuple[str, str]] = []
    passes: list[str] = []
    for record in records:
        missing = _not_measured(record)
        if missing:
            findings.append(("ERROR", missing))
        rows = record.get("rows") or []
        wrong = sum(r.get("wrong") or 0 for r in rows)
        if wrong:
            findings.append(
                ("FAIL", f"{record['pair']}: {counted(wrong, 'block')} arrived wrong or in the wrong slot")
            )
        row = bandwidth_row(record)
        if row is None or backend == "gloo":
            continue
        expected, basis = expected_gbps(record["link"], limits)
        size = f"{tokens_label(row['tokens'])} tokens ({_gb(row['bytes'])}) {row['method']}"
        line = (
            f"{record['pair']} ({record['link']}): {size} p50 {_ms(row['p50_us'])} = {row['gbps']:.1f} GB/s"
        )
        message = message_text(row)
        if message:
            line += f" end to end; {message}"
        if expected is not None and transfer_gbps(row) < limits.min_link_fraction * expected:
            findings.append(
                (
                    "FAIL",
                    f"{line}, below {limits.min_link_fraction:g}× the {basis} ({limits.min_link_fraction * expected:.1f} GB/s)",
                )
            )
        tails = [
            (r["p99_us"] / r["p50_us"], r)
            for r in rows
            if r.get("method") == TAIL_METHOD and r.get("samples", 0) >= TAIL_MIN_SAMPLES and r["p50_us"] > 0
        ]
        worst_tail = max(tails, key=lambda t: t[0]) if tails else None
        if worst_tail and worst_tail[0] > limits.p99_p50_max:
            ratio, r = worst_tail
            findings.append(
                (
                    "WARN",
                    f"{record['pair']} ({record['link']}): p99/p50 {ratio:.2f} for {tokens_label(r['tokens'])} "
                    f"tokens {r['method']} (p99 {_ms(r['p99_us'])} over {r['samples']} samples; limit "
                    f"{limits.p99_p50_max:g})",
                )
            )
        block, packed = largest(record, "block"), largest(record, "packed")
        if block and packed and block["tokens"] == packed["tokens"] and block["blocks"]:
            overhead = (block["p50_us"] - packed["p50_us"]) / block["blocks"]
            if overhead > limits.block_overhead_max_us:
                findings.append(
                    (
                        "WARN",
                        f"{record['pair']}: block by block costs {overhead:.0f} µs more per block than packing "
                        f"({block['blocks']} blocks of {_gb(block['block_bytes'])}: {_ms(block['p50_us'])} vs "
                        f"{_ms(packed['p50_us'])}; limit {limits.block_overhead_max_us:g} µs)",
                    )
                )
        findings.extend(
            part_findings(record["pair"], row, limits.plain_min_fraction, limits.copy_min_fraction)
        )
        copies = copies_text(row)
        tail_text = (f"; {copies}" if copies else "") + (
            f", p99/p50 ≤ {worst_tail[0]:.2f}" if worst_tail else ""
        )
        floor = (
            f" (≥ {limits.min_link_fraction * expected:.0f} expected from the {basis})"
            if expected
            else f" ({basis})"
        )
        passes.append(f"{line}{floor}{tail_text}")
    observed = {r["pair"]: _summary(r) for r in records}
    if backend == "gloo":
        status = worst([s for s, _ in findings]) if findings else "PASS"
        lines = [m for _, m in findings] or [_gloo_line(r) for r in records if bandwidth_row(r)]
        return Verdict(
            status,
            "gloo on hosts without GPUs: the transfer mechanics work, latency is not judged against a GPU "
            "link; " + "; ".join(lines),
            observed,
            judged=status != "PASS",
        )
    if findings:
        return Verdict(worst([s for s, _ in findings]), "; ".join(m for _, m in findings), observed)
    return Verdict("PASS", "; ".join(passes), observed)


def _staging_reason(record: Mapping[str, Any], no_fabric: str | None = None) -> tuple[str, str] | None:
    """(status, why) when this pair's blocks went through host memory, from NCCL's log or its bandwidth.

    Across nodes of a cluster that has no RDMA fabric (``no_fabric``: the profile's reason) host sockets are
    the only way between GPUs, so there they are the path the profile expects, not staging to fix.
    """
    kinds = record.get("transport") or []
    inter = record.get("scope") == "inter-node"
    if inter and no_fabric and not any(k.startswith("NET/") and k != "NET/Socket" for k in kinds):
        return None
    if "SHM" in kinds:
        return "FAIL", "NCCL moved the blocks through host shared memory (SHM in its log)"
    if not inter and any(k.startswith("NET/") for k in kinds):
        return "FAIL", "NCCL sent the blocks through the network stack inside one host (P2P and SHM off)"
    if inter and "NET/Socket" in kinds:
        return "FAIL", "NCCL sent the blocks over host sockets (NET/Socket)"
    row, copy = bandwidth_row(record), host_copy_gbps(record)
    if (
        row
        and copy
        and nvlink_links(record["link"]) is not None
        and transfer_gbps(row) <= STAGING_RATIO * copy
    ):
        return "FAIL", (
            f"its {transfer_gbps(row):.1f} GB/s is no better than the pinned-host copies measured on it "
            f"({copy:.1f} GB/s): host-memory staging"
        )
    if inter and record.get("gdrdma") is False:
        return "WARN", "no GPUDirect RDMA: the NIC reads and writes the blocks in host memory"
    return None


def _reference(record: Mapping[str, Any], healthy: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """A direct pair to price a staged one against: the same link class, else the fastest one measured."""
    same = [h for h in healthy if h["link"] == record["link"] and h["pair"] != record["pair"]]
    others = sorted((h for h in healthy if h["pair"] != record["pair"]), key=lambda h: path_rank(h["link"]))
    return (same or others or [None])[0]


def judge_staging(
    records: Sequence[Mapping[str, Any]], backend: str, no_fabric: str | None = None
) -> Verdict:
    """``infer.staging``: pairs whose KV path goes through host memory, with what that costs; across nodes
    without an RDMA fabric (``no_fabric`` says why none is expected) sockets are the path, said as such."""
    if backend == "gloo":
        return Verdict("SKIP", "gloo on hosts without GPUs: no device memory, no staging to judge")
    measured = [r for r in records if r.get("rows")]
    if not measured:
        return Verdict(
            "ERROR", "no pair was measured: " + "; ".join(filter(None, map(_not_measured, records)))
        )
    staged = {r["pair"]: _staging_reason(r, no_fabric) for r in measured}
    healthy = [r for r in measured if staged[r["pair"]] is None]
    findings: list[tuple[str, str]] = []
    direct: list[str] = []
    for record in measured:
        reason = staged[record["pair"]]
        env = "".join(f", {k}={v}" for k, v in (record.get("env") or {}).items())
        name = f"{record['pair']} ({record['link']}{env})"
        if reason is None:
            copy = host_copy_gbps(record)
            row = bandwidth_row(record)
            via = "/".join(record.get("transport") or []) or "transport not in the log"
            extra = f" vs {copy:.1f} GB/s host copy" if copy and row else ""
            expected = (
                f" ({no_fabric}: sockets are the only path between nodes)"
                if no_fabric and record.get("scope") == "inter-node"
                else ""
            )
            direct.append(
                f"{name}: {via}" + (f", {transfer_gbps(row):.1f} GB/s{extra}" if row else "") + expected
            )
            continue
        status, why = reason
        reference = _reference(record, healthy)
        cost = penalty(record, reference) if reference else None
        findings.append((status, f"{name}: {why}" + (f"; penalty {cost}" if cost else "")))
    observed = {
        r["pair"]: {
            "transport": r.get("transport"),
            "host_copy_gbps": host_copy_gbps(r),
            "staged": bool(staged[r["pair"]]),
        }
        for r in measured
    }
    if findings:
        return Verdict(
            worst([s for s, _ in findings]),
            "; ".join(m for _, m in findings) + (f" — direct: {'; '.join(direct)}" if direct else ""),
            observed,
            "device-to-device (P2P, NET with GPUDirect RDMA)",
        )
    return Verdict("PASS", "no pair staged through host memory: " + "; ".join(direct), observed)


def judge_placement(records: Sequence[Mapping[str, Any]], backend: str) -> Verdict:
    """``infer.placement``: the deployment's prefill → decode pairs on the fastest path available."""
    if backend == "gloo":
        return Verdict("SKIP", "gloo on hosts without GPUs: no GPU placement to judge")
    placed = [r for r in records if "placement" in (r.get("roles") or [])]
    measured = [r for r in records if r.get("rows")]
    if not placed:
        fastest = sorted(
            (r for r in measured if r.get("scope") == "intra-node"), key=lambda r: path_rank(r["link"])
        )
        known = (
            f"; fastest pair measured inside a node: {fastest[0]['pair']} ({fastest[0]['link']})"
            if fastest
            else ""
        )
        return Verdict(
            "SKIP", "no prefill/decode groups named (set kv_prefill_gpus and kv_decode_gpus)" + known
        )
    findings: list[tuple[str, str]] = []
    fine: list[str] = []
    for record in placed:
        missing = _not_measured(record)
        if missing and not record.get("rows"):
            findings.append(("ERROR", missing))
            continue
        if record.get("scope") == "inter-node":
            a, b = record.get("rails") or (None, None)
            if a and b and a != b:
                reference = next(
                    (
                        r
                        for r in measured
                        if r.get("scope") == "inter-node"
                        and r is not record
                        and (r.get("rails") or [None, None])[0] == (r.get("rails") or [None, None])[1]
                    ),
                    None,
                )
                cost = penalty(record, reference) if reference else None
                findings.append(
                    (
                        "WARN",
                        f"{record['pair']}: crosses rails ({a} → {b}); same-rail NICs avoid the spine"
                        + (f"; measured {cost}" if cost else ""),
                    )
                )
            else:
                rails = f"rail {a}" if a else "rails unknown (no NIC in topo -m)"
                fine.append(f"{record['pair']} ({rails})")
            continue
        fastest = record.get("fastest")
        if fastest and path_rank(record["link"]) > path_rank(fastest):
            reference = next(
                (r for r in measured if r["link"] == fastest and r.get("scope") == "intra-node"), None
            )
            cost = penalty(record, reference) if reference else None
            findings.append(
                (
                    "WARN",
                    f"{record['pair']} on {record['link']} where {fastest} is available"
                    + (f"; measured penalty {cost}" if cost else ""),
                )
            )
        else:
            fine.append(f"{record['pair']} ({record['link']})")
    observed = {
        r["pair"]: {"link": r["link"], "fastest": r.get("fastest"), "rails": r.get("rails")} for r in placed
    }
    if findings:
        message = "; ".join(m for _, m in findings) + (
            f" — on the fastest path: {', '.join(fine)}" if fine else ""
        )
        return Verdict(worst([s for s, _ in findings]), message, observed)
    return Verdict(
        "PASS", "every prefill → decode pair on the fastest path available: " + ", ".join(fine), observed
    )


def transport_between(
    logs: Iterable[Mapping[str, Any]], a: int = 0, b: int = 1
) -> tuple[list[str], bool | None]:
    """The transports NCCL set up between ranks ``a`` and ``b`` (parsed INFO logs, see
    :func:`diagnose.parsers.nccl_log.parse_nccl_log`), and whether its NET connections used GPUDirect RDMA."""
    kinds: list[str] = []
    gdr: list[bool] = []
    for log in logs:
        for edge in log.get("edges") or []:
            if {edge["src"], edge["dst"]} != {a, b}:
                continue
            if edge["transport"] not in kinds:
                kinds.append(edge["transport"])
            if edge["transport"].startswith("NET/"):
                gdr.append(bool(edge.get("gdrdma")))
    return kinds, (all(gdr) if gdr else None)
