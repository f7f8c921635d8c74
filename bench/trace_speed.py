"""How fast, and in how much memory, a large torch.profiler trace is analyzed: our streaming reader against
reading the whole file at once (and Holistic Trace Analysis, when a Python that has it is named).

Generates a GPU-shaped Kineto trace of about ``--size-mb`` MB (default 500): DDP steps of forward and
backward kernels launched by runtime calls inside CPU ops, ten NCCL all-reduce buckets per step that overlap
the backward pass except the last one, an optimizer, a DataLoader fetch; every event pretty-printed the
way Kineto writes it. The planted numbers are known (comm 4.0 ms, exposed 0.4 ms, tail 0.45 ms per step),
so the table also says whether each reader got them. Each method runs in a fresh child process so that its
peak RSS is its own (``os.wait4``); times include interpreter start and imports.

    python bench/trace_speed.py [--size-mb 500] [--keep FILE] [--hta-python /path/to/venv/bin/python]

HTA (``holistictraceanalysis``) is not a dependency of diagnose; to compare, install it into a virtual
environment of its own and pass that environment's python.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEP_US = 10_000.0
FORWARD_KERNELS, BACKWARD_KERNELS, OPTIMIZER_KERNELS, BUCKETS = 1000, 1500, 100, 10
KERNEL_US = 3.0
PLANTED = {"comm_ms": 4.0, "exposed_comm_ms": 0.4, "tail_ms": 0.45, "overlap_ratio": 0.9}

_KERNEL = """  {{
    "ph": "X", "cat": "kernel", "name": "{name}", "pid": 0, "tid": {stream},
    "ts": {ts:.3f}, "dur": {dur:.3f},
    "args": {{
      "External id": {corr},
      "queued": 0, "device": 0, "context": 1,
      "stream": {stream}, "correlation": {corr},
      "registers per thread": 128,
      "shared memory": 16384,
      "blocks per SM": 1.8,
      "warps per SM": 14.2,
      "grid": [132, 1, 1],
      "block": [256, 1, 1],
      "est. achieved occupancy %": 12
    }}
  }},
"""
_RUNTIME = """  {{
    "ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 4242, "tid": {tid},
    "ts": {ts:.3f}, "dur": 2.000,
    "args": {{
      "External id": {corr},
      "cbid": 211, "correlation": {corr}
    }}
  }},
"""
_CPU_OP = """  {{
    "ph": "X", "cat": "{cat}", "name": "{name}", "pid": 4242, "tid": {tid},
    "ts": {ts:.3f}, "dur": {dur:.3f},
    "args": {{
      "External id": {ext},"Record function id": 0, "Sequence number": {ext}, "Fwd thread id": 1, "Ev Idx": {ext}
    }}
  }},
"""


def _step(number: int, corr: int) -> tuple[str, int]:
    """One step's events as Kineto writes them, and the next free correlation id."""
    o = number * STEP_US
    out = [
        _CPU_OP.format(cat="user_annotation", name=f"ProfilerStep#{number}", tid=1, ts=o, dur=STEP_US, ext=corr),
        _CPU_OP.format(
            cat="user_annotation",
            name="enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__",
            tid=1, ts=o + 10, dur=150.0, ext=corr,
        ),
        _CPU_OP.format(
            cat="cpu_op", name="autograd::engine::evaluate_function: AddmmBackward0",
            tid=2, ts=o + 1400, dur=2000.0, ext=corr,  # where the backward kernels are launched
        ),
    ]  # fmt: skip

    def launch(ts: float, name: str, stream: int, dur: float, tid: int) -> None:
        nonlocal corr
        cpu = o + 300 + (ts - o - 300) * 0.4  # the CPU runs ahead of the GPU
        out.append(_CPU_OP.format(cat="cpu_op", name="aten::mm", tid=tid, ts=cpu - 1, dur=4.0, ext=corr))
        out.append(_RUNTIME.format(tid=tid, ts=cpu, corr=corr))
        out.append(_KERNEL.format(name=name, stream=stream, ts=ts, dur=dur, corr=corr))
        corr += 1

    for i in range(FORWARD_KERNELS):
        launch(
            o + 300 + i * KERNEL_US,
            "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64",
            7,
            KERNEL_US,
            1,
        )
    for i in range(BACKWARD_KERNELS):
        launch(
            o + 3300 + i * KERNEL_US,
            "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize128x128x64",
            7,
            KERNEL_US,
            2,
        )
    for i in range(BUCKETS):  # the last bucket starts 50 µs after the backward pass ends at 7800
        launch(
            o + 3800 + 450 * i,
            "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            20,
            400.0,
            2,
        )
    for i in range(OPTIMIZER_KERNELS):
        launch(o + 8300 + i * KERNEL_US, "void at::native::multi_tensor_apply_kernel", 7, KERNEL_US, 1)
    return "".join(out), corr


def generate(path: Path, size_mb: int) -> int:
    """Write the trace; returns its number of steps."""
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(
            '{\n  "schemaVersion": 1,\n  "deviceProperties": [],\n'
            '  "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 8},\n'
            '  "displayTimeUnit": "ms",\n  "traceEvents": [\n'
        )
        corr, steps = 1, 0
        while handle.tell() < size_mb * 1_000_000:
            text, corr = _step(steps, corr)
            handle.write(text)
            steps += 1
        handle.write('  {"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": 0}\n')
        handle.write('  ],\n  "traceName": "bench"\n}\n')
    return steps


# What each child runs: prints one line "events overlap comm exposed tail" (— where not measured).
OURS = """
import sys
from diagnose.trace.analyze import analyze_trace
a = analyze_trace(sys.argv[1])
s = a.summary
print(a.events, s["overlap_ratio"], s["comm_ms"], s["exposed_comm_ms"], s["tail_ms"])
"""
READER_ONLY = """
import sys
from diagnose.trace.reader import TraceReader
print(sum(1 for _ in TraceReader(sys.argv[1]).events()), "- - - -")
"""
JSON_LOAD = """
import json, sys
with open(sys.argv[1], "rb") as handle:
    document = json.load(handle)
print(len(document["traceEvents"]), "- - - -")
"""
IJSON_ITEMS = """
import sys, ijson
with open(sys.argv[1], "rb") as handle:
    n = sum(1 for _ in ijson.items(handle, "traceEvents.item", use_float=True))
print(n, ijson.backend, "- - -")
"""
HTA = """
import os, sys, logging
logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
folder = os.path.dirname(sys.argv[1])
a = TraceAnalysis(trace_dir=folder)
value = a.get_comm_comp_overlap(visualize=False)["comp_comm_overlap_pctg"].iloc[0] / 100
print(len(a.t.get_trace(0)), round(value, 4), "- - -")
"""


def _measure(python: str, code: str, trace: Path, env: dict[str, str]) -> tuple[float, float, str]:
    """(seconds, peak RSS MiB, the child's line) of one method in a fresh process."""
    started = time.monotonic()
    child = subprocess.Popen(
        [python, "-c", code, str(trace)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    output = child.stdout.read() if child.stdout else ""
    _pid, status, usage = os.wait4(child.pid, 0)
    seconds = time.monotonic() - started
    line = output.strip().splitlines()[-1] if output.strip() else f"failed (status {status})"
    return seconds, usage.ru_maxrss / 1024.0, line


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=500)
    parser.add_argument("--keep", help="write the trace here and keep it (default: a temporary file)")
    parser.add_argument("--hta-python", help="a python with holistictraceanalysis (and ijson) installed")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="trace-speed-"))
    trace = Path(args.keep) if args.keep else folder / "rank-0.json"
    started = time.monotonic()
    steps = generate(trace, args.size_mb)
    size = trace.stat().st_size / 1e6
    print(f"trace: {size:.0f} MB, {steps} steps, generated in {time.monotonic() - started:.1f} s")
    print(f"planted per step: {PLANTED}")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    methods = [
        ("diagnose analyze_trace (streaming)", sys.executable, OURS),
        ("diagnose reader only (no metrics)", sys.executable, READER_ONLY),
        ("json.load whole file (no metrics)", sys.executable, JSON_LOAD),
    ]
    if args.hta_python:
        methods += [
            ("ijson items, its fastest backend", args.hta_python, IJSON_ITEMS),
            ("HTA 0.5.0 comm/comp overlap", args.hta_python, HTA),
        ]
    print(f"{'method':<38} {'seconds':>8} {'peak RSS MiB':>13} {'RSS/file':>9}  result")
    for name, python, code in methods:
        seconds, rss, line = _measure(python, code, trace, env)
        print(f"{name:<38} {seconds:8.1f} {rss:13.0f} {rss / (size * 1e6 / 2**20):9.2f}  {line}")
    if not args.keep:
        trace.unlink()
        folder.rmdir()
    return 0


if __name__ == "__main__":
    sys.exit(main())
