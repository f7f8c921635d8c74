"""The one streaming pass over a torch.profiler trace: keep the spans the metrics need, as compact tuples.

A trace of a real job runs to hundreds of MB, so nothing is kept whole: each event is looked at once
(:class:`diagnose.trace.reader.TraceReader` hands them over one at a time) and only what
:mod:`diagnose.trace.analyze` measures survives it: steps, kernels and the runtime calls that launched them,
sync calls, the CPU ops of interest and the collectives' sizes.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from diagnose.trace.intervals import Span
from diagnose.trace.owners import AMP_OPS, COMM_INIT_OP, GRAD_SCALER_FILE, ITEM_OPS, OPTIMIZER_PREFIX, Named
from diagnose.trace.patterns import COMM_INIT, PatternSpans
from diagnose.trace.reader import TraceFormatError, TraceReader

COMM_KERNEL_PREFIXES = ("ncclKernel", "ncclDevKernel")
GPU_COMPUTE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
RUNTIME_CATEGORIES = ("cuda_runtime", "cuda_driver")
SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")
BACKWARD_PREFIX = "autograd::engine::evaluate_function"
DATALOADER_PREFIX = "enumerate(DataLoader)#"
STEP_PREFIX = "ProfilerStep#"
CPU_COMM_PREFIXES = ("gloo:",)
CPU_COMM_CALLS = ("record_param_comms", "c10d::")
CPU_CATEGORIES = ("cpu_op", "user_annotation")
PYTHON_CATEGORY = "python_function"
# torch's dtype names in record_param_comms → bytes per element.
DTYPE_BYTES = {
    "Float": 4, "Half": 2, "BFloat16": 2, "Double": 8, "Int": 4, "Long": 8, "Byte": 1, "Char": 1,
    "Short": 2, "Bool": 1, "Float8_e4m3fn": 1, "Float8_e5m2": 1,
}  # fmt: skip


@dataclass
class Collected:
    """The spans one pass over the events keeps; everything else is dropped as it streams by."""

    events: int = 0
    first_us: float = float("inf")
    last_us: float = float("-inf")
    steps: list[tuple[int, float, float]] = field(default_factory=list)
    optimizer: list[Span] = field(default_factory=list)
    comm_kernels: list[tuple[float, float, int | None]] = field(default_factory=list)
    compute_kernels: list[tuple[float, float, int | None]] = field(default_factory=list)
    launches: dict[int, tuple[float, Any]] = field(default_factory=dict)
    syncs: list[tuple[float, float, Any, str]] = field(default_factory=list)
    annotations: dict[Any, list[Named]] = field(default_factory=lambda: defaultdict(list))
    # Item and AMP ops and communicator inits, and GradScaler's Python frames: who owns a sync.
    marks: dict[Any, list[Named]] = field(default_factory=lambda: defaultdict(list))
    frames: dict[Any, list[Named]] = field(default_factory=lambda: defaultdict(list))
    patterns: PatternSpans = field(default_factory=PatternSpans)
    backward: dict[Any, list[Span]] = field(default_factory=lambda: defaultdict(list))
    dataloader: list[Span] = field(default_factory=list)
    cpu_ops: dict[Any, list[Span]] = field(default_factory=lambda: defaultdict(list))
    cpu_comm: list[tuple[float, float, Any]] = field(default_factory=list)
    cpu_comm_calls: list[Span] = field(default_factory=list)
    comm_sizes: list[tuple[float, int]] = field(default_factory=list)
    devices: set[Any] = field(default_factory=set)  # Kineto's pid of a GPU activity is its device


def collect(reader: TraceReader) -> Collected:
    """The one streaming pass: keep the spans the metrics use, as compact tuples."""
    kept = Collected()
    for event in reader.events():
        kept.events += 1
        if event.get("ph") != "X":
            continue
        try:
            start = float(event["ts"])
            end = start + float(event.get("dur") or 0.0)
        except (KeyError, TypeError, ValueError):
            continue
        category = str(event.get("cat", "")).lower()
        name = str(event.get("name", ""))
        if category == "trace":  # the profiler's own span over the whole window
            continue
        kept.first_us = min(kept.first_us, start)
        kept.last_us = max(kept.last_us, end)
        args = event.get("args") or {}
        if category in GPU_COMPUTE_CATEGORIES:
            kept.devices.add(event.get("pid"))
            correlation = args.get("correlation")
            if category == "kernel" and name.startswith(COMM_KERNEL_PREFIXES):
                kept.comm_kernels.append((start, end, correlation))
            else:
                kept.compute_kernels.append((start, end, correlation))
        elif category in RUNTIME_CATEGORIES:
            correlation = args.get("correlation")
            if correlation is not None:
                kept.launches[correlation] = (start, event.get("tid"))
            if name in SYNC_CALLS:
                kept.syncs.append((start, end, event.get("tid"), name))
        elif category in CPU_CATEGORIES:
            _collect_cpu(kept, category, name, start, end, event.get("tid"), args)
        elif category == PYTHON_CATEGORY:
            kept.patterns.see_frame(name, start, end)
            if GRAD_SCALER_FILE in name:
                kept.frames[event.get("tid")].append((start, end, name))
    if kept.first_us == float("inf"):
        raise TraceFormatError(reader.path, "no timed events (ph 'X'): not a torch.profiler trace")
    return kept


def _collect_cpu(
    kept: Collected, category: str, name: str, start: float, end: float, tid: Any, args: dict
) -> None:
    if name.startswith(STEP_PREFIX):
        number = name[len(STEP_PREFIX) :]
        if number.isdigit():
            kept.steps.append((int(number), start, end))
        return
    if name.startswith(DATALOADER_PREFIX):
        kept.dataloader.append((start, end))
        return
    if name.startswith(CPU_COMM_PREFIXES):
        kept.cpu_comm.append((start, end, tid))
        return
    if name.startswith(CPU_COMM_CALLS):
        kept.cpu_comm_calls.append((start, end))
        if name == "record_param_comms":
            kept.patterns.see_cpu(name, start, args)
            size = _comm_bytes(args)
            if size is not None:
                kept.comm_sizes.append((start, size))
            if args.get("Collective name") == COMM_INIT:
                kept.marks[tid].append((start, end, COMM_INIT_OP))
        return
    kept.patterns.see_cpu(name, start, args)
    if category == "user_annotation":  # record_function ranges: what a sync inside them is blamed on
        kept.annotations[tid].append((start, end, name))
    if name.startswith(OPTIMIZER_PREFIX):
        kept.optimizer.append((start, end))
    elif name.startswith(BACKWARD_PREFIX):
        kept.backward[tid].append((start, end))
    elif name in ITEM_OPS or name in AMP_OPS:
        kept.marks[tid].append((start, end, name))
    kept.cpu_ops[tid].append((start, end))


def _comm_bytes(args: dict[str, Any]) -> int | None:
    """Bytes one all-reduce moved, from record_param_comms' arguments (other collectives: None)."""
    if "allreduce" not in str(args.get("Collective name", "")).replace("_", ""):
        return None
    try:
        count = int(args.get("In msg nelems"))
    except (TypeError, ValueError):
        return None
    return count * DTYPE_BYTES.get(str(args.get("dtype")), 4)
