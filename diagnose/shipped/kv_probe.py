"""KV-cache transfer from a prefill rank to a decode rank: the program diagnose ships to the hosts and
starts with torchrun, one launch per pair.

Like :mod:`diagnose.shipped.collective_bench`, it imports nothing but the standard library, torch (inside
:func:`main`) and :mod:`common`: the launcher copies this file's text to the hosts, common.py beside it,
and diagnose imports the pure helpers (percentiles, repetitions, row order) from here so that they are
computed one way only.

Two ranks: rank 0 (the prefill side) holds a request's KV blocks scattered over its pool, in a fixed
random order; rank 1 (the decode side) must end up with them in its own pool, in another order, as two
paged caches would. A block is ``--block-bytes`` bytes (every layer's K and V of ``block_tokens`` tokens).
Three ways of moving a request:

* ``block``: one message per block, from the prefill pool straight into the decode pool (a connector that
  posts one transfer per block);
* ``packed``: the blocks gathered into one contiguous buffer on the prefill GPU, one message, scattered
  into the decode pool on arrival. Each part is timed alone, between barriers (CUDA events on GPUs, the
  wall clock on CPUs): the gather (``pack``), the message (``wire``) and the scatter (``unpack``); the row's
  latency is their sum per repetition. Beside them, in the same repetition, each part's reference: a
  contiguous copy of the request's bytes on each rank's own device (what a gather or scatter could reach)
  and one plain send/recv of a contiguous buffer of the same bytes between the same two devices (what the
  message could reach), so a slow gather is not read as a slow link, nor the other way round;
* ``staged``: gathered, copied into pinned host memory, sent host to host over gloo (TCP), copied to the
  decode GPU and scattered: the path of a KV connector that falls back to the CPU. Its rows also carry the
  time of each copy, whose bandwidth is what "host-memory staging" looks like on this machine.

Each repetition starts from a barrier (CUDA-synchronised on GPUs) and is timed on the decode rank until
the blocks are in its pool (packed: the sum of its parts), so the latency includes gathering and scattering
where the method needs it.
The first repetitions warm up (lazy communicator set-up); one more estimates the time of a repetition,
which sets how many are measured: ``--repeats`` where they fit in ``--row-budget-s`` seconds, never fewer
than ``--min-samples``. After the timed repetitions one more transfer into a zeroed pool is checked block
by block (``wrong`` counts blocks that arrived wrong or in the wrong place).

Rank 0 appends one JSON object per event to ``--results`` (``start``, ``begin``, ``warm``, ``row``,
``done``), flushed at once, so the launcher follows progress and keeps rows measured before a hang.
"""

from __future__ import annotations

import argparse
import datetime
import math
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

if __package__:  # imported on the controller, as diagnose.shipped.<program>
    from . import common
else:  # run on a host as program.py, the launcher's copy of common.py beside it
    import common

METHODS = ("block", "packed", "staged")
# Block i of the prefill pool holds ((i mod PERIOD) + 1) in every word: a block that lands in the
# wrong slot of the decode pool differs from what that slot should hold.
PERIOD = 251
# Seeds of the two pools' block orders (prefill, decode): fixed, so both ranks know both orders.
SEEDS = (1, 2)
# Bytes of the decode pool compared with what it should hold per step of the check.
CHECK_BYTES = 256 << 20
# What the decode rank times of one repetition besides its whole, per method: its lists travel to rank 0,
# which writes the row beside what it timed itself (packed: pack, pack_copy; staged: d2h).
DECODE_PHASES = {"packed": ("wire", "unpack", "plain", "unpack_copy"), "staged": ("hop", "h2d")}


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile with linear interpolation between the closest ranks (numpy's default)."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summary_us(seconds: list[float]) -> dict[str, float]:
    """p50, p99, max, min and mean of a list of durations, in microseconds."""
    return {
        "p50_us": round(percentile(seconds, 50) * 1e6, 3),
        "p99_us": round(percentile(seconds, 99) * 1e6, 3),
        "max_us": round(max(seconds) * 1e6, 3),
        "min_us": round(min(seconds) * 1e6, 3),
        "mean_us": round(sum(seconds) / len(seconds) * 1e6, 3),
    }


def repetitions(estimate_s: float, repeats: int, min_samples: int, budget_s: float) -> int:
    """How many repetitions to time: all ``repeats`` where they fit the budget, at least ``min_samples``."""
    if estimate_s <= 0:
        return repeats
    return max(min(min_samples, repeats), min(repeats, int(budget_s / estimate_s)))


def _rate(nbytes: int, seconds: float) -> float:
    return round(nbytes / max(seconds, 1e-9) / 1e9, 3)


def packed_parts(nbytes: int, phases: dict[str, list[float]]) -> tuple[list[float], dict[str, Any]]:
    """A packed row's latency per repetition (gather + message + scatter) and each part with its reference,
    from the seconds each repetition's phases took on both sides."""
    pack, wire, unpack = phases["pack"], phases["wire"], phases["unpack"]
    totals = [a + b + c for a, b, c in zip(pack, wire, unpack, strict=True)]

    def part(seconds: list[float]) -> dict[str, float]:
        p50 = percentile(seconds, 50)
        return {
            "p50_us": round(p50 * 1e6, 3),
            "p99_us": round(percentile(seconds, 99) * 1e6, 3),
            "gbps": _rate(nbytes, p50),
        }

    plain = percentile(phases["plain"], 50)
    parts = {
        "pack": {**part(pack), "copy_gbps": _rate(nbytes, percentile(phases["pack_copy"], 50))},
        "wire": {**part(wire), "plain_us": round(plain * 1e6, 3), "plain_gbps": _rate(nbytes, plain)},
        "unpack": {**part(unpack), "copy_gbps": _rate(nbytes, percentile(phases["unpack_copy"], 50))},
    }
    return totals, parts


def blocks_for(tokens: int, block_tokens: int) -> int:
    return math.ceil(tokens / block_tokens)


def rows(tokens: list[int], methods: list[str], staged_max_tokens: int) -> list[tuple[str, int]]:
    """(method, tokens) in the order they are measured: lengths outer, methods inner; staged only up to
    ``staged_max_tokens`` (host staging moves a few GB/s: longer requests would take minutes)."""
    return [
        (method, n)
        for n in sorted(tokens)
        for method in methods
        if method != "staged" or n <= staged_max_tokens
    ]


class Transfer:
    """One rank of a pair: its pool, its buffers and the three ways of moving blocks to the other rank."""

    def __init__(self, args: argparse.Namespace) -> None:
        import torch
        import torch.distributed as dist

        self.torch = torch
        self.dist = dist
        self.args = args
        place = common.place()
        if place.ranks != 2:
            raise SystemExit(f"kv_program moves KV blocks between two ranks, got {place.ranks}")
        self.rank = place.rank
        self.sender = self.rank == 0
        self.peer = 1 - self.rank
        self.gpu = args.backend == "nccl"
        self.device = common.join_group(torch, dist, args.backend, args.op_timeout, args.gpus[self.rank])
        # The host hop of the staged method, and the few numbers the ranks exchange, go over gloo.
        timeout = datetime.timedelta(seconds=args.op_timeout)
        self.cpu_group = dist.new_group(backend="gloo", timeout=timeout) if self.gpu else None
        plan = rows(args.tokens, args.methods, args.staged_max_tokens)
        most = max(blocks_for(n, args.block_tokens) for _, n in plan)
        staged = [blocks_for(n, args.block_tokens) for m, n in plan if m == "staged"]
        # Blocks are opaque bytes, held as the widest integer that divides a block: gathering and
        # scattering byte by byte would time the copy kernels' element rate instead of memory bandwidth.
        width = next(w for w in (8, 4, 2, 1) if args.block_bytes % w == 0)
        self.word = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.uint8}[width]
        self.words = args.block_bytes // width
        self.pool = torch.empty((most, self.words), dtype=self.word, device=self.device)
        self.packed = torch.empty((most, self.words), dtype=self.word, device=self.device)
        self.host = (
            torch.empty((max(staged), self.words), dtype=self.word, pin_memory=self.gpu) if staged else None
        )

    # -- the pools ------------------------------------------------------------------------------------
    def orders(self, n: int) -> tuple[list[int], list[int]]:
        """Where block i of the request sits in the prefill pool and in the decode pool."""
        torch = self.torch
        return tuple(  # type: ignore[return-value]
            torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist() for seed in SEEDS
        )

    def fill(self, n: int) -> None:
        """Prefill: slot s holds ((s mod PERIOD) + 1) in every word. Decode: zeros."""
        torch = self.torch
        if self.sender:
            values = (torch.arange(n, device=self.device) % PERIOD + 1).to(self.word)
            self.pool[:n].copy_(values[:, None].expand(n, self.words))
        else:
            self.pool[:n].zero_()

    def wrong_blocks(self, n: int, prefill_order: list[int], decode_order: list[int]) -> int:
        """Decode side: blocks of its pool that do not hold what the prefill side sent for that slot
        (compared a few hundred MiB at a time: a 32k-token pool is 10 GiB)."""
        torch = self.torch
        expected = torch.zeros(n, dtype=self.word, device=self.device)
        source = torch.tensor(prefill_order, device=self.device)
        slots = torch.tensor(decode_order, device=self.device)
        expected[slots] = (source % PERIOD + 1).to(self.word)
        step = max(1, CHECK_BYTES // self.args.block_bytes)
        wrong = 0
        for start in range(0, n, step):
            stop = min(n, start + step)
            wrong += int((self.pool[start:stop] != expected[start:stop, None]).any(dim=1).sum().item())
        return wrong

    # -- moving a request -------------------------------------------------------------------------------
    def sync(self) -> None:
        """A common start for both ranks, with nothing of the previous repetition still in flight."""
        if self.gpu:
            self.torch.cuda.synchronize()
            self.dist.barrier(device_ids=[self.device.index])
            self.torch.cuda.synchronize()
        else:
            self.dist.barrier()

    def _done(self) -> None:
        if self.gpu:
            self.torch.cuda.synchronize()

    def phase(self, work: Callable[[], object]) -> float:
        """Seconds ``work`` takes on this rank: between CUDA events on a GPU (the kernels and the messages in
        stream order, not when Python returned), by the wall clock on the CPU."""
        if not self.gpu:
            began = time.perf_counter()
            work()
            return time.perf_counter() - began
        start, end = (self.torch.cuda.Event(enable_timing=True) for _ in range(2))
        start.record()
        work()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3

    def _packed(self, n: int, index: Any, phases: dict[str, float]) -> None:
        """Gather, message and scatter, each alone between barriers, and their references beside them."""
        dist, torch = self.dist, self.torch
        buffer, pool = self.packed[:n], self.pool[:n]
        # A contiguous copy of the request's bytes on each side's own device (into the buffer the gather
        # fills, or the message overwrites): the bandwidth a gather or a scatter of whole blocks could reach.
        phases["pack_copy" if self.sender else "unpack_copy"] = self.phase(lambda: buffer.copy_(pool))
        if self.sender:
            phases["pack"] = self.phase(lambda: torch.index_select(self.pool, 0, index, out=buffer))
        self.sync()
        if self.sender:
            dist.send(buffer, self.peer)
        else:
            phases["wire"] = self.phase(lambda: dist.recv(buffer, self.peer))
            phases["unpack"] = self.phase(lambda: self.pool.index_copy_(0, index, buffer))
        self.sync()
        # The reference of the message: the same bytes, one contiguous buffer, nothing gathered before it.
        if self.sender:
            dist.send(pool, self.peer)
        else:
            phases["plain"] = self.phase(lambda: dist.recv(buffer, self.peer))

    def move(self, method: str, n: int, order: list[int], index: Any) -> dict[str, float]:
        """One request's blocks from prefill to decode; the phases of a packed or staged move, in seconds."""
        dist, torch = self.dist, self.torch
        phases: dict[str, float] = {}
        if method == "block":
            op = dist.isend if self.sender else dist.irecv
            works = [op(self.pool[slot], self.peer, tag=i) for i, slot in enumerate(order)]
            for work in works:
                work.wait()
        elif method == "packed":
            self._packed(n, index, phases)
        elif self.sender:  # staged
            assert self.host is not None
            torch.index_select(self.pool[:n], 0, index, out=self.packed[:n])
            self._done()
            began = time.perf_counter()
            self.host[:n].copy_(self.packed[:n])
            self._done()
            phases["d2h"] = time.perf_counter() - began
            dist.send(self.host[:n], self.peer, group=self.cpu_group)
        else:
            assert self.host is not None
            began = time.perf_counter()
            dist.recv(self.host[:n], self.peer, group=self.cpu_group)
            arrived = time.perf_counter()
            self.packed[:n].copy_(self.host[:n], non_blocking=True)
            self.pool.index_copy_(0, index, self.packed[:n])
            self._done()
            phases["hop"] = arrived - began
            phases["h2d"] = time.perf_counter() - arrived
        self._done()
        return phases

    def timed(self, method: str, n: int, order: list[int], index: Any) -> tuple[float, dict[str, float]]:
        self.sync()
        began = time.perf_counter()
        phases = self.move(method, n, order, index)
        return time.perf_counter() - began, phases

    def share(self, values: list[float], src: int, length: int) -> list[float]:
        """``length`` numbers measured on rank ``src``, known to both afterwards (over gloo, on the CPU)."""
        torch = self.torch
        tensor = torch.tensor(values if self.rank == src else [0.0] * length, dtype=torch.float64)
        self.dist.broadcast(tensor, src=src, group=self.cpu_group)
        return [float(v) for v in tensor.tolist()]

    def measure(
        self, method: str, tokens: int, emit: Callable[[dict[str, Any]], None], warmed: set[str]
    ) -> dict[str, Any] | None:
        """One row, on rank 0 (None on the decode rank, whose numbers it sends there)."""
        args, torch = self.args, self.torch
        n = blocks_for(tokens, args.block_tokens)
        prefill_order, decode_order = self.orders(n)
        order = prefill_order if self.sender else decode_order
        index = torch.tensor(order, device=self.device)
        nbytes = n * args.block_bytes
        self.fill(n)
        emit({"event": "begin", "collective": f"kv_{method}", "bytes": nbytes, "tokens": tokens})
        for _ in range(args.warmup):
            self.timed(method, n, order, index)
        if method not in warmed:
            warmed.add(method)
            emit({"event": "warm", "collective": f"kv_{method}"})
        estimate = self.share([self.timed(method, n, order, index)[0]], src=1, length=1)[0]
        count = repetitions(estimate, args.repeats, args.min_samples, args.row_budget_s)
        samples: list[float] = []
        phases: dict[str, list[float]] = {}
        for _ in range(count):
            seconds, took = self.timed(method, n, order, index)
            samples.append(seconds)
            for name, value in took.items():
                phases.setdefault(name, []).append(value)
        if not self.sender:
            self.pool[:n].zero_()
        self.timed(method, n, order, index)
        wrong = self.wrong_blocks(n, prefill_order, decode_order) if not self.sender else 0
        # The decode rank's clock is the one that saw the blocks arrive: rank 0 reports its numbers.
        decode_phases = DECODE_PHASES.get(method, ())
        mine = [float(wrong), *samples, *(v for name in decode_phases for v in phases.get(name, []))]
        received = self.share(mine, src=1, length=1 + count * (1 + len(decode_phases)))
        if not self.sender:
            return None
        wrong, decode_samples = int(received[0]), received[1 : 1 + count]
        for i, name in enumerate(decode_phases, start=1):
            phases[name] = received[1 + i * count : 1 + (i + 1) * count]
        parts: dict[str, Any] = {}
        if method == "packed":
            decode_samples, parts = packed_parts(nbytes, phases)
        row: dict[str, Any] = {
            "event": "row",
            "collective": f"kv_{method}",
            "bytes": nbytes,
            "method": method,
            "tokens": tokens,
            "blocks": n,
            "block_bytes": args.block_bytes,
            "samples": count,
            **summary_us(decode_samples),
            "gbps": round(nbytes / percentile(decode_samples, 50) / 1e9, 3),
            "wrong": wrong,
        }
        if parts:
            row["parts"] = parts
        if method == "staged":
            d2h, hop, h2d = phases["d2h"], phases["hop"], phases["h2d"]
            for name, values in (("d2h", d2h), ("hop", hop), ("h2d", h2d)):
                row[f"{name}_us"] = round(percentile(values, 50) * 1e6, 3)
            copy_s = max(percentile(d2h, 50), percentile(h2d, 50))
            row["host_copy_gbps"] = round(nbytes / copy_s / 1e9, 3)
        return row

    def run(self, emit: Callable[[dict[str, Any]], None]) -> None:
        warmed: set[str] = set()
        for method, tokens in rows(self.args.tokens, self.args.methods, self.args.staged_max_tokens):
            row = self.measure(method, tokens, emit, warmed)
            if row is not None:
                emit(row)


def _ints(text: str) -> list[int]:
    return [int(p) for p in text.split(",") if p.strip()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("nccl", "gloo"), default="nccl")
    parser.add_argument(
        "--gpus",
        default="0,1",
        help="CUDA device of rank 0 and rank 1 (under CUDA_VISIBLE_DEVICES, its place among the visible GPUs)",
    )
    parser.add_argument("--tokens", default="1024,4096,16384,32768", help="request lengths in tokens")
    parser.add_argument("--block-tokens", type=int, default=16)
    parser.add_argument("--block-bytes", type=int, default=16 * 327680, help="bytes of one block")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--staged-max-tokens", type=int, default=1024)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--min-samples", type=int, default=20)
    parser.add_argument("--row-budget-s", type=float, default=3.0)
    parser.add_argument("--op-timeout", type=float, default=600.0)
    parser.add_argument("--results", help="file rank 0 appends its JSON lines to")
    parser.add_argument("--log-dir", help="where each rank writes its NCCL log (nccl-rank<N>.log)")
    args = parser.parse_args(argv)
    args.gpus = _ints(args.gpus)
    args.tokens = _ints(args.tokens)
    args.methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in args.methods if m not in METHODS]
    if unknown:
        parser.error(f"unknown method(s) {', '.join(unknown)}; choose from {', '.join(METHODS)}")
    if len(args.gpus) != 2 or not args.tokens or min(args.tokens) < 1:
        parser.error("need two --gpus and at least one request length")
    if args.block_tokens < 1 or args.block_bytes < 1 or args.repeats < 1 or args.min_samples < 1:
        parser.error("--block-tokens, --block-bytes, --repeats and --min-samples must be positive")
    if not rows(args.tokens, args.methods, args.staged_max_tokens):
        parser.error("nothing to measure: every method and length left out")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rank = common.rank()
    common.nccl_log_per_rank(args.log_dir, rank)
    warnings.filterwarnings("ignore")
    with common.Progress(args.results, rank) as progress:
        transfer = Transfer(args)
        versions = common.versions(transfer.torch, transfer.device)
        progress.emit({"event": "start", "ranks": 2, "backend": args.backend, "gpus": args.gpus, **versions})
        transfer.run(progress.emit)
        transfer.sync()
        progress.emit({"event": "done"})
        transfer.dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
