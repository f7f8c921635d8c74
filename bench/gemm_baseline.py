"""The plain reference for gpu.gemm and gpu.hbm: a bare torch loop on one GPU, timed with CUDA events.

gpu.gemm is only as credible as its agreement with the simplest possible measurement: the same product
in a loop, nothing else in the process. This script times ``torch.matmul`` of n×n random matrices
(bf16, tf32) and ``torch._scaled_mm`` (fp8, where the GPU has FP8 tensor cores), and a device copy,
each as ``--iters`` back-to-back calls between two CUDA events after a warm-up, repeated ``--repeat``
times, and prints a table (median and best of the repeats) and one JSON line per row for fixtures.

With ``--hog SECONDS`` it does nothing but keep the GPU busy with bf16 products for that long: the second
process of the acceptance test that a sign-off must notice (gpu.gemm below its floor).

    python3 bench/gemm_baseline.py [--gpu 0] [--n 8192] [--iters 50] [--repeat 5]
    python3 bench/gemm_baseline.py --hog 90
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any


def events_seconds(torch: Any, work: Callable[[], Any], iters: int) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        work()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3


def measure(torch: Any, work: Callable[[], Any], amount: float, iters: int, repeat: int) -> list[float]:
    """``amount`` per call per second, for each of ``repeat`` timed loops of ``iters`` calls."""
    events_seconds(torch, work, 5)
    return [amount * iters / events_seconds(torch, work, iters) for _ in range(repeat)]


def rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    import torch

    torch.cuda.set_device(args.gpu)
    n, device = args.n, torch.device("cuda", args.gpu)
    a32 = torch.randn(n, n, device=device)
    b32 = torch.randn(n, n, device=device)
    flop = 2.0 * n**3 / 1e12
    out: list[dict[str, Any]] = []
    a16, b16 = a32.bfloat16(), b32.bfloat16()
    c16 = torch.empty_like(a16)
    out.append(
        {
            "what": "matmul bf16",
            "unit": "TFLOP/s",
            "values": measure(torch, lambda: torch.matmul(a16, b16, out=c16), flop, args.iters, args.repeat),
        }
    )
    torch.backends.cuda.matmul.allow_tf32 = True
    c32 = torch.empty_like(a32)
    out.append(
        {
            "what": "matmul tf32",
            "unit": "TFLOP/s",
            "values": measure(
                torch, lambda: torch.matmul(a32, b32, out=c32), flop, args.iters // 2 or 1, args.repeat
            ),
        }
    )
    torch.backends.cuda.matmul.allow_tf32 = False
    if torch.cuda.get_device_capability(device) >= (8, 9) and hasattr(torch, "_scaled_mm"):
        a8 = a32.to(torch.float8_e4m3fn)
        b8 = b32.to(torch.float8_e4m3fn).t().contiguous().t()
        one = torch.ones((), device=device)
        out.append(
            {
                "what": "_scaled_mm fp8",
                "unit": "TFLOP/s",
                "values": measure(
                    torch,
                    lambda: torch._scaled_mm(
                        a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=True
                    ),
                    flop,
                    args.iters * 2,
                    args.repeat,
                ),
            }
        )
    src = torch.ones(args.copy_bytes // 4, device=device)
    dst = torch.empty_like(src)
    out.append(
        {
            "what": "device copy",
            "unit": "GB/s",
            "values": measure(torch, lambda: dst.copy_(src), 2 * args.copy_bytes / 1e9, 20, args.repeat),
        }
    )
    for row in out:
        row["median"] = statistics.median(row["values"])
        row["best"] = max(row["values"])
        row["gpu"] = torch.cuda.get_device_name(device)
        row["n"] = n
    return out


def hog(seconds: float, gpu: int) -> None:
    import torch

    torch.cuda.set_device(gpu)
    a = torch.randn(8192, 8192, device=f"cuda:{gpu}").bfloat16()
    c = torch.empty_like(a)
    print(json.dumps({"hog": "started", "time": round(time.time(), 3)}), flush=True)
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        for _ in range(50):
            torch.matmul(a, a, out=c)
        torch.cuda.synchronize()
    print(json.dumps({"hog": "stopped", "time": round(time.time(), 3)}), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--n", type=int, default=8192)
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--copy-bytes", type=int, default=1 << 30)
    parser.add_argument("--hog", type=float, default=0.0, help="only keep the GPU busy for this many seconds")
    args = parser.parse_args(argv)
    if args.hog > 0:
        hog(args.hog, args.gpu)
        return 0
    table = rows(args)
    print(f"{'what':<16} {'median':>10} {'best':>10}  unit     (n={args.n}, {table[0]['gpu']})")
    for row in table:
        print(f"{row['what']:<16} {row['median']:>10.1f} {row['best']:>10.1f}  {row['unit']}")
    for row in table:
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
