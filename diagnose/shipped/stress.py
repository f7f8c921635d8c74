"""GPUs under load: GEMM throughput, HBM bandwidth, a pattern memory test, bitwise agreement and a burn-in.

Shipped to each host and started there with torchrun, one rank per GPU, so every GPU of the host works at
the same time (as a training job loads them: shared power, shared cooling). The ranks talk over gloo only
to hand their figures to rank 0, which prints them; nothing goes through NCCL. Phases, in order, each
after a barrier so that the GPUs start together:

* ``gemm.bf16``, ``gemm.tf32``, ``gemm.fp8``: dense square matrix products on random data (``--gemm-n``),
  timed between CUDA events; TFLOP/s = 2·n³ per product. fp8 (``torch._scaled_mm``) only where the GPU has
  FP8 tensor cores (compute capability 8.9 and up), else the row says why not;
* ``hbm.copy`` and ``hbm.triad``: ``b = a`` and ``a = b + s·c`` over ``--hbm-bytes`` buffers; GB/s = 1e9
  bytes read and written per second; through these and the gemm phases rank 0 samples nvidia-smi every
  :data:`gpu_sampler.PHASE_SAMPLE_MS` and each GPU's entry carries the median SM clock, power draw, enforced power
  limit and maximum SM clock over its phase (:data:`gpu_sampler.PHASE_READINGS`): what the GPU could do while it ran;
* ``memtest``: most of the free device memory (``--memtest-fraction``) in 1 GiB chunks of 64-bit words,
  written and read back with walking ones, seeded random words and each word's own address (and its
  complement), pass after pass until ``--memtest-s`` runs out; every mismatching word is counted and the
  first ones are located (byte offset in the tested region, expected and read values). A CUDA error (an
  uncorrectable ECC error kills the context) is reported as the GPU's error;
* ``sdc``: the same seeded chain of bf16 products on every GPU, with deterministic algorithms, repeated;
  the result's exact integer checksum is reported per GPU, so GPUs and hosts are compared bit for bit;
* ``burnin``: bf16 products for ``--burnin-s`` seconds, one row per minute with each GPU's TFLOP/s over
  that minute and rank 0's ``nvidia-smi --query-gpu ... -lms`` samples (clocks, temperatures, power,
  clock-event reasons, ECC and row-remap counters), so a host lost in minute seven keeps six minutes.

On a host without GPU (``--device cpu``) the same code runs with small sizes on torch CPU: the mechanics
are exercised, the figures mean nothing about a GPU. Rows follow the progress protocol of
:mod:`diagnose.shipped.common` (``start``, ``begin``, ``row`` with ``collective`` = the phase and
``bytes`` = 0, or the burn-in minute, ``done``); each row holds one entry per GPU under ``gpus``.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

if __package__:  # imported on the controller, as diagnose.shipped.<program>
    from . import common, gpu_sampler
else:  # run on a host as program.py, the launcher's copies of common.py and gpu_sampler.py beside it
    import common
    import gpu_sampler

PHASES = ("gemm", "hbm", "memtest", "sdc", "burnin")
GEMM_DTYPES = ("bf16", "tf32", "fp8")
HBM_KERNELS = ("copy", "triad")
#: Sizes by device: a GPU is loaded for real, a CPU test host only exercises the code.
SIZES = {
    "cuda": {"gemm_n": 8192, "hbm_bytes": 1 << 30, "sdc_n": 4096, "chunk": 1 << 30, "reserve": 3 << 30},
    "cpu": {"gemm_n": 128, "hbm_bytes": 4 << 20, "sdc_n": 64, "chunk": 1 << 20, "reserve": 0},
}
CPU_MEMTEST_BYTES = 8 << 20
BURNIN_CHUNK_S = 60.0
MAX_SAMPLES_PER_GPU = 300
FIRST_OFFSETS = 8


def burnin_minutes(seconds: float) -> int:
    """How many burn-in rows ``seconds`` of burn-in make (one per started minute)."""
    return 0 if seconds <= 0 else int(-(-seconds // BURNIN_CHUNK_S))


def expected_rows(phases: list[str], burnin_s: float) -> list[tuple[str, int]]:
    """The (phase, bytes) rows this program emits, in order: what the launcher names a hang by."""
    rows: list[tuple[str, int]] = []
    for phase in phases:
        if phase == "gemm":
            rows += [(f"gemm.{d}", 0) for d in GEMM_DTYPES]
        elif phase == "hbm":
            rows += [(f"hbm.{k}", 0) for k in HBM_KERNELS]
        elif phase == "burnin":
            rows += [("burnin", i) for i in range(burnin_minutes(burnin_s))]
        else:
            rows.append((phase, 0))
    return rows


def error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"[:400]


class Worker:
    """One rank's GPU (or the CPU) and the phases run on it."""

    def __init__(self, args: argparse.Namespace, torch: Any, local_rank: int) -> None:
        self.args = args
        self.torch = torch
        self.cuda = args.device == "cuda"
        self.device = torch.device("cuda", local_rank) if self.cuda else torch.device("cpu")
        self.gpu = local_rank
        self.sizes = SIZES[args.device]
        if self.cuda:
            torch.cuda.set_device(self.device)
        else:  # the ranks of a CPU host share its cores
            torch.set_num_threads(
                max(1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
            )

    # -- timing --------------------------------------------------------------------------------------
    def timed(self, work: Callable[[], Any], reps: int) -> float:
        """Seconds ``reps`` calls of ``work`` take (CUDA events on a GPU, the wall clock on a CPU)."""
        torch = self.torch
        if not self.cuda:
            began = time.perf_counter()
            for _ in range(reps):
                work()
            return time.perf_counter() - began
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            work()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3

    def rate(self, work: Callable[[], Any], amount: float) -> dict[str, Any]:
        """``amount`` per call of ``work``, per second: warmed up, calls per sample sized to a quarter of a
        second (a fiftieth on a CPU host), the median of five samples (every sample kept)."""
        self.timed(work, 3)
        once = max(self.timed(work, 3) / 3, 1e-7)
        reps = max(1, min(1000, int((0.25 if self.cuda else 0.02) / once)))
        samples = [amount * reps / max(self.timed(work, reps), 1e-9) for _ in range(5)]
        return {"value": statistics.median(samples), "samples": samples, "reps": reps}

    # -- phases --------------------------------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        torch = self.torch
        if not self.cuda:
            return {"gpu": None, "name": "CPU", "threads": torch.get_num_threads()}
        props = torch.cuda.get_device_properties(self.device)
        free, total = torch.cuda.mem_get_info(self.device)
        return {
            "gpu": self.gpu,
            "name": torch.cuda.get_device_name(self.device),
            "bus_id": common.bus_id(torch, self.gpu),
            "capability": list(torch.cuda.get_device_capability(self.device)),
            "sm_count": props.multi_processor_count,
            "memory_total": total,
            "memory_free": free,
        }

    def fp8_missing(self) -> str | None:
        torch = self.torch
        if not self.cuda:
            return "fp8 needs a GPU with FP8 tensor cores (CPU host)"
        if tuple(torch.cuda.get_device_capability(self.device)) < (8, 9):
            return "this GPU has no FP8 tensor cores (compute capability below 8.9)"
        if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
            return f"torch {torch.__version__} has no _scaled_mm"
        return None

    def gemm(self, dtype: str) -> dict[str, Any]:
        torch, n = self.torch, self.args.gemm_n or self.sizes["gemm_n"]
        missing = self.fp8_missing() if dtype == "fp8" else None
        if missing:
            return {"skipped": missing, "n": n}
        gen = torch.Generator(device=self.device).manual_seed(1234 + self.gpu)
        a = torch.randn(n, n, device=self.device, generator=gen)
        b = torch.randn(n, n, device=self.device, generator=gen)
        previous = torch.backends.cuda.matmul.allow_tf32
        if dtype == "bf16":
            a, b = a.bfloat16(), b.bfloat16()
        elif dtype == "fp8":
            a = a.to(torch.float8_e4m3fn)
            b = b.to(torch.float8_e4m3fn).t().contiguous().t()  # column-major, as cuBLASLt wants it
        out = torch.empty(
            n, n, device=self.device, dtype=torch.float32 if dtype == "tf32" else torch.bfloat16
        )
        one = torch.ones((), device=self.device)

        def product() -> Any:
            if dtype == "fp8":
                return torch._scaled_mm(
                    a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=True
                )
            return torch.matmul(a, b, out=out)

        torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
        try:
            measured = self.rate(product, 2.0 * n**3 / 1e12)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = previous
        return {"tflops": measured["value"], "samples": measured["samples"], "reps": measured["reps"], "n": n}

    def hbm(self, kernel: str) -> dict[str, Any]:
        torch = self.torch
        nbytes = self.args.hbm_bytes or self.sizes["hbm_bytes"]
        count = nbytes // 4
        a = torch.ones(count, device=self.device)
        b = torch.empty(count, device=self.device).fill_(2.0)
        c = torch.empty(count if kernel == "triad" else 1, device=self.device).fill_(0.5)

        def work() -> Any:
            return b.copy_(a) if kernel == "copy" else torch.add(b, c, alpha=3.0, out=a)

        moved = (2 if kernel == "copy" else 3) * count * 4
        measured = self.rate(work, moved / 1e9)
        return {"gbps": measured["value"], "samples": measured["samples"], "bytes": count * 4}

    def memtest(self) -> dict[str, Any]:
        """Pattern write / read-back over most of the free memory; see the module docstring."""
        torch = self.torch
        if self.cuda:
            torch.cuda.empty_cache()
            free = torch.cuda.mem_get_info(self.device)[0]
        else:
            free = CPU_MEMTEST_BYTES
        chunk = self.sizes["chunk"]
        words = chunk // 8
        goal = min(int(free * self.args.memtest_fraction), free - self.sizes["reserve"])
        began = time.monotonic()
        blocks = []
        try:
            while (len(blocks) + 1) * chunk <= goal:
                blocks.append(torch.empty(words, dtype=torch.int64, device=self.device))
        except RuntimeError:  # out of memory sooner than mem_get_info said: test what we hold
            pass
        scratch = torch.empty(words, dtype=torch.int64, device=self.device)
        result: dict[str, Any] = {
            "free_bytes": free,
            "tested_bytes": len(blocks) * chunk,
            "mismatches": 0,
            "first": [],
            "passes": 0,
            "patterns": {},
        }
        deadline = began + self.args.memtest_s
        try:
            while time.monotonic() < deadline or result["passes"] == 0:
                done = self.memtest_pass(blocks, scratch, result, deadline, result["passes"])
                if not done:
                    break
                result["passes"] += 1
        finally:
            del blocks, scratch
            if self.cuda:
                torch.cuda.empty_cache()
        result["seconds"] = time.monotonic() - began
        return result

    def memtest_pass(
        self, blocks: list[Any], scratch: Any, result: dict[str, Any], deadline: float, number: int
    ) -> bool:
        """One pass of every pattern; False when the time ran out inside it (after at least one pass)."""
        torch = self.torch
        words = scratch.numel()
        steps: list[tuple[str, Callable[[Any, int], Any], Callable[[int], Any]]] = []
        for bit in range(64):
            value = -(1 << 63) if bit == 63 else 1 << bit
            steps.append(("walking_ones", lambda blk, i, v=value: blk.fill_(v), lambda i, v=value: v))

        def random_fill(target: Any, i: int) -> Any:
            gen = torch.Generator(device=self.device).manual_seed(number * 100003 + i)
            return target.random_(generator=gen)

        steps.append(("random", random_fill, lambda i: random_fill(scratch, i)))
        for flip in (False, True):

            def address(target: Any, i: int, flip: bool = flip) -> Any:
                torch.arange(i * words, (i + 1) * words, dtype=torch.int64, device=self.device, out=target)
                return target.bitwise_not_() if flip else target

            steps.append(("address", address, lambda i, a=address: a(scratch, i)))
        for name, write, expected in steps:
            if result["passes"] > 0 and time.monotonic() > deadline:
                return False
            for i, block in enumerate(blocks):
                write(block, i)
            counts = [(block != expected(i)).sum() for i, block in enumerate(blocks)]
            found = [int(c) for c in counts]
            tally = result["patterns"].setdefault(name, {"steps": 0, "mismatches": 0})
            tally["steps"] += 1
            tally["mismatches"] += sum(found)
            result["mismatches"] += sum(found)
            for i, count in enumerate(found):
                if count and len(result["first"]) < FIRST_OFFSETS:
                    self.locate(blocks[i], expected(i), i, name, result)
        return True

    def locate(self, block: Any, expected: Any, index: int, pattern: str, result: dict[str, Any]) -> None:
        """The first mismatching words of one chunk: byte offset in the tested region, expected, read."""
        torch = self.torch
        wrong = (block != expected).nonzero().flatten()[: FIRST_OFFSETS - len(result["first"])].tolist()
        for word in wrong:
            want = expected if not torch.is_tensor(expected) else int(expected[word])
            result["first"].append(
                {
                    "offset": (index * block.numel() + word) * 8,
                    "pattern": pattern,
                    "expected": f"{int(want) & (2**64 - 1):016x}",
                    "read": f"{int(block[word]) & (2**64 - 1):016x}",
                }
            )

    def sdc(self) -> dict[str, Any]:
        """A seeded chain of bf16 products, repeated; its exact checksum per repeat."""
        torch = self.torch
        n = self.args.sdc_n or self.sizes["sdc_n"]
        gen = torch.Generator(device="cpu").manual_seed(self.args.sdc_seed)
        a = torch.randn(n, n, generator=gen).to(self.device, torch.bfloat16)
        w = (torch.randn(n, n, generator=gen) / n**0.5).to(self.device, torch.bfloat16)
        sums = []
        torch.use_deterministic_algorithms(True, warn_only=True)
        try:
            for _ in range(self.args.sdc_repeats):
                x = a
                for _ in range(self.args.sdc_steps):
                    x = torch.tanh(torch.matmul(x, w))
                sums.append(self.checksum(x))
        finally:
            torch.use_deterministic_algorithms(False)
        return {"checksum": sums[0], "repeats": sums, "n": n, "steps": self.args.sdc_steps}

    def checksum(self, x: Any) -> str:
        """An exact, order-independent and position-sensitive checksum of a bf16 tensor's bits: integer
        sums are the same whatever order a reduction adds them in, so only a changed bit changes it."""
        torch = self.torch
        bits = x.contiguous().view(torch.int16).flatten().to(torch.int64)
        weights = torch.arange(bits.numel(), device=bits.device, dtype=torch.int64) % 65521 + 1
        first = int((bits * weights).sum()) & (2**64 - 1)
        second = int((bits * bits).sum()) & (2**64 - 1)
        return f"{first:016x}{second:016x}"

    def burn(self, seconds: float) -> dict[str, Any]:
        """bf16 products for ``seconds``; the TFLOP/s they averaged."""
        torch, n = self.torch, self.args.gemm_n or self.sizes["gemm_n"]
        gen = torch.Generator(device=self.device).manual_seed(99 + self.gpu)
        a = torch.randn(n, n, device=self.device, generator=gen).bfloat16()
        b = torch.randn(n, n, device=self.device, generator=gen).bfloat16()
        out = torch.empty_like(a)
        began = time.monotonic()
        products = 0
        while time.monotonic() - began < seconds:
            for _ in range(20):
                torch.matmul(a, b, out=out)
            products += 20
            if self.cuda:
                torch.cuda.synchronize(self.device)
        elapsed = time.monotonic() - began
        return {"tflops": products * 2.0 * n**3 / 1e12 / elapsed, "products": products, "seconds": elapsed}


class Program:
    """Rank ``rank`` of the stress job: runs each phase on its worker and hands the results to rank 0."""

    def __init__(self, args: argparse.Namespace, progress: common.Progress) -> None:
        import torch
        import torch.distributed as dist

        self.torch, self.dist, self.args, self.progress = torch, dist, args, progress
        self.place = common.place()
        timeout = datetime.timedelta(seconds=args.op_timeout_s)
        dist.init_process_group("gloo", timeout=timeout)
        self.worker = Worker(args, torch, self.place.local_rank)
        self.infos = self.gather(self.safely(self.worker.info))
        self.meter: gpu_sampler.Sampler | None = None

    def gather(self, item: dict[str, Any]) -> list[dict[str, Any]]:
        items: list[Any] = [None] * self.place.ranks
        self.dist.all_gather_object(items, {"rank": self.place.rank, **item})
        return items

    @staticmethod
    def safely(work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        try:
            return work()
        except Exception as exc:  # one GPU's failure is its result, the other GPUs go on
            return {"error": error_text(exc)}

    def phase(
        self,
        name: str,
        work: Callable[[], dict[str, Any]],
        minute: int = 0,
        extra: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        self.progress.emit({"event": "begin", "collective": name, "bytes": minute})
        self.dist.barrier()
        began = time.monotonic()
        if self.meter is not None:  # what it read before the phase is not the phase's
            self.meter.take()
        results = self.gather(self.safely(work))
        readings = self.readings()
        for result, info in zip(results, self.infos, strict=True):
            result.update({"gpu": info.get("gpu"), "bus_id": info.get("bus_id"), "name": info.get("name")})
            if "error" not in result and "skipped" not in result:
                result.update(readings.get(str(info.get("bus_id")), {}))
        row = {
            "event": "row",
            "collective": name,
            "bytes": minute,
            "seconds": round(time.monotonic() - began, 3),
        }
        self.progress.emit({**row, "gpus": results, **(extra() if extra is not None else {})})

    def readings(self) -> dict[str, dict[str, float]]:
        """Per bus id, what rank 0's phase sampler read since the phase began (nothing without one)."""
        if self.meter is None:
            return {}
        buses = [info.get("bus_id") for info in self.infos]
        by_bus = gpu_sampler.per_gpu_samples(self.meter.take(), self.meter.fields, buses)
        return {
            bus: gpu_sampler.phase_readings(samples, self.meter.fields) for bus, samples in by_bus.items()
        }

    def start_record(self) -> dict[str, Any]:
        torch = self.torch
        return {
            "event": "start",
            "time": round(time.time(), 3),
            "device": self.args.device,
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "ranks": self.place.ranks,
            "phases": self.args.phases,
            "burnin_s": self.args.burnin_s,
            "gpus": self.infos,
            "deterministic": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
        }

    def meter_for(self, phase: str) -> None:
        """Rank 0's nvidia-smi sampler runs through the gemm and hbm phases (on a GPU host) and stops
        before any other: the burn-in starts its own, at its own interval."""
        wanted = phase in ("gemm", "hbm") and self.place.rank == 0 and self.args.device == "cuda"
        if wanted and self.meter is None:
            self.meter = gpu_sampler.Sampler(gpu_sampler.PHASE_SAMPLE_MS)
            self.meter.start()
        elif not wanted and self.meter is not None:
            self.meter.stop()
            self.meter = None

    def burnin(self) -> None:
        seconds = self.args.burnin_s
        interval = max(1000, int(seconds * 1000 / MAX_SAMPLES_PER_GPU))
        sampler = (
            gpu_sampler.Sampler(interval) if self.place.rank == 0 and self.args.device == "cuda" else None
        )
        if sampler is not None:
            sampler.start()
        try:
            for minute in range(burnin_minutes(seconds)):
                length = min(BURNIN_CHUNK_S, seconds - minute * BURNIN_CHUNK_S)
                extra = (lambda s=sampler: self.samples(s)) if sampler is not None else None
                self.phase("burnin", lambda n=length: self.worker.burn(n), minute, extra)
        finally:
            if sampler is not None:
                sampler.stop()

    def samples(self, sampler: gpu_sampler.Sampler) -> dict[str, Any]:
        """The sampler's lines since the last burn-in row, by GPU: what the row carries beside the GPUs'."""
        buses = [info.get("bus_id") for info in self.infos]
        return {
            "fields": list(sampler.fields[1:]),
            "interval_ms": sampler.interval_ms,
            "sampler_problem": sampler.problem,
            "samples": gpu_sampler.per_gpu_samples(sampler.take(), sampler.fields, buses),
        }

    def run(self) -> None:
        self.progress.emit(self.start_record())
        worker = self.worker
        try:
            for phase in self.args.phases:
                self.meter_for(phase)
                if phase == "gemm":
                    for dtype in GEMM_DTYPES:
                        self.phase(f"gemm.{dtype}", lambda d=dtype: worker.gemm(d))
                elif phase == "hbm":
                    for kernel in HBM_KERNELS:
                        self.phase(f"hbm.{kernel}", lambda k=kernel: worker.hbm(k))
                elif phase == "memtest":
                    self.phase("memtest", worker.memtest)
                elif phase == "sdc":
                    self.phase("sdc", worker.sdc)
                elif phase == "burnin":
                    self.burnin()
        finally:
            self.meter_for("")
        self.progress.emit({"event": "done", "time": round(time.time(), 3)})
        # Every rank leaves its last collective before any tears the group down: gloo aborts a rank whose
        # peer destroys the group under it ("terminate called without an active exception").
        self.dist.barrier()
        self.dist.destroy_process_group()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--phases", default=",".join(PHASES), help="comma-separated, of " + ", ".join(PHASES))
    parser.add_argument("--gemm-n", type=int, default=0, help="matrix size (0: by device)")
    parser.add_argument("--hbm-bytes", type=int, default=0, help="bytes per buffer (0: by device)")
    parser.add_argument("--memtest-s", type=float, default=30.0, help="seconds of pattern passes")
    parser.add_argument("--memtest-fraction", type=float, default=0.95, help="share of free memory tested")
    parser.add_argument("--sdc-n", type=int, default=0)
    parser.add_argument("--sdc-steps", type=int, default=24)
    parser.add_argument("--sdc-repeats", type=int, default=3)
    parser.add_argument("--sdc-seed", type=int, default=20240601)
    parser.add_argument("--burnin-s", type=float, default=0.0)
    parser.add_argument("--op-timeout-s", type=float, default=900.0)
    parser.add_argument("--results", help="file rank 0 appends its JSON lines to")
    parser.add_argument("--log-dir", help="unused: the launcher passes it to every program")
    args = parser.parse_args(argv)
    args.phases = [p for p in args.phases.split(",") if p]
    unknown = [p for p in args.phases if p not in PHASES]
    if unknown:
        parser.error(f"unknown phase(s) {', '.join(unknown)}")
    if not 0 < args.memtest_fraction <= 1 or args.memtest_s < 0 or args.burnin_s < 0:
        parser.error("need 0 < --memtest-fraction <= 1, --memtest-s >= 0 and --burnin-s >= 0")
    return args


def main(argv: list[str] | None = None) -> int:
    # cuBLAS is bitwise reproducible only with a fixed workspace; it reads this when it starts.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    args = parse_args(argv)
    rank = common.rank()
    with common.Progress(args.results, rank) as progress:
        Program(args, progress).run()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Every result is written and flushed; leave without the interpreter's teardown, where gloo's threads
    # sometimes abort a CPU rank ("terminate called without an active exception") after the last row.
    os._exit(code)
