"""A hand-built GPU trace whose every number is worked out: the chrome-trace events torch.profiler writes
(kernels, their launches, annotations, syncs), arranged into steps of 1000 µs and written as one rank's file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def event(cat: str, name: str, ts: float, dur: float, tid: Any, **args: Any) -> dict[str, Any]:
    """One complete ("X") event of process 1."""
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}


def launch(ts: float, corr: int, tid: int, kernel: str, start: float, end: float) -> list[dict]:
    """A runtime launch at ``ts`` and its kernel from ``start`` to ``end``, tied by the correlation id."""
    return [
        event("cuda_runtime", "cudaLaunchKernel", ts, 5, tid, correlation=corr),
        event("kernel", kernel, start, end - start, 7 if "nccl" not in kernel else 20, correlation=corr),
    ]


def step_events(
    offset: float, number: int, sync: str, steps: bool = True, backward: bool = True
) -> list[dict]:
    """One step of 1000 µs: DataLoader 0–100; forward kernel 200–400; backward op 400–600 launching a
    kernel 450–700; NCCL all-reduce 550–900; optimizer kernel 900–950; a sync at 970."""
    o = offset
    events = [
        event("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", o, 100, 1),
        *launch(o + 150, number * 10 + 1, 1, "ampere_sgemm_128x64_nn", o + 200, o + 400),
        *launch(o + 450, number * 10 + 2, 2, "ampere_sgemm_64x64_tn", o + 450, o + 700),
        *launch(o + 500, number * 10 + 3, 2, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", o + 550, o + 900),
        *launch(o + 620, number * 10 + 4, 1, "multi_tensor_apply_kernel", o + 900, o + 950),
        event("user_annotation", "Optimizer.step#SGD.step", o + 610, 20, 1),
    ]
    if steps:
        events.append(event("user_annotation", f"ProfilerStep#{number}", o, 1000, 1))
    if backward:
        events.append(event("cpu_op", "autograd::engine::evaluate_function: AddmmBackward0", o + 400, 200, 2))
    if sync == "item":
        events += [
            event("cpu_op", "aten::item", o + 960, 30, 1),
            event("cuda_runtime", "cudaStreamSynchronize", o + 970, 15, 1),
        ]
    else:
        events.append(event("cuda_runtime", "cudaDeviceSynchronize", o + 970, 15, 1))
    return events


def write_trace(path: Path, events: list[dict], rank: int | None = 3) -> Path:
    """The events as one rank's trace file of an 8-rank NCCL job (no distributedInfo when ``rank`` is None)."""
    document: dict[str, Any] = {"schemaVersion": 1}
    if rank is not None:
        document["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 8}
    document["traceEvents"] = events
    path.write_text(json.dumps(document, indent=1))
    return path
