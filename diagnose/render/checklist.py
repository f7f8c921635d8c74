"""The operational checklist (sections 1–5, the check families of docs/contracts.md) filled in from a run's
check results, followed by the node-health section (checklist ``H``).

The checklist is what the cluster owner signs against, so it lists every item whether or not the run
looked at it: an item with no result is NOT COVERED, an item whose results all say SKIP is SKIPPED, and
neither is ever shown as passed. Checks the map below does not know (a site's own, ``history.regression``)
are listed under the section their ``checklist`` field names, so nothing a run judged is left out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from diagnose.catalog.stage_ids import (
    BENCH_PREFIX,
    INFER_KV_TRANSFER,
    INFER_PLACEMENT,
    INFER_STAGING,
    NCCL_TRANSPORT,
    TRAIN_COMMUNICATOR,
    TRAIN_DATAPARALLEL,
    TRAIN_INPUT,
    TRAIN_OVERLAP,
    TRAIN_SYNC,
    TRAIN_TAIL,
    bench_id,
    stage_titles,
)
from diagnose.core.model import SEVERITY, worst
from diagnose.core.units import counted, gbps, human_bytes
from diagnose.render.hostlist import summarize
from diagnose.render.tally import shown_only

NOT_COVERED = "NOT COVERED"
CLUSTER = "cluster-wide"
# A dip below this share of the best busbw seen at smaller sizes is not the shape of a healthy sweep.
CURVE_DIP_RATIO = 0.7
# Below this size busbw is latency-bound and jumps around on any fabric; dips there mean nothing.
CURVE_MIN_BYTES = 1 << 20
#: The sources of the bandwidth items: every ``bench.<collective>`` verdict.
BENCHMARKS = (f"{BENCH_PREFIX}*",)


@dataclass(frozen=True)
class ItemSpec:
    """One line of the paper checklist and the check ids that answer it (``bench.*`` is a prefix)."""

    key: str
    title: str
    sources: tuple[str, ...]
    curve: bool = False


SECTIONS: tuple[tuple[str, str, tuple[ItemSpec, ...]], ...] = (
    (
        "1",
        "Fabric",
        (
            ItemSpec("1.1", "HCAs present and ports Active", ("ib.devices", "ib.port_state")),
            ItemSpec("1.2", "Link speed as expected", ("ib.link_rate",)),
            ItemSpec("1.3", "GPU–NIC locality (and NVLink between GPUs)", ("gpu.topology",)),
            ItemSpec("1.4", "MTU / GID / subnet consistent", ("ib.mtu",)),
        ),
    ),
    (
        "2",
        "Container / Kubernetes",
        (
            ItemSpec("2.1", "RDMA devices visible in the pod", ("k8s.rdma_devices", "ib.devices")),
            ItemSpec("2.2", "Device-plugin resources requested and allocated", ("k8s.resources",)),
            ItemSpec("2.3", "Multus network attached, VF has its IP", ("k8s.networks",)),
            ItemSpec("2.4", "/dev/shm large enough for NCCL", ("k8s.shm",)),
            ItemSpec("2.5", "Pod sees what its node has (HCAs, GPUs, NCCL)", ("k8s.host_parity",)),
        ),
    ),
    (
        "3",
        "NCCL baseline",
        (
            ItemSpec("3.1", "NET/IB between nodes, not NET/Socket", (NCCL_TRANSPORT,)),
            ItemSpec("3.2", "algbw / busbw at the hardware baseline", BENCHMARKS),
            ItemSpec("3.3", "Normal busbw curve over message sizes", BENCHMARKS, curve=True),
        ),
    ),
    (
        "4",
        "Training trace",
        (
            ItemSpec("4.1", "Compute / communication overlap", (TRAIN_OVERLAP,)),
            ItemSpec("4.2", "Last-bucket tail after the backward pass", (TRAIN_TAIL,)),
            ItemSpec("4.3", "No host sync (.item(), synchronize) every step", (TRAIN_SYNC,)),
            ItemSpec("4.4", "Input pipeline (DataLoader, storage) not stalling the step", (TRAIN_INPUT,)),
            ItemSpec(
                "4.5", "DistributedDataParallel, not single-process DataParallel", (TRAIN_DATAPARALLEL,)
            ),
            ItemSpec(
                "4.6", "Process groups created once, not inside the training loop", (TRAIN_COMMUNICATOR,)
            ),
        ),
    ),
    (
        "5",
        "Inference trace",
        (
            ItemSpec("5.1", "KV-cache transfer latency", (INFER_KV_TRANSFER,)),
            ItemSpec("5.2", "Prefill / decode placement topology-aware", (INFER_PLACEMENT,)),
            ItemSpec("5.3", "KV path not staged through CPU or storage", (INFER_STAGING,)),
        ),
    ),
)
#: Node health, after the five sections of the paper checklist: the faults that interrupt large jobs most
#: often (GPUs, HBM, links), which the checklist itself does not list.
HEALTH_SECTION: tuple[str, str, tuple[ItemSpec, ...]] = (
    "H",
    "Node health (beyond the checklist)",
    (
        ItemSpec("H.1", "No Xid event in the window", ("gpu.xid",)),
        ItemSpec("H.2", "GPU memory: no uncorrectable ECC, no row remap pending or failed", ("gpu.memory",)),
        ItemSpec("H.3", "No hardware or thermal clock slowdown", ("gpu.clocks",)),
        ItemSpec("H.4", "PCIe link at full width (and generation under load)", ("gpu.pcie",)),
        ItemSpec("H.5", "Every NVLink up at one speed, no error growth", ("gpu.nvlink",)),
        ItemSpec("H.6", "NVSwitch fabric trained (fabric manager)", ("gpu.fabricmanager",)),
        ItemSpec("H.7", "No IB error counter growth or link flap during the run", ("ib.counters",)),
        ItemSpec("H.8", "Locked-memory limit allows RDMA registration", ("host.memlock",)),
    ),
)
OTHER_SECTION = ("–", "Other checks")
# Plain-language lines for checks that answer no item of the paper checklist by themselves (the stages'
# ids take theirs from catalog/stage_ids.py); an id not listed here (a site's own check) is shown by its id.
TITLES = {
    "host.reachable": "Host reachable over SSH (or locally)",
    "gpu.gpudirect": "GPUDirect RDMA available (nvidia_peermem or DMA-BUF)",
    "net.port_range": "Ephemeral port range wide enough for NCCL sockets",
    "nccl.version": "NCCL present, same version on every host",
    "versions.consistency": "Same driver, CUDA and torch on every host",
    "nccl.env": "No NCCL setting that disables a transport",
    "gpu.nvlink_domain": "NVL72 tray: every GPU registered in the rack's NVLink domain",
    "gpu.imex": "NVL72 tray: IMEX running, its peers READY, channels present",
    "nvlink.rack": "NVL72 rack: one clique, no tray left out of the fabric or IMEX",
    **stage_titles(),
}


@dataclass
class ItemResult:
    """One filled-in checklist line."""

    key: str
    title: str
    status: str
    sources: list[str]
    judged_hosts: int = 0  # hosts with a per-host PASS: where coverage is known
    result_hosts: int = 0  # hosts any result names (a cluster rule names only the odd ones out)
    cluster_wide: bool = False
    # (status, folded host list, host count) for every status worse than PASS, worst first.
    bad: list[tuple[str, str, int]] = field(default_factory=list)
    note: str = ""


@dataclass
class SectionResult:
    number: str
    title: str
    items: list[ItemResult]


def _matches(check_id: str, sources: Iterable[str]) -> bool:
    return any(check_id.startswith(s[:-1]) if s.endswith("*") else check_id == s for s in sources)


def _sections_of(checklist: Any) -> list[str]:
    if str(checklist or "").strip() == HEALTH_SECTION[0]:
        return [HEALTH_SECTION[0]]
    found = re.findall(r"[1-5]", str(checklist or ""))
    return list(dict.fromkeys(found)) or [OTHER_SECTION[0]]


def judge_item(key: str, title: str, sources: list[str], rows: list[dict[str, Any]]) -> ItemResult:
    """Fold the results behind one item into its status and the hosts it did not pass on."""
    item = ItemResult(key, title, NOT_COVERED, sources)
    if not rows:
        item.note = "no check in this run answers this item"
        return item
    judged = [r for r in rows if r.get("status") != "SKIP"]
    if not judged:
        item.status = "SKIP"
        item.note = str(rows[0].get("message") or "not applicable")
        return item
    # A PASS that judged no figure only showed the thing works (gloo on CPU hosts, two hosts without a
    # floor): the owner signs against this list, so such an item is not passed, as the tally does not count it.
    shown = [r for r in judged if shown_only(r)]
    if len(shown) == len(judged):
        item.note = "shown working, no figure judged (its result in the findings says what was shown)"
        return item
    judged = [r for r in judged if not shown_only(r)]
    # One pass over the rows: an item of a 16,384-host run stands on 16,384 of them.
    statuses: set[str] = set()
    per_host: set[Any] = set()
    host_passed = cluster_wide = False
    bad: dict[str, set[str]] = {"FAIL": set(), "ERROR": set(), "WARN": set()}
    for r in judged:
        status, host = r.get("status"), r.get("host")
        if host is not None:
            per_host.add(host)
        else:
            cluster_wide = True
        if status not in SEVERITY:
            continue
        statuses.add(status)
        host_passed = host_passed or (status == "PASS" and host is not None)
        if status in bad:
            bad[status].add(str(host) if host is not None else f"{r.get('id', '?')} ({CLUSTER})")
    item.status = worst(list(statuses))
    # A cluster rule names only the odd host out, so its host rows say nothing about coverage; only per-host
    # passes show which hosts an item was really judged on.
    if host_passed:
        item.judged_hosts = len(per_host)
    item.result_hosts = len(per_host)
    item.cluster_wide = cluster_wide
    item.bad = [(status, summarize(names), len(names)) for status, names in bad.items() if names]
    skipped = sum(1 for r in rows if r.get("status") == "SKIP")
    if skipped:
        item.note = f"{counted(skipped, 'result')} skipped as not applicable"
    return item


def curve_shape(rows: list[dict[str, Any]]) -> tuple[str, str]:
    """Whether a size sweep looks like a healthy one: busbw rises with size, then levels off.

    A healthy sweep never loses much bandwidth as messages grow; a drop past 1 MiB points at a protocol or
    algorithm switch gone wrong, a congested link or a straggler, and any wrong element is a broken result.
    """
    points = sorted(
        (r for r in rows if isinstance(r.get("bytes"), int) and isinstance(r.get("busbw_gbps"), int | float)),
        key=lambda r: r["bytes"],
    )
    if not points:
        return NOT_COVERED, "no size sweep in the results"
    wrong = [r for r in points if isinstance(r.get("wrong"), int) and r["wrong"] > 0]
    if wrong:
        return (
            "FAIL",
            f"wrong elements at {counted(len(wrong), 'size')}, first at {human_bytes(wrong[0]['bytes'])}",
        )
    best = 0.0
    best_at = 0
    for row in points:
        busbw = float(row["busbw_gbps"])
        if row["bytes"] >= CURVE_MIN_BYTES and best > 0 and busbw < CURVE_DIP_RATIO * best:
            return "WARN", (
                f"busbw drops to {gbps(busbw)} at {human_bytes(row['bytes'])} after "
                f"{gbps(best)} at {human_bytes(best_at)}"
            )
        if busbw > best:
            best, best_at = busbw, row["bytes"]
    return "PASS", f"rises to {gbps(best)} at {human_bytes(best_at)} and holds"


def _curve_item(spec: ItemSpec, benchmarks: list[dict[str, Any]]) -> ItemResult:
    item = ItemResult(spec.key, spec.title, NOT_COVERED, ["benchmarks[].rows"])
    verdicts = []
    for bench in benchmarks:
        status, message = curve_shape(bench.get("rows") or [])
        if status != NOT_COVERED:
            verdicts.append((status, f"{bench.get('collective', '?')}: {message}"))
    if not verdicts:
        item.note = "no benchmark sweep in this run"
        return item
    item.status = worst([s for s, _ in verdicts])
    item.cluster_wide = True
    for status in ("FAIL", "WARN"):
        names = [m for s, m in verdicts if s == status]
        if names:
            item.bad.append((status, "; ".join(names), len(names)))
    item.note = "" if item.bad else "; ".join(m for _, m in verdicts)
    return item


def _rows_of(by_id: dict[str, list[tuple[int, dict[str, Any]]]], ids: list[str]) -> list[dict[str, Any]]:
    """The rows of ``ids`` in the order the document holds them."""
    if len(ids) == 1:
        return [row for _, row in by_id[ids[0]]]
    return [row for _, row in sorted((pair for i in ids for pair in by_id[i]), key=lambda pair: pair[0])]


def build_checklist(results: dict[str, Any]) -> list[SectionResult]:
    """Every checklist section with its items filled in from ``results`` (schema 1)."""
    checks: list[dict[str, Any]] = results.get("checks") or []
    benchmarks: list[dict[str, Any]] = results.get("benchmarks") or []
    mapped = {s for _, _, items in (*SECTIONS, HEALTH_SECTION) for spec in items for s in spec.sources}
    # gloo on CPU hosts shows the ranks can talk, not what the GPU fabric delivers: its sweeps answer no
    # bandwidth item, which then reads NOT COVERED rather than passed.
    cpu_only = {bench_id(b.get("collective")) for b in benchmarks if b.get("backend") == "gloo"}
    benchmarks = [b for b in benchmarks if b.get("backend") != "gloo"]
    sections: list[SectionResult] = []
    extra: dict[str, dict[str, list[dict[str, Any]]]] = {}
    # Rows by id, each with its place in the document: an item then reads the ids it answers for, instead
    # of every row once per item (a 16,384-host run holds some 230,000 rows and the checklist 56 items).
    by_id: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for index, row in enumerate(checks):
        by_id.setdefault(str(row.get("id", "?")), []).append((index, row))
    known: dict[str, list[str]] = {}  # a few distinct checklist fields, on every row: each parsed once

    def sections_of(field: Any) -> list[str]:
        key = str(field or "")
        if key not in known:
            known[key] = _sections_of(field)
        return known[key]

    for check_id, indexed in by_id.items():
        if not _matches(check_id, mapped):
            for _, row in indexed:
                for number in sections_of(row.get("checklist")):
                    extra.setdefault(number, {}).setdefault(check_id, []).append(row)
    for number, title, specs in (*SECTIONS, HEALTH_SECTION, (*OTHER_SECTION, ())):
        items: list[ItemResult] = []
        own_extra = extra.get(number, {})
        for spec in specs:
            if spec.curve:
                curve = _curve_item(spec, benchmarks)
                if cpu_only and curve.status == NOT_COVERED:
                    curve.note = "only gloo on CPU hosts ran: its curve says nothing about the GPU fabric"
                items.append(curve)
                continue
            rows = _rows_of(
                by_id,
                [
                    check_id
                    for check_id in by_id
                    if _matches(check_id, spec.sources)
                    and not (spec.sources == BENCHMARKS and check_id in cpu_only)
                ],
            )
            if not rows and spec.sources == BENCHMARKS:
                rows = [
                    {**b, "id": bench_id(b.get("collective")), "host": None}
                    for b in benchmarks
                    if b.get("status")
                ]
            if not spec.sources and own_extra:
                continue  # the section's own checks below answer it
            item = judge_item(spec.key, spec.title, list(spec.sources), rows)
            if cpu_only and item.status == NOT_COVERED and spec.sources == BENCHMARKS:
                item.note = "only gloo on CPU hosts ran: bandwidth is not judged against a GPU fabric"
            items.append(item)
        for index, (check_id, rows) in enumerate(sorted(own_extra.items()), start=len(items) + 1):
            key = f"{number}.{index}" if number != OTHER_SECTION[0] else OTHER_SECTION[0]
            items.append(judge_item(key, TITLES.get(check_id, check_id), [check_id], rows))
        if items:
            sections.append(SectionResult(number, title, items))
    return sections
