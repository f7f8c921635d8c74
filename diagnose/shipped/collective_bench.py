"""The collective benchmark that diagnose ships to every host and starts there with torchrun.

It must run with nothing but the standard library and torch on the host, so it imports nothing from
diagnose but :mod:`common` (copied beside it) and imports torch only inside :func:`main`: the launcher
reads this file's text and copies it, and the stage imports the pure helpers (sizes, byte counts,
bandwidth formulas) from here so that the numbers are computed one way only.

Measurement follows nccl-tests (doc/PERFORMANCE.md and its common.cu semantics): out-of-place buffers
allocated once at the largest size and sliced; per size, warm-up launches, one untimed launch, a barrier,
then ``iters`` launches back to back timed between two CUDA events (wall clock around a barrier on
gloo), time = elapsed / iters, averaged over the ranks (nccl-tests' default ``-a 1``); algbw = bytes /
time in GB/s (1e9 B/s) with bytes counted as nccl-tests prints them, busbw = algbw × the collective's bus
factor. A separate validation launch per size, on freshly initialised buffers, counts wrong elements.

Rank 0 appends one JSON object per measured row to ``--results`` (and prints it), flushed at once, so
the launcher can follow progress and keep every row measured before a hang or a crash.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

if __package__:  # imported on the controller, as diagnose.shipped.<program>
    from . import common
else:  # run on a host as program.py, the launcher's copy of common.py beside it
    import common

COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast", "sendrecv")
DTYPES = ("float32", "float16", "bfloat16", "float64", "int32")
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int32": 4}

# The validation pattern: element i of rank r holds ((i + r) mod PERIOD) + 1. Small integers keep every
# sum exact in float32 (PERIOD × ranks < 2^24), and the period makes the expected value of any element a
# lookup in a PERIOD-long table, so checking 4 GiB needs no second copy of the data on the host.
PERIOD = 5
# Collectives whose nccl-tests "count" column is the per-rank share of the buffer.
_SPLIT = ("all_gather", "reduce_scatter", "all_to_all")
# Elements handled per step while filling or checking: bounds the temporary index tensors.
_CHUNK = 1 << 25
# The early stop (see stop_after): from this size on a row is read for bandwidth (the controller passes the
# size its verdict reads from, expect.LARGE_BYTES), at how small a share of the floor the sweep gives up, and
# after how many such sizes in a row.
BOUND_BYTES = 64 << 20
STOP_FRACTION = 0.1
STOP_SIZES = 2


def bus_factor(collective: str, ranks: int) -> float:
    """nccl-tests' correction from algorithm to bus bandwidth (doc/PERFORMANCE.md, "Summary")."""
    if collective == "all_reduce":
        return 2.0 * (ranks - 1) / ranks
    if collective in ("reduce_scatter", "all_gather", "all_to_all"):
        return (ranks - 1) / ranks
    if collective in ("broadcast", "sendrecv"):
        return 1.0
    raise ValueError(f"unknown collective {collective!r}")


def bandwidths(nbytes: int, seconds: float, collective: str, ranks: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s (1e9 bytes per second), as nccl-tests prints them."""
    if seconds <= 0:
        return 0.0, 0.0
    algbw = nbytes / seconds / 1e9
    return algbw, algbw * bus_factor(collective, ranks)


def sweep(min_bytes: int, max_bytes: int, factor: float) -> list[int]:
    """The sizes nccl-tests visits for ``-b min -e max -f factor`` (factor 1 means just min)."""
    sizes = [int(min_bytes)]
    if factor <= 1:
        return sizes
    size = float(min_bytes)
    while True:
        size *= factor
        if int(size) > max_bytes:
            return sizes
        sizes.append(int(size))


def counts(collective: str, nbytes: int, elem: int, ranks: int) -> tuple[int, int, int]:
    """(input elements, output elements, bytes reported) for a requested size, per rank.

    Bytes are counted as nccl-tests prints its ``size`` column: the whole buffer of the operation
    (all_gather and reduce_scatter: the full gathered array; all_to_all: everything one rank sends),
    rounded down so that it splits evenly over the ranks where the collective needs that.
    """
    total = nbytes // elem
    if collective in ("all_gather", "reduce_scatter", "all_to_all"):
        per_rank = total // ranks
        total = per_rank * ranks
        if collective == "all_gather":
            return per_rank, total, total * elem
        if collective == "reduce_scatter":
            return total, per_rank, total * elem
        return total, total, total * elem
    return total, total, total * elem


@dataclass(frozen=True)
class Stop:
    """Why a sweep stopped before its largest size: the figures the controller words its verdict with."""

    after_bytes: int
    busbw_gbps: float
    plateau_gbps: float
    floor_gbps: float


def plateau(points: Sequence[tuple[int, float]]) -> float | None:
    """The busbw any larger size could reach, by the latency-bandwidth (α-β) model through the last two
    (bytes, busbw) points; None where the time did not grow with the size (latency-bound: no bound).

    Time per launch is α + bytes/B (B the bus rate, busbw = bytes/time up to the bus factor, which
    cancels); two sizes give B = Δbytes / Δtime, the busbw that size → ∞ tends to.
    """
    (s1, b1), (s2, b2) = points[-2], points[-1]
    grown = s2 / b2 - s1 / b1
    if s2 <= s1 or grown <= 0:
        return None
    return (s2 - s1) / grown


def stop_after(
    points: Sequence[tuple[int, float]], floor_gbps: float | None, bound_bytes: int = BOUND_BYTES
) -> Stop | None:
    """Whether a sweep that measured ``points`` ((bytes, busbw) in size order) may skip its larger sizes.

    It may when the verdict is already certain: the last ``STOP_SIZES`` sizes of ``bound_bytes`` or more
    (those the verdict reads) each reached less than ``STOP_FRACTION`` of the floor, and the α-β model
    through them says no larger size can reach that tenth either. A healthy fabric is at well over half
    its plateau from 64 MiB on, so a tenth of the floor there is a transport fallback (NET/Socket where
    NVLink or RDMA was expected), not a slow start; requiring the model too keeps a still-climbing,
    latency-bound curve running. No floor (gloo, no profile), no stop.
    """
    if not floor_gbps or floor_gbps <= 0:
        return None
    bound = [(s, b) for s, b in points if s >= bound_bytes and b > 0]
    if len(bound) < STOP_SIZES:
        return None
    last = bound[-STOP_SIZES:]
    limit = STOP_FRACTION * floor_gbps
    reach = plateau(last)
    if any(b >= limit for _, b in last) or reach is None or reach >= limit:
        return None
    return Stop(last[-1][0], max(b for _, b in last), round(reach, 3), floor_gbps)


def parse_floors(text: str) -> dict[str, float]:
    """``all_reduce=289,all_gather=144.5`` → {collective: floor GB/s}."""
    floors = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, value = item.partition("=")
        floors[name.strip()] = float(value)
    return floors


def _rank_sum_table(ranks: int) -> list[int]:
    """Σ_r (((j + r) mod P) + 1) for j < P without an O(ranks) loop per entry at large scale."""
    full, rest = divmod(ranks, PERIOD)
    base = full * PERIOD * (PERIOD + 1) // 2
    return [base + sum(((j + r) % PERIOD) + 1 for r in range(rest)) for j in range(PERIOD)]


class Bench:
    """One process's view of the benchmark: its rank, device, timing method and buffers."""

    def __init__(self, args: argparse.Namespace) -> None:
        import torch
        import torch.distributed as dist

        self.torch = torch
        self.dist = dist
        self.args = args
        place = common.place()
        self.rank, self.ranks, self.local_rank = place.rank, place.ranks, place.local_rank
        self.gpu = args.backend == "nccl"
        self.dtype = getattr(torch, args.dtype)
        self.elem = DTYPE_BYTES[args.dtype]
        self.exact = args.dtype in ("float32", "float64", "int32")
        self.timing = args.timing if self.gpu else "wall-clock"
        self.device = common.join_group(torch, dist, args.backend, args.op_timeout, self.local_rank)

    # -- data -----------------------------------------------------------------------------------------
    def _index_mod(self, start: int, stop: int, offset: int) -> Any:
        torch = self.torch
        return (torch.arange(start, stop, device=self.device, dtype=torch.int64) + offset) % PERIOD

    def fill_pattern(self, buf: Any, offset: int) -> None:
        """buf[i] = ((i + offset) mod PERIOD) + 1, chunk by chunk."""
        n = buf.numel()
        for start in range(0, n, _CHUNK):
            stop = min(n, start + _CHUNK)
            buf[start:stop].copy_(self._index_mod(start, stop, offset) + 1)

    def count_wrong(self, buf: Any, table: list[int], offset: int) -> int:
        """Elements of buf that differ from table[(i + offset) mod PERIOD]."""
        torch = self.torch
        lookup = torch.tensor(table, device=self.device, dtype=torch.float64)
        wrong = torch.zeros((), device=self.device, dtype=torch.int64)
        n = buf.numel()
        for start in range(0, n, _CHUNK):
            stop = min(n, start + _CHUNK)
            expected = lookup[self._index_mod(start, stop, offset)]
            got = buf[start:stop].to(torch.float64)
            if self.exact:
                wrong += (got != expected).sum()
            else:
                # 16-bit sums are rounded along the reduction order; a 2 % band still catches garbage.
                wrong += ((got - expected).abs() > 0.02 * expected.abs() + 1e-3).sum()
        return int(wrong.item())

    # -- one collective ---------------------------------------------------------------------------------
    def operation(self, collective: str, inp: Any, out: Any) -> Callable[[], Any]:
        """One launch of the collective; on NCCL it returns the work handle without waiting for it.

        Asynchronous launches keep torch's per-call bookkeeping (the calling stream waiting on NCCL's
        after every call) out of the loop, so back-to-back launches queue on the GPU as nccl-tests'
        do; the timer waits for the last one.
        """
        dist = self.dist
        rank, ranks = self.rank, self.ranks
        wait = not self.gpu
        if collective == "all_reduce":
            # torch's all_reduce and broadcast work in place: the timed launches reduce ``out`` over and
            # over (values do not change NCCL's speed) and the validation launch re-fills it first.
            return lambda: dist.all_reduce(out, async_op=not wait)
        if collective == "reduce_scatter":
            return lambda: dist.reduce_scatter_tensor(out, inp, async_op=not wait)
        if collective == "all_gather":
            return lambda: dist.all_gather_into_tensor(out, inp, async_op=not wait)
        if collective == "all_to_all":
            return lambda: dist.all_to_all_single(out, inp, async_op=not wait)
        if collective == "broadcast":
            return lambda: dist.broadcast(out, self.args.root, async_op=not wait)
        if collective == "sendrecv":
            nxt, prv = (rank + 1) % ranks, (rank - 1) % ranks
            if self.gpu:
                # Grouped, as nccl-tests' sendrecv: a ring of sends that would deadlock one by one.
                return lambda: dist.batch_isend_irecv(
                    [dist.P2POp(dist.isend, inp, nxt), dist.P2POp(dist.irecv, out, prv)]
                )[-1]

            def exchange_cpu() -> None:
                sent = dist.isend(inp, nxt)
                dist.recv(out, prv)
                sent.wait()

            return exchange_cpu
        raise ValueError(f"unknown collective {collective!r}")

    def complete(self, work: Any) -> None:
        """Make the calling stream wait for a launch (NCCL) or do nothing (gloo: already done)."""
        if work is not None:
            work.wait()

    def buffers(self, collective: str, max_bytes: int) -> tuple[Any, Any]:
        """Input and output buffers for the largest size; smaller sizes use their leading elements."""
        n_in, n_out, _ = counts(collective, max_bytes, self.elem, self.ranks)
        empty = self.torch.empty
        out = empty(max(n_out, 1), dtype=self.dtype, device=self.device)
        if collective in ("all_reduce", "broadcast"):
            return out, out
        return empty(max(n_in, 1), dtype=self.dtype, device=self.device), out

    def validate(self, collective: str, inp: Any, out: Any, per_rank: int) -> int:
        """One launch on freshly initialised buffers; the number of wrong elements over all ranks."""
        rank, ranks, root = self.rank, self.ranks, self.args.root
        identity = [j + 1 for j in range(PERIOD)]
        out.zero_()
        if collective == "all_reduce":
            self.fill_pattern(out, rank)
        elif collective == "broadcast":
            if rank == root:
                self.fill_pattern(out, root)
        else:
            self.fill_pattern(inp, rank)
        self.complete(self.operation(collective, inp, out)())
        if collective in ("all_reduce", "reduce_scatter"):
            offset = rank * per_rank if collective == "reduce_scatter" else 0
            wrong = self.count_wrong(out, _rank_sum_table(ranks), offset)
        elif collective == "broadcast":
            wrong = self.count_wrong(out, identity, root)
        elif collective == "sendrecv":
            wrong = self.count_wrong(out, identity, (rank - 1) % ranks)
        elif collective == "all_gather":
            wrong = sum(
                self.count_wrong(out[j * per_rank : (j + 1) * per_rank], identity, j) for j in range(ranks)
            )
        else:  # all_to_all: block k of the output is block `rank` of rank k's input
            wrong = sum(
                self.count_wrong(out[k * per_rank : (k + 1) * per_rank], identity, rank * per_rank + k)
                for k in range(ranks)
            )
        return int(self.reduce([float(wrong)], "sum")[0])

    def reduce(self, values: list[float], how: str) -> list[float]:
        """Combine a few numbers over all ranks (sum or max), on the backend's own device."""
        tensor = self.torch.tensor(values, dtype=self.torch.float64, device=self.device)
        op = self.dist.ReduceOp.SUM if how == "sum" else self.dist.ReduceOp.MAX
        self.dist.all_reduce(tensor, op=op)
        return [float(v) for v in tensor.tolist()]

    def synchronize(self) -> None:
        """Wait for the GPU (NCCL); gloo's calls have returned when they are done."""
        if self.gpu:
            self.torch.cuda.synchronize()

    def warm_up(self, collective: str, inp: Any, out: Any, sizes: list[int]) -> Stop | None:
        """nccl-tests' warm-up: ``--warmup`` launches at every size before any size is timed.

        Besides NCCL's lazy set-up per size, it brings the GPUs to their working clocks; timing the first
        (smallest) size straight after start-up measured idle clocks, not the fabric. With a floor for the
        collective, each size's launches after its first (which may set up connections) are timed and the
        warm-up ends where :func:`stop_after` says so: on a broken transport, warming 1 GiB costs as much as
        timing it. The returned stop names the last size warmed.
        """
        args = self.args
        floor = args.floors.get(collective)
        timed = floor is not None and args.warmup > 1
        points: list[tuple[int, float]] = []
        for requested in sizes:
            n_in, n_out, nbytes = counts(collective, requested, self.elem, self.ranks)
            if nbytes == 0:
                continue
            op = self.operation(collective, inp[:n_in], out[:n_out])
            began, work = time.perf_counter(), None
            for launch in range(args.warmup):
                if timed and launch == 1:
                    self.complete(work)
                    self.synchronize()
                    began = time.perf_counter()
                work = op()
            if args.warmup:
                self.complete(work)
            if not timed:
                continue
            self.synchronize()
            seconds = self.reduce([(time.perf_counter() - began) / (args.warmup - 1)], "max")[0]
            points.append((nbytes, bandwidths(nbytes, seconds, collective, self.ranks)[1]))
            stop = stop_after(points, floor, args.bound_bytes)
            if stop is not None:
                return stop
        self.synchronize()
        return None

    def capture(self, op: Callable[[], Any]) -> Any:
        """The ``iters`` launches recorded as one CUDA graph, or None where capture is not possible.

        torch spends tens of microseconds of CPU on every collective call, more than NCCL needs for a
        1 MiB all_reduce over NVLink, so an eager loop would time Python rather than the fabric. Replaying
        the launches from a graph puts them on the GPU back to back, as nccl-tests' C loop does; where
        capture fails (old torch or NCCL), timing falls back to the eager loop and the rows say so.
        """
        torch = self.torch
        try:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                work = None
                for _ in range(self.args.iters):
                    work = op()
                self.complete(work)
            return graph
        except Exception as exc:  # any capture failure: measure eagerly instead
            print(f"diagnose-bench: CUDA graph capture failed, timing eagerly: {exc}", file=sys.stderr)
            self.timing = "eager"
            torch.cuda.synchronize()
            return None

    def time_launches(self, op: Callable[[], Any]) -> float:
        """Seconds per launch on this rank: ``iters`` launches back to back, synchronised at the end."""
        args, torch = self.args, self.torch
        self.complete(op())  # the untimed launch nccl-tests makes before its barrier
        if self.gpu:
            graph = self.capture(op) if self.timing == "graph" else None

            def launches() -> None:
                if graph is not None:
                    graph.replay()
                    return
                work = None
                for _ in range(args.iters):
                    work = op()
                self.complete(work)  # NCCL runs one stream in order: the last launch done means all are

            if graph is not None:
                launches()  # the first replay pays for uploading the graph
            torch.cuda.synchronize()
            self.dist.barrier()
            torch.cuda.synchronize()
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            launches()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3 / args.iters
        self.dist.barrier()
        began = time.perf_counter()
        for _ in range(args.iters):
            op()
        return (time.perf_counter() - began) / args.iters

    def run(self, emit: Callable[[dict[str, Any]], None]) -> None:
        args = self.args
        sizes = sweep(args.min_bytes, args.max_bytes, args.step_factor)
        for collective in args.collectives:
            inp, out = self.buffers(collective, max(sizes))
            warmed = self.warm_up(collective, inp, out, sizes)
            emit({"event": "warm", "collective": collective, "warm_stopped": warmed and asdict(warmed)})
            self.sweep_sizes(collective, inp, out, sizes, emit)
            del inp, out
            if self.gpu:
                self.torch.cuda.empty_cache()

    def sweep_sizes(
        self, collective: str, inp: Any, out: Any, sizes: list[int], emit: Callable[[dict[str, Any]], None]
    ) -> None:
        """Every size timed in turn, until :func:`stop_after` finds the rest not worth the time.

        All ranks reach the same decision: it reads the busbw averaged over the ranks by a collective.
        The row after which the sweep stops carries the reason (``stopped``) and the sizes left out.
        """
        args = self.args
        points: list[tuple[int, float]] = []
        planned = [counts(collective, requested, self.elem, self.ranks) for requested in sizes]
        for index, (n_in, n_out, nbytes) in enumerate(planned):
            if nbytes == 0:
                continue
            emit({"event": "begin", "collective": collective, "bytes": nbytes})
            view_in, view_out = inp[:n_in], out[:n_out]
            per_rank = n_out // self.ranks if collective in ("all_gather", "all_to_all") else n_out
            seconds = self.time_launches(self.operation(collective, view_in, view_out))
            total, slowest = self.reduce([seconds], "sum")[0], self.reduce([seconds], "max")[0]
            average = total / self.ranks
            algbw, busbw = bandwidths(nbytes, average, collective, self.ranks)
            wrong = self.validate(collective, view_in, view_out, per_rank) if args.check else None
            row = {
                "event": "row",
                "collective": collective,
                "bytes": nbytes,
                "count": nbytes // self.elem // (self.ranks if collective in _SPLIT else 1),
                "dtype": args.dtype,
                "ranks": self.ranks,
                "time_us": round(average * 1e6, 3),
                "time_us_max": round(slowest * 1e6, 3),
                "algbw_gbps": round(algbw, 3),
                "busbw_gbps": round(busbw, 3),
                "wrong": wrong,
                "timing": self.timing,
            }
            points.append((nbytes, busbw))
            stop = stop_after(points, args.floors.get(collective), args.bound_bytes)
            skipped = [later[2] for later in planned[index + 1 :] if later[2]]
            if stop is not None and skipped:
                row["stopped"] = {**asdict(stop), "skipped_bytes": skipped}
            emit(row)
            if "stopped" in row:
                return


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--collectives", default="all_reduce", help="comma-separated, from: " + ", ".join(COLLECTIVES)
    )
    parser.add_argument("--min-bytes", type=int, default=1 << 20)
    parser.add_argument("--max-bytes", type=int, default=1 << 28)
    parser.add_argument("--step-factor", type=float, default=2.0)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--backend", choices=("nccl", "gloo"), default="nccl")
    parser.add_argument("--dtype", choices=DTYPES, default="float32")
    parser.add_argument("--root", type=int, default=0, help="broadcast root")
    parser.add_argument("--check", type=int, default=1, help="1: count wrong elements at every size")
    parser.add_argument(
        "--op-timeout", type=float, default=900.0, help="seconds before torch aborts a collective"
    )
    parser.add_argument(
        "--timing",
        choices=("graph", "eager"),
        default="graph",
        help="GPU: replay the launches from a CUDA graph",
    )
    parser.add_argument(
        "--floors",
        default="",
        help="collective=GB/s,...: the busbw the controller judges against; far below it the sweep stops",
    )
    parser.add_argument(
        "--bound-bytes", type=int, default=BOUND_BYTES, help="sizes read for bandwidth start here"
    )
    parser.add_argument("--results", help="file rank 0 appends its JSON rows to")
    parser.add_argument("--log-dir", help="where each rank writes its NCCL log (nccl-rank<N>.log)")
    args = parser.parse_args(argv)
    args.collectives = [c.strip() for c in args.collectives.split(",") if c.strip()]
    try:
        args.floors = parse_floors(args.floors)
    except ValueError:
        parser.error(f"--floors: expected collective=GB/s,..., got {args.floors!r}")
    unknown = [c for c in args.collectives if c not in COLLECTIVES]
    if unknown:
        parser.error(f"unknown collective(s) {', '.join(unknown)}; choose from {', '.join(COLLECTIVES)}")
    if args.min_bytes <= 0 or args.max_bytes < args.min_bytes:
        parser.error("need 0 < --min-bytes <= --max-bytes")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rank = common.rank()
    common.nccl_log_per_rank(args.log_dir, rank)
    warnings.filterwarnings("ignore", category=FutureWarning)
    with common.Progress(args.results, rank) as progress:
        bench = Bench(args)
        versions = common.versions(bench.torch, bench.device)
        progress.emit({"event": "start", "ranks": bench.ranks, "backend": args.backend, **versions})
        bench.run(progress.emit)
        bench.dist.barrier()
        progress.emit({"event": "done"})
        bench.dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
