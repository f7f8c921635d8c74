"""From the stress program's lines to per-GPU figures: what one host measured, before any judging.

:mod:`diagnose.shipped.stress` prints a ``start`` line naming the host's GPUs and one ``row`` per phase
(``gemm.bf16`` ... ``sdc``, one per burn-in minute) holding an entry per GPU; the launcher hands them
back as a :class:`~diagnose.launchers.base.LaunchOutcome`. This module turns that into
:class:`HostStress` — figures by GPU and metric, each GPU's own error or reason for not measuring,
the burn-in's minutes and samples — so the judges (:mod:`diagnose.probes.stress_judge`,
:mod:`diagnose.probes.stress_burnin`) read plain data and are tested on captured lines. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from diagnose.core.units import human_bytes, is_number

#: Metric → (check id, unit, the key of the figure in the program's per-GPU entry).
THROUGHPUT = {
    "gemm.bf16": ("gpu.gemm", "TFLOP/s", "tflops"),
    "gemm.tf32": ("gpu.gemm", "TFLOP/s", "tflops"),
    "gemm.fp8": ("gpu.gemm", "TFLOP/s", "tflops"),
    "hbm.copy": ("gpu.hbm", "GB/s", "gbps"),
    "hbm.triad": ("gpu.hbm", "GB/s", "gbps"),
}
PHASE_OF = {
    "gemm.bf16": "gemm",
    "gemm.tf32": "gemm",
    "gemm.fp8": "gemm",
    "hbm.copy": "hbm",
    "hbm.triad": "hbm",
}


@dataclass
class GpuStress:
    """One GPU (or, on a CPU host, one rank) of one host: its figures and what became of each phase."""

    host: str
    rank: int
    gpu: int | None
    bus_id: str | None
    name: str
    values: dict[str, float] = field(default_factory=dict)
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    burnin: list[dict[str, Any]] = field(default_factory=list)
    samples: list[list[Any]] = field(default_factory=list)

    @property
    def label(self) -> str:
        """How messages name it: ``GPU 3 (00000000:3B:00.0)``, or ``rank 1`` on a CPU host."""
        if self.gpu is None:
            return f"rank {self.rank}"
        return f"GPU {self.gpu}" + (f" ({self.bus_id})" if self.bus_id else "")

    @property
    def key(self) -> str:
        """Its name among every GPU of the fleet."""
        return f"{self.host} {self.label}"


@dataclass
class HostStress:
    """What the stress program said on one host, and how its launch ended."""

    host: str
    device: str = ""
    status: str = "done"
    message: str = ""
    start: dict[str, Any] = field(default_factory=dict)
    gpus: list[GpuStress] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    fields: list[str] = field(default_factory=list)
    interval_s: float = 1.0
    sampler_problem: str | None = None
    in_progress: str | None = None
    evidence: str | None = None
    foreign: list[str] = field(default_factory=list)
    phases: list[str] = field(default_factory=list)
    arrived: set[str] = field(default_factory=set)

    @property
    def cpu(self) -> bool:
        return self.device == "cpu"

    def broken(self, phase: str) -> str | None:
        """Why a phase asked for did not deliver all its rows (the launch ended early); else None. A burn-in
        is broken only when not one of its minutes arrived: the minutes before a loss are its evidence."""
        if self.status == "done" or phase not in self.phases:
            return None
        rows = [m for m, p in PHASE_OF.items() if p == phase] or [phase]
        if all(m in self.arrived for m in rows):
            return None
        where = f" (during {self.in_progress})" if self.in_progress else ""
        return f"the stress program ended {self.status}{where}: {self.message or 'no reason given'}"


def describe_process(process: Mapping[str, Any]) -> str:
    """A foreign compute process as gpu.processes lists it: GPU, pid, name and memory (or, for one the host
    cannot see, the memory it holds)."""
    gpu = process.get("gpu")
    bus = process.get("bus_id")
    where = f"GPU {gpu} ({bus})" if gpu is not None else f"GPU {bus or '?'}"
    if process.get("pid") is None:
        held = process.get("held_mib")
        amount = f", {human_bytes(int(held) << 20)} held" if is_number(held) else ""
        return f"{where}: a process this host cannot see{amount}"
    used = process.get("used_mib")
    memory = human_bytes(int(used) << 20) if is_number(used) else "memory not reported"
    return f"{where}: pid {process.get('pid')} {process.get('process_name') or '?'}, {memory}"


def _gpu_of(host: str, entry: Mapping[str, Any]) -> GpuStress:
    return GpuStress(
        host=host,
        rank=int(entry.get("rank") or 0),
        gpu=entry.get("gpu") if isinstance(entry.get("gpu"), int) else None,
        bus_id=entry.get("bus_id") if isinstance(entry.get("bus_id"), str) else None,
        name=str(entry.get("name") or "?"),
    )


def _take(gpu: GpuStress, metric: str, entry: Mapping[str, Any]) -> None:
    """One GPU's entry of one phase row into its figures."""
    if entry.get("error"):
        gpu.errors[metric] = str(entry["error"])
        return
    if entry.get("skipped"):
        gpu.skipped[metric] = str(entry["skipped"])
        return
    kept = {k: v for k, v in entry.items() if k not in ("rank", "gpu", "bus_id", "name")}
    gpu.entries[metric] = kept
    if metric in THROUGHPUT and is_number(entry.get(THROUGHPUT[metric][2])):
        gpu.values[metric] = float(entry[THROUGHPUT[metric][2]])


def host_stress(
    host: str,
    start: Mapping[str, Any] | None,
    rows: Sequence[Mapping[str, Any]],
    status: str = "done",
    message: str = "",
    in_progress: str | None = None,
) -> HostStress:
    """A host's figures from the program's ``start`` line and rows (a launch outcome's, or a capture's)."""
    out = HostStress(host, status=status, message=message, in_progress=in_progress)
    if start:
        out.start = dict(start)
        out.device = str(start.get("device") or "")
        out.phases = list(start.get("phases") or [])
        out.gpus = [_gpu_of(host, info) for info in start.get("gpus") or [] if isinstance(info, Mapping)]
        for gpu, info in zip(out.gpus, start.get("gpus") or [], strict=False):
            if isinstance(info, Mapping) and info.get("error"):
                gpu.errors["start"] = str(info["error"])
    by_rank = {g.rank: g for g in out.gpus}
    for row in rows:
        metric = str(row.get("collective"))
        out.arrived.add(metric)
        if is_number(row.get("seconds")):
            out.seconds[metric] = round(out.seconds.get(metric, 0.0) + float(row["seconds"]), 3)
        if metric == "burnin":
            out.fields = list(row.get("fields") or out.fields)
            if is_number(row.get("interval_ms")):
                out.interval_s = float(row["interval_ms"]) / 1000.0
            out.sampler_problem = row.get("sampler_problem") or out.sampler_problem
        for entry in row.get("gpus") or []:
            if not isinstance(entry, Mapping):
                continue
            gpu = by_rank.get(int(entry.get("rank") or 0))
            if gpu is None:
                gpu = by_rank.setdefault(int(entry.get("rank") or 0), _gpu_of(host, entry))
                out.gpus.append(gpu)
            if metric == "burnin":
                _burnin_minute(gpu, row, entry)
            else:
                _take(gpu, metric, entry)
    return out


def _burnin_minute(gpu: GpuStress, row: Mapping[str, Any], entry: Mapping[str, Any]) -> None:
    minute = {"minute": row.get("bytes"), **{k: entry.get(k) for k in ("tflops", "products", "seconds")}}
    if entry.get("error"):
        minute["error"] = str(entry["error"])
        gpu.errors.setdefault("burnin", f"minute {row.get('bytes')}: {entry['error']}")
    gpu.burnin.append(minute)
    gpu.entries["burnin"] = {"minutes": len(gpu.burnin)}
    samples = (row.get("samples") or {}).get(gpu.bus_id or "", [])
    gpu.samples.extend(s for s in samples if isinstance(s, list))
