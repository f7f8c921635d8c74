"""Hosts made of what the stress program really printed on the lent H100 (tests/fixtures/captured/stress, see
SOURCE there): its one GPU's entries copied to as many GPUs as a test needs (each with its own index and bus
id), one GPU's figure scaled or one entry changed where a test needs a fault.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from diagnose.core.hosts import Host
from diagnose.core.vars import Vars
from diagnose.probes.stress import judge_all, stage_record
from diagnose.probes.stress_figures import THROUGHPUT, HostStress, host_stress
from tests.support.paths import CAPTURED, FIXTURES

STRESS = CAPTURED / "stress"
H100_ALL = "h100_all_phases_burnin120.jsonl"
H100_HOG = "h100_gemm_hbm_with_hog.jsonl"
CPU_2RANKS = "cpu_2ranks.jsonl"
RUN = FIXTURES / "results" / "h200_local.json"

#: Changes one GPU's entry of one phase row: (gpu index, phase, entry) -> None.
Fault = Callable[[int, str, dict[str, Any]], None]


def lines_of(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (STRESS / name).read_text().splitlines() if line.strip()]


def _bus(gpu: int, gpus: int, captured: str) -> str:
    """GPU ``gpu``'s bus id: the captured one on a single GPU, else one per GPU as an HGX board numbers them."""
    return captured if gpus == 1 else f"00000000:{0x18 + gpu * 0x10:02X}:00.0"


def widened(name: str, gpus: int, fault: Fault | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The capture's start line and rows with its GPU's entry copied to ``gpus`` GPUs, ``fault`` applied."""
    lines = lines_of(name)
    start = copy.deepcopy(next(r for r in lines if r["event"] == "start"))
    single = start["gpus"][0]
    bus = single.get("bus_id")
    start["gpus"] = [
        {**single, "rank": g, **({"gpu": g, "bus_id": _bus(g, gpus, bus)} if bus else {})}
        for g in range(gpus)
    ]
    rows = []
    for record in lines:
        if record["event"] != "row":
            continue
        row = copy.deepcopy(record)
        base = row["gpus"][0]
        entries = []
        for g in range(gpus):
            entry = {**copy.deepcopy(base), "rank": g}
            if bus:
                entry.update({"gpu": g, "bus_id": _bus(g, gpus, bus)})
            if fault is not None:
                fault(g, row["collective"], entry)
            entries.append(entry)
        row["gpus"] = entries
        if isinstance(row.get("samples"), dict) and row["samples"]:
            samples = next(iter(row["samples"].values()))
            row["samples"] = {_bus(g, gpus, bus): copy.deepcopy(samples) for g in range(gpus)}
        rows.append(row)
    return start, rows


def host_of(
    name: str, host: str = "gpu1", gpus: int | None = None, fault: Fault | None = None, **status: Any
) -> HostStress:
    """One host as the controller reads it from the capture ``name``: as captured, or its first GPU's
    entries widened to ``gpus`` GPUs (with ``fault`` applied)."""
    if gpus is None and fault is None:
        lines = lines_of(name)
        start = next(r for r in lines if r["event"] == "start")
        return host_stress(host, start, [r for r in lines if r["event"] == "row"], **status)
    start, rows = widened(name, gpus or 1, fault)
    return host_stress(host, start, rows, **status)


def scaled(gpu: int, metric: str, factor: float) -> Fault:
    """A fault: GPU ``gpu``'s figure of ``metric`` (``gemm.bf16``) times ``factor``."""

    def apply(index: int, phase: str, entry: dict[str, Any]) -> None:
        if index == gpu and phase == metric:
            key = "tflops" if metric.startswith("gemm.") else "gbps"
            entry[key] = entry[key] * factor

    return apply


def as_model(host: HostStress, name: str, figures: dict[str, list[float]]) -> HostStress:
    """``host`` (widened from a capture) with every GPU renamed ``name`` and given ``figures`` (metric → one
    value per GPU): a node of another model, carrying the figures measured on it."""
    for gpu in host.gpus:
        gpu.name = name
        for metric, values in figures.items():
            gpu.values[metric] = values[gpu.rank]
            gpu.entries[metric] = {**gpu.entries.get(metric, {}), THROUGHPUT[metric][2]: values[gpu.rank]}
    return host


def judged(hosts: list[HostStress], **variables: Any) -> dict[str, Any]:
    """A results document (the real H200 run's, its stress list replaced) with these hosts judged."""
    results = json.loads(RUN.read_text())
    inventory = {
        h.host: Host(h.host, vars=Vars({"burnin_minutes": 2, **variables}, host=h.host)) for h in hosts
    }
    records = [stage_record(h, 60.0, (30.0, 120.0)) for h in hosts]
    for judgement in judge_all(hosts, inventory):
        records += judgement.records
        results["checks"] += [c.to_dict() for c in judgement.checks]
    results["stress"] = records
    return results
