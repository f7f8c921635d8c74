"""One rank's torch.profiler trace → per-step metrics of compute, communication, host syncs and input.

The trace is read in one streaming pass (:mod:`diagnose.trace.collect`) that keeps only the spans the
metrics need; the metrics are then interval arithmetic (:mod:`diagnose.trace.intervals`) per step:

- steps are the ``ProfilerStep#N`` annotations that ``profiler.step()`` leaves on the CPU timeline, or,
  without them, the spans between repeated ``Optimizer.step#…`` annotations (said in ``notes``);
- a step's *time* on a GPU trace is the GPU's, not the host's window: a GPU-bound job's host runs ahead
  (queueing kernels for later), so its CPU window is shorter than the step the GPU executes and every share
  of it would be inflated. The GPU step runs from the first kernel launched from one window to the first
  kernel launched from the next (the last step: the larger of its window and its kernels' span); this
  period includes any idle the GPU spends waiting for the host, so a host-bound job's step is still whole.
  A CPU-only trace keeps the CPU window. ``step_time`` and each step's ``step_basis`` say which was used;
- on a GPU trace, communication is the NCCL kernels (``ncclKernel_*`` / ``ncclDevKernel_*``), compute every
  other kernel plus memcpy/memset; a kernel belongs to the step whose CPU window holds the runtime call
  that launched it (matched through ``correlation``), because the GPU runs behind the CPU;
- exposed communication is the part of the step's communication that no compute on any stream covers;
- backward compute is the kernels launched inside backward ops: the all-reduce time beyond it is what
  no bucketing can hide;
- the tail runs from the end of the last backward compute (kernels launched inside
  ``autograd::engine::evaluate_function`` ops) to the end of the step's last collective;
- host syncs are ``cudaStreamSynchronize`` / ``cudaDeviceSynchronize`` / ``cudaEventSynchronize`` calls,
  each given its owner by the CPU ops around it (:mod:`diagnose.trace.owners`): the user's code, or DDP,
  AMP's GradScaler, the optimizer or a communicator's setup, whose syncs are kept apart as information;
- DataParallel's calls and copies, and the communicators each step creates (:mod:`diagnose.trace.patterns`);
- input wait is the time in ``enumerate(DataLoader)#…__next__``; on a GPU trace the part of it during which
  the GPU had nothing to run is the stall that makes a job look communication- or compute-bound.

A CPU-only trace (gloo) has no kernels: communication is then the ``gloo:*`` ranges on gloo's own threads
and compute the operators of the training threads. What a CPU trace cannot answer (host-device syncs) is
listed in ``not_judged`` and its check is skipped.
"""

from __future__ import annotations

import statistics
from bisect import bisect_right
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from diagnose.catalog.stage_ids import TRAIN_INPUT, TRAIN_OVERLAP, TRAIN_SYNC, TRAIN_TAIL
from diagnose.trace import intervals
from diagnose.trace.collect import Collected, collect
from diagnose.trace.intervals import Span
from diagnose.trace.owners import USER, ThreadOps, owner_of
from diagnose.trace.patterns import StepPatterns, per_step, summarize_patterns
from diagnose.trace.reader import TraceReader

_US_PER_MS = 1000.0
# The per-step medians the summary holds, in this order.
SUMMARY_KEYS = (
    "step_ms", "step_cpu_ms", "compute_ms", "backward_ms", "comm_ms", "exposed_comm_ms", "overlap_ratio",
    "tail_ms", "syncs_per_step", "framework_syncs_per_step", "input_wait_ms", "input_stall_ms",
    "gpu_idle_before_ms", "comm_bytes",
)  # fmt: skip
STEP_TIME_GPU = (
    "GPU: from the first kernel launched in one step's window to the first launched in the next "
    "(the last step: the larger of its window and its kernels' span)"
)
STEP_TIME_CPU = "CPU: the step's window on the host timeline (no kernels to time it by)"


@dataclass
class StepMetrics:
    """One step, times in milliseconds; None where the trace cannot say."""

    step: int
    start_us: float
    step_ms: float
    compute_ms: float
    comm_ms: float
    exposed_comm_ms: float
    overlap_ratio: float | None
    tail_ms: float | None
    syncs_per_step: int | None
    input_wait_ms: float | None
    input_stall_ms: float | None
    comm_calls: int
    comm_bytes: int | None
    # GPU idle between the previous step's last kernel and this step's first.
    gpu_idle_before_ms: float | None = None
    sync_causes: dict[str, int] = field(default_factory=dict)
    # The host's window of the step, and what ``step_ms`` was taken from: "gpu" or "cpu".
    step_cpu_ms: float | None = None
    step_basis: str = "cpu"
    # Compute launched from backward ops: the part of the step an all-reduce can hide behind.
    backward_ms: float | None = None
    # Syncs the user cannot remove (DDP, GradScaler, optimizer, communicator setup): information only;
    # ``syncs_per_step`` and ``sync_causes`` are the user's own.
    framework_syncs_per_step: int | None = None
    framework_syncs: dict[str, int] = field(default_factory=dict)
    # The anti-patterns of diagnose.trace.patterns: DataParallel's forwards and copies, new communicators.
    dataparallel_calls: int = 0
    dataparallel_copies: int = 0
    new_communicators: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RankAnalysis:
    """What one rank's trace says; ``summary`` holds medians over the steady steps (all but the first of
    three or more)."""

    path: str
    rank: int | None
    rank_source: str  # "distributedInfo" or "file order"
    device: str  # "cuda" or "cpu"
    steps: list[StepMetrics]
    summary: dict[str, Any]
    not_judged: list[str]
    skipped: dict[str, str]  # check id → why this trace cannot answer it
    notes: list[str]
    step_source: str
    world_size: int | None = None
    backend: str | None = None
    host_name: str | None = None
    events: int = 0
    step_time: str = STEP_TIME_CPU  # which timeline step_ms was taken from, in words

    def to_dict(self) -> dict[str, Any]:
        document = asdict(self)
        document["steps"] = [s.to_dict() for s in self.steps]
        return document


def _windows(kept: Collected, notes: list[str]) -> tuple[list[tuple[int, float, float]], str]:
    """The steps as (number, start, end) in µs, and where they came from."""
    if kept.steps:
        return sorted(kept.steps, key=lambda s: s[1]), "ProfilerStep#N annotations"
    if len(kept.optimizer) >= 2:
        notes.append(
            "no ProfilerStep#N annotations (profiler.step() not called): steps are cut at the end of each "
            "Optimizer.step#…, the first one from the start of the trace"
        )
        ends = sorted(end for _, end in kept.optimizer)
        starts = [kept.first_us, *ends[:-1]]
        return [
            (n, s, e) for n, (s, e) in enumerate(zip(starts, ends, strict=True))
        ], "Optimizer.step annotations"
    notes.append("no ProfilerStep#N nor repeated Optimizer.step annotations: the whole trace is one step")
    return [(0, kept.first_us, kept.last_us)], "whole trace"


def _step_of(starts: list[float], windows: list[tuple[int, float, float]], moment: float) -> int | None:
    index = bisect_right(starts, moment) - 1
    if index < 0 or moment >= windows[index][2]:
        return None
    return index


def _inside(merged_by_tid: dict[Any, list[Span]], tid: Any, moment: float) -> bool:
    spans = merged_by_tid.get(tid)
    if not spans:
        return False
    index = bisect_right(spans, moment, key=lambda span: span[0]) - 1
    return index >= 0 and spans[index][1] >= moment


def _ms(us: float) -> float:
    return round(us / _US_PER_MS, 4)


def analyze_trace(path: Path, fallback_rank: int | None = None) -> RankAnalysis:
    """Stream ``path`` (.json or .json.gz) and measure every step; TraceFormatError if unreadable."""
    reader = TraceReader(Path(path))
    kept = collect(reader)
    notes: list[str] = []
    windows, step_source = _windows(kept, notes)
    device = "cuda" if kept.comm_kernels or kept.compute_kernels else "cpu"
    not_judged: list[str] = []
    skipped: dict[str, str] = {}
    if device == "cuda":
        steps = _gpu_steps(kept, windows, notes, not_judged, skipped)
    else:
        steps = _cpu_steps(kept, windows, notes, not_judged, skipped)
    gloo = [(start, tid) for start, _, tid in kept.cpu_comm]
    for step, found in zip(steps, per_step(kept.patterns, windows, gloo), strict=True):
        step.dataparallel_calls = found.dataparallel_calls
        step.dataparallel_copies = found.dataparallel_copies
        step.new_communicators = found.new_communicators
    gpu_timed = any(step.step_basis == "gpu" for step in steps)
    info = reader.meta.get("distributedInfo") or {}
    rank = info.get("rank") if isinstance(info.get("rank"), int) else None
    return RankAnalysis(
        path=str(path),
        rank=rank if rank is not None else fallback_rank,
        rank_source="distributedInfo" if rank is not None else "file order",
        device=device,
        steps=steps,
        summary=summarize(steps),
        not_judged=not_judged,
        skipped=skipped,
        notes=notes,
        step_source=step_source,
        world_size=info.get("world_size") if isinstance(info.get("world_size"), int) else None,
        backend=info.get("backend"),
        host_name=reader.meta.get("host_name"),
        events=kept.events,
        step_time=STEP_TIME_GPU if gpu_timed else STEP_TIME_CPU,
    )


def summarize(steps: list[StepMetrics]) -> dict[str, Any]:
    """Medians over the steady steps: the first of three or more is left out (caches, allocator, NCCL
    channels still warming up)."""
    steady = steps[1:] if len(steps) >= 3 else steps
    summary: dict[str, Any] = {"steps": len(steps), "steady_steps": len(steady)}
    for key in SUMMARY_KEYS:
        values = [getattr(s, key) for s in steady if getattr(s, key) is not None]
        summary[key] = round(statistics.median(values), 4) if values else None
    for key, field_name in (("sync_causes", "sync_causes"), ("framework_sync_causes", "framework_syncs")):
        causes: dict[str, int] = defaultdict(int)
        for step in steady:
            for cause, count in getattr(step, field_name).items():
                causes[cause] += count
        summary[key] = dict(causes)
    found = [StepPatterns(s.dataparallel_calls, s.dataparallel_copies, s.new_communicators) for s in steps]
    summary.update(summarize_patterns(found))
    return summary


def _by_step(
    items: list[tuple[float, float, Any]], when: list[float], starts: list[float], windows: list
) -> list[list[Span]]:
    """Spans grouped by the step holding each one's moment ``when[i]``; spans outside every step drop."""
    grouped: list[list[Span]] = [[] for _ in windows]
    for (start, end, _), moment in zip(items, when, strict=True):
        index = _step_of(starts, windows, moment)
        if index is not None:
            grouped[index].append((start, end))
    return grouped


def _gpu_steps(kept, windows, notes, not_judged, skipped) -> list[StepMetrics]:
    starts = [w[1] for w in windows]
    launch = kept.launches

    def launched(kernel: tuple[float, float, Any]) -> float:
        found = launch.get(kernel[2])
        return found[0] if found else kernel[0]

    comm_by_step = _by_step(kept.comm_kernels, [launched(k) for k in kept.comm_kernels], starts, windows)
    compute_by_step = _by_step(
        kept.compute_kernels, [launched(k) for k in kept.compute_kernels], starts, windows
    )
    all_compute = intervals.merge((s, e) for s, e, _ in kept.compute_kernels)
    busy = intervals.merge([*all_compute, *((s, e) for s, e, _ in kept.comm_kernels)])
    backward = {tid: intervals.merge(spans) for tid, spans in kept.backward.items()}
    backward_kernels = _backward_kernels(kept, backward, starts, windows)
    if len(kept.devices) > 1:
        notes.append(
            f"kernels on {len(kept.devices)} devices in one trace: measured as one timeline (compute on "
            "any of them counts as covering communication)"
        )
    if not backward:
        notes.append(
            "no autograd::engine ops in the trace: the tail is measured from the last compute kernel that "
            "started before the last collective"
        )
    syncs, framework_syncs = _syncs_by_step(kept, starts, windows)
    loader = intervals.merge(kept.dataloader)
    firsts = [
        min((s for s, _ in [*c, *k]), default=None)
        for c, k in zip(comm_by_step, compute_by_step, strict=True)
    ]
    steps = []
    previous_end: float | None = None
    for index, (number, start, end) in enumerate(windows):
        comm = intervals.merge(comm_by_step[index])
        compute = intervals.merge(compute_by_step[index])
        backward_spans = intervals.merge(backward_kernels[index])
        comm_us = intervals.total(comm)
        exposed_us = intervals.uncovered(comm, all_compute)
        tail = None
        if comm:
            last_comm = comm[-1][1]
            if backward:
                last_compute = backward_spans[-1][1] if backward_spans else None
            else:
                before = [e for s, e in compute_by_step[index] if s < comm[-1][0]]
                last_compute = max(before) if before else None
            tail = _ms(max(0.0, last_comm - last_compute)) if last_compute is not None else None
        kernels = [*comm, *compute]
        idle_before = None
        if kernels and previous_end is not None:
            idle_before = _ms(max(0.0, min(s for s, _ in kernels) - previous_end))
        low, step_us, basis, unseen = start, end - start, "cpu", False
        if kernels:
            last_end = max(e for _, e in kernels)
            following = firsts[index + 1] if index + 1 < len(firsts) else None
            if following is not None:
                step_us = following - firsts[index]
            else:
                step_us = max(step_us, last_end - firsts[index])
                unseen = len(windows) > 1
            low, basis = firsts[index], "gpu"
            previous_end = last_end
        # Input waits are read over the same span as the step: on the GPU timeline, the fetch of the next
        # batch delays the next step's first kernel, so the idle it causes ends this step. After the last
        # step that fetch is outside the trace (``unseen``): its input is unknown, not zero.
        step_loader = intervals.clip(loader, low, low + step_us)
        causes = syncs[index]
        steps.append(
            StepMetrics(
                step=number,
                start_us=start,
                step_ms=_ms(step_us),
                step_cpu_ms=_ms(end - start),
                step_basis=basis,
                backward_ms=_ms(intervals.total(backward_spans)) if backward else None,
                compute_ms=_ms(intervals.total(compute)),
                comm_ms=_ms(comm_us),
                exposed_comm_ms=_ms(exposed_us),
                overlap_ratio=round(1.0 - exposed_us / comm_us, 4) if comm_us > 0 else None,
                tail_ms=tail,
                syncs_per_step=sum(causes.values()),
                input_wait_ms=None if unseen else _ms(intervals.total(step_loader)),
                input_stall_ms=None if unseen else _ms(intervals.uncovered(step_loader, busy)),
                gpu_idle_before_ms=idle_before,
                comm_calls=len(comm_by_step[index]),
                comm_bytes=_bytes_in(kept.comm_sizes, start, end),
                sync_causes=causes,
                framework_syncs_per_step=sum(framework_syncs[index].values()),
                framework_syncs=framework_syncs[index],
            )
        )
    if not kept.comm_kernels:
        reason = (
            "no NCCL kernels in the trace (a single-GPU job, or communication outside the profiled steps)"
        )
        not_judged.append(f"overlap and tail: {reason}")
        skipped[TRAIN_OVERLAP] = skipped[TRAIN_TAIL] = reason
    _no_dataloader(kept, not_judged, skipped)
    return steps


def _no_dataloader(kept: Collected, not_judged: list[str], skipped: dict[str, str]) -> None:
    if kept.dataloader:
        return
    reason = (
        "no enumerate(DataLoader) ops in the profiled steps (batches fed without a DataLoader, or fetched "
        "outside the profiled steps): input waits cannot be told from other idle time"
    )
    not_judged.append(f"input pipeline: {reason}")
    skipped[TRAIN_INPUT] = reason


def _backward_kernels(kept, backward, starts, windows) -> list[list[Span]]:
    """Per step, the compute kernels launched from inside a backward op."""
    spans: list[list[Span]] = [[] for _ in windows]
    if not backward:
        return spans
    for start, end, correlation in kept.compute_kernels:
        found = kept.launches.get(correlation)
        if not found or not _inside(backward, found[1], found[0]):
            continue
        index = _step_of(starts, windows, found[0])
        if index is not None:
            spans[index].append((start, end))
    return spans


def _syncs_by_step(kept, starts, windows) -> tuple[list[dict[str, int]], list[dict[str, int]]]:
    """Per step, host-device sync calls counted by cause, the user's apart from the frameworks' (whose
    owner heads each cause): :func:`diagnose.trace.owners.owner_of` reads the ops around each call."""
    user: list[dict[str, int]] = [defaultdict(int) for _ in windows]
    framework: list[dict[str, int]] = [defaultdict(int) for _ in windows]
    threads: dict[Any, ThreadOps] = {}
    for start, _end, tid, name in kept.syncs:
        index = _step_of(starts, windows, start)
        if index is None:
            continue
        if tid not in threads:
            threads[tid] = ThreadOps(
                kept.cpu_ops.get(tid, []),
                kept.annotations.get(tid, []),
                kept.marks.get(tid, []),
                kept.frames.get(tid, []),
            )
        owner, cause = owner_of(threads[tid].call(name, start))
        (user if owner == USER else framework)[index][cause] += 1
    return [dict(c) for c in user], [dict(c) for c in framework]


def _bytes_in(sizes: list[tuple[float, int]], start: float, end: float) -> int | None:
    moved = [size for moment, size in sizes if start <= moment < end]
    return sum(moved) if moved else None


def _cpu_steps(kept, windows, notes, not_judged, skipped) -> list[StepMetrics]:
    starts = [w[1] for w in windows]
    comm_threads = {tid for _, _, tid in kept.cpu_comm}
    comm_items = kept.cpu_comm
    if not comm_items and kept.cpu_comm_calls:
        notes.append("no gloo:* ranges: communication measured from the c10d / record_param_comms calls")
        comm_items = [(s, e, None) for s, e in kept.cpu_comm_calls]
    compute = intervals.merge(
        span for tid, spans in kept.cpu_ops.items() if tid not in comm_threads for span in spans
    )
    comm_by_step = _by_step(comm_items, [s for s, _, _ in comm_items], starts, windows)
    optimizer = sorted(kept.optimizer)
    backward = intervals.merge(span for spans in kept.backward.values() for span in spans)
    loader = intervals.merge(kept.dataloader)
    steps = []
    for index, (number, start, end) in enumerate(windows):
        # Gradients are averaged before the optimizer runs, so an all-reduce range still open when the
        # optimizer starts stays open for bookkeeping, not for data: it is cut there.
        cut = next((s for s, _ in optimizer if start <= s < end), end)
        raw = comm_by_step[index]
        comm = intervals.merge((s, min(e, cut) if s < cut else min(e, end)) for s, e in raw)
        comm_us = intervals.total(comm)
        exposed_us = intervals.uncovered(comm, compute)
        tail = None
        step_backward = intervals.clip(backward, start, end)
        if comm and step_backward:
            tail = _ms(max(0.0, comm[-1][1] - step_backward[-1][1]))
        step_loader = intervals.clip(loader, start, end)
        steps.append(
            StepMetrics(
                step=number,
                start_us=start,
                step_ms=_ms(end - start),
                step_cpu_ms=_ms(end - start),
                backward_ms=_ms(intervals.total(step_backward)) if backward else None,
                compute_ms=_ms(intervals.total(intervals.clip(compute, start, end))),
                comm_ms=_ms(comm_us),
                exposed_comm_ms=_ms(exposed_us),
                overlap_ratio=round(1.0 - exposed_us / comm_us, 4) if comm_us > 0 else None,
                tail_ms=tail,
                syncs_per_step=None,
                input_wait_ms=_ms(intervals.total(step_loader)),
                input_stall_ms=None,
                comm_calls=len(raw),
                comm_bytes=_bytes_in(kept.comm_sizes, start, end),
            )
        )
    reason = (
        "a CPU-only trace (no CUDA kernels): there is no device for the host to wait on, so "
        "cudaStreamSynchronize / .item() stalls cannot occur or be seen"
    )
    not_judged.append(f"host sync points per step: {reason}")
    skipped[TRAIN_SYNC] = reason
    not_judged.append(
        "GPU idle during input waits: a CPU-only trace; input is judged by DataLoader time alone"
    )
    _no_dataloader(kept, not_judged, skipped)
    if not comm_items:
        why = "no gloo:* ranges nor c10d calls in the trace (a single-process job?)"
        not_judged.append(f"overlap and tail: {why}")
        skipped[TRAIN_OVERLAP] = skipped[TRAIN_TAIL] = why
    elif not backward:
        why = "no autograd::engine ops in the trace, so the end of the backward pass is unknown"
        not_judged.append(f"last-bucket tail: {why}")
        skipped[TRAIN_TAIL] = why
    return steps
