"""The training probe diagnose ships to every host and starts there with torchrun: a short DDP job, profiled.

A synthetic dense transformer (token embedding, a stack of pre-norm attention + MLP blocks, a vocabulary
head) trains with DistributedDataParallel on random tokens served by a real ``DataLoader``: warm-up steps
first (DDP rebuilds its buckets after the first step, NCCL sets up its channels), then a few steps under
``torch.profiler``. Every rank writes its own trace (Chrome-trace JSON, gzipped) into ``--files-dir``;
diagnose brings them home and reads from them how much of the gradient all-reduce hides behind backward
compute, the last bucket's tail, host syncs per step and input waits.

Like :mod:`diagnose.shipped.collective_bench` it runs with nothing but the standard library and torch, imports torch
only inside :func:`main`, and exposes its pure sizing helpers (:func:`model_shape`,
:func:`parameter_count`) so that the controller computes the gradient size the same way.

``--plant`` adds one known anti-pattern to every step, for test fixtures and for checking that diagnose
names it: ``item`` (a ``loss.item()`` after the forward pass), ``sync`` (``torch.cuda.synchronize()``
after backward), ``slow-loader`` (a dataset that sleeps), ``one-bucket`` (a bucket larger than the model:
nothing is reduced until backward ends) and ``no-sync`` (backward under ``no_sync()``, then one
all-reduce per parameter: the reduction never overlaps compute).

Progress protocol (rank 0 appends JSON lines to ``--results``, as the collective benchmark does): ``start``
once the ranks are together, then per bucket size two phases, ``train_warmup`` and ``train_profile``,
each announced by ``begin`` and closed by ``row`` (``bytes`` is the bucket size), and ``done``.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

if __package__:  # imported on the controller, as diagnose.shipped.<program>
    from . import common
else:  # run on a host as program.py, the launcher's copy of common.py beside it
    import common

PLANTS = ("item", "sync", "slow-loader", "one-bucket", "no-sync")
DEFAULT_BUCKET_CAP_MB = 25.0
# Few wide blocks rather than many narrow ones: the host's cost of a step (autograd, DDP's per-gradient
# hooks, the profiler's own bookkeeping) grows with the number of tensors and operators, the GPU's with the
# parameters. On an H200 a stack of 18 blocks of width 1024 kept the host busier than the GPU, the ranks
# drifted apart, and NCCL kernels spent the difference waiting for the slower rank: the probe would have
# measured its own launch overhead, not overlap. The widest hidden size that still leaves MIN_BLOCKS
# blocks within the budget is taken.
_HIDDEN_CHOICES = (128, 256, 512, 1024, 2048, 4096, 8192)
MIN_BLOCKS = 2
HEAD_DIM = 128
VOCAB_PER_HIDDEN = 2
# Defaults per device. GPU: ≈ 470 M parameters (two blocks of width 4096), ≈ 1.9 GB of fp32 gradients in
# buckets of one to a few tensors, 3 × 1024 tokens per step and rank: on an H200 the backward pass then
# lasts several times the all-reduce over NVLink, so a healthy job hides it, and a job that does not
# exposes more than a tenth of its step. CPU: a model small enough that two gloo ranks on a CI machine
# take seconds. On GPU, DDP times its first ten iterations (and every hundredth) with CUDA events it
# waits for: eleven warm-up steps keep those waits, which a real job at step 1000 does not have, out of
# the profiled steps.
GPU_DEFAULTS = {"params_m": 480.0, "batch": 3, "seq": 1024, "steps": 5, "warmup": 11}
CPU_DEFAULTS = {"params_m": 2.0, "batch": 4, "seq": 64, "steps": 3, "warmup": 2}
# Profiled steps end before DDP's hundredth iteration, which it times again.
DDP_TIMED_ITERATION = 100
SLOW_LOADER_SLEEP_MS = 400.0
PHASES = ("train_warmup", "train_profile")


@dataclass(frozen=True)
class Shape:
    """The synthetic model's dimensions."""

    hidden: int
    heads: int
    layers: int
    vocab: int


def block_parameters(hidden: int) -> int:
    """Parameters of one block: two LayerNorms, qkv and output projections, a 4× MLP (weights and biases)."""
    return 12 * hidden * hidden + 13 * hidden


def model_shape(params_m: float) -> Shape:
    """Dimensions of a model of about ``params_m`` million parameters (at least one block)."""
    target = params_m * 1e6
    hidden = _HIDDEN_CHOICES[0]
    for choice in _HIDDEN_CHOICES:
        if MIN_BLOCKS * block_parameters(choice) <= target:
            hidden = choice
    vocab = VOCAB_PER_HIDDEN * hidden
    rest = target - (2 * vocab * hidden + vocab + 2 * hidden)
    layers = max(1, round(rest / block_parameters(hidden)))
    return Shape(hidden=hidden, heads=max(1, hidden // HEAD_DIM), layers=layers, vocab=vocab)


def parameter_count(shape: Shape) -> int:
    """Exact parameter count: embedding, blocks, final LayerNorm, head (weight and bias)."""
    h, v = shape.hidden, shape.vocab
    return v * h + shape.layers * block_parameters(h) + 2 * h + h * v + v


def gradient_bytes(shape: Shape) -> int:
    """Bytes DDP all-reduces per step: one fp32 gradient per parameter."""
    return 4 * parameter_count(shape)


def trace_name(rank: int, bucket_cap_mb: float) -> str:
    """The file one rank's trace of one bucket size is written to (letters, digits, ``.-_`` only)."""
    return f"rank{rank}-bucket{bucket_cap_mb:g}mb.trace.json.gz"


def cap_bytes(bucket_cap_mb: float) -> int:
    """The ``bytes`` a phase's progress rows carry: its bucket size."""
    return int(bucket_cap_mb * 1024 * 1024)


def build_model(torch: Any, shape: Shape) -> Any:
    """The transformer stack as a torch module (classes are made here: torch is imported in main only)."""
    nn = torch.nn
    functional = torch.nn.functional

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            h = shape.hidden
            self.ln1 = nn.LayerNorm(h)
            self.qkv = nn.Linear(h, 3 * h)
            self.proj = nn.Linear(h, h)
            self.ln2 = nn.LayerNorm(h)
            self.up = nn.Linear(h, 4 * h)
            self.down = nn.Linear(4 * h, h)

        def forward(self, x: Any) -> Any:
            b, s, h = x.shape
            qkv = self.qkv(self.ln1(x)).view(b, s, 3, shape.heads, h // shape.heads)
            q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
            attn = functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(attn.transpose(1, 2).reshape(b, s, h))
            return x + self.down(functional.gelu(self.up(self.ln2(x))))

    class Stack(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(shape.vocab, shape.hidden)
            self.blocks = nn.ModuleList(Block() for _ in range(shape.layers))
            self.norm = nn.LayerNorm(shape.hidden)
            self.head = nn.Linear(shape.hidden, shape.vocab)

        def forward(self, tokens: Any) -> Any:
            x = self.embed(tokens)
            for block in self.blocks:
                x = block(x)
            return self.head(self.norm(x))

    return Stack()


def token_dataset(torch: Any, vocab: int, seq: int, sleep_s: float) -> Any:
    """Random token sequences, one per index, made on the fly (and slowly, when a plant says so)."""

    class Tokens(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return 1 << 40

        def __getitem__(self, index: int) -> tuple[Any, Any]:
            if sleep_s:
                time.sleep(sleep_s)
            generator = torch.Generator().manual_seed(index)
            tokens = torch.randint(vocab, (seq + 1,), generator=generator)
            return tokens[:-1], tokens[1:]

    return Tokens()


class Probe:
    """One rank of the probe: its process group, device, data and the steps it profiles."""

    def __init__(self, args: argparse.Namespace) -> None:
        import torch
        import torch.distributed as dist

        self.torch = torch
        self.dist = dist
        self.args = args
        place = common.place()
        self.rank, self.ranks, self.local_rank = place.rank, place.ranks, place.local_rank
        self.gpu = args.backend == "nccl"
        self.shape = model_shape(args.params_m)
        if not self.gpu:  # the host's cores shared by its ranks, as on a GPU host each has its own GPU
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // place.local_ranks))
        self.device = common.join_group(torch, dist, args.backend, args.op_timeout, self.local_rank)
        sleep_s = (args.loader_sleep_ms or (SLOW_LOADER_SLEEP_MS if args.plant == "slow-loader" else 0)) / 1e3
        loader = torch.utils.data.DataLoader(
            token_dataset(torch, self.shape.vocab, args.seq, sleep_s / args.batch),
            batch_size=args.batch,
            num_workers=args.loader_workers,
            pin_memory=self.gpu,
            persistent_workers=args.loader_workers > 0,
        )
        self.batches: Iterator[Any] = iter(loader)

    # -- one step --------------------------------------------------------------------------------------
    def loss(self, ddp: Any, tokens: Any, targets: Any) -> Any:
        torch = self.torch
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.gpu):
            logits = ddp(tokens)
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())

    def step(self, ddp: Any, optimizer: Any) -> None:
        """Load a batch, forward, backward (gradients all-reduced by DDP), update: one training step."""
        plant = self.args.plant
        tokens, targets = next(self.batches)
        tokens = tokens.to(self.device, non_blocking=True)
        targets = targets.to(self.device, non_blocking=True)
        if plant == "no-sync":
            with ddp.no_sync():
                self.loss(ddp, tokens, targets).backward()
            for param in ddp.module.parameters():
                if param.grad is not None:
                    self.dist.all_reduce(param.grad)
                    param.grad.div_(self.ranks)
        else:
            loss = self.loss(ddp, tokens, targets)
            if plant == "item" and not math.isfinite(loss.item()):
                raise FloatingPointError("the loss is not finite")
            loss.backward()
        if plant == "sync":
            self.torch.cuda.synchronize()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    def finish_gpu(self) -> None:
        if self.gpu:
            self.torch.cuda.synchronize()

    # -- one bucket size -------------------------------------------------------------------------------
    def bucket_cap(self, requested: float) -> float:
        """The bucket size this phase uses: one bucket larger than the whole model for ``one-bucket``."""
        if self.args.plant == "one-bucket":
            return float(math.ceil(gradient_bytes(self.shape) / (1024 * 1024)) + 1)
        return requested

    def run_cap(self, requested: float, emit: Callable[[dict[str, Any]], None]) -> None:
        """Warm up, then profile, a freshly built model with one bucket size."""
        torch, args = self.torch, self.args
        cap = self.bucket_cap(requested)
        nbytes = cap_bytes(requested)
        torch.manual_seed(0)
        model = build_model(torch, self.shape).to(self.device)
        device_ids = [self.local_rank] if self.gpu else None
        ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=device_ids, bucket_cap_mb=cap)
        optimizer = torch.optim.SGD(ddp.parameters(), lr=1e-4)

        emit({"event": "begin", "collective": PHASES[0], "bytes": nbytes})
        began = time.perf_counter()
        for _ in range(args.warmup):
            self.step(ddp, optimizer)
        self.finish_gpu()
        self.dist.barrier()
        warm_ms = (time.perf_counter() - began) * 1e3 / max(1, args.warmup)
        emit(
            {
                "event": "row",
                "collective": PHASES[0],
                "bytes": nbytes,
                "bucket_cap_mb": cap,
                "step_ms": round(warm_ms, 3),
            }
        )

        emit({"event": "begin", "collective": PHASES[1], "bytes": nbytes})
        began = time.perf_counter()
        self.profile(ddp, optimizer, requested)
        self.finish_gpu()
        self.dist.barrier()
        # Wall clock of the whole phase, profiler start and trace export included; the step times are the
        # trace's to tell.
        phase_s = time.perf_counter() - began
        emit(
            {
                "event": "row",
                "collective": PHASES[1],
                "bytes": nbytes,
                "bucket_cap_mb": cap,
                "phase_s": round(phase_s, 3),
                "steps": args.steps,
                "plant": args.plant,
                "trace": trace_name(self.rank, requested),
            }
        )
        del ddp, optimizer, model
        gc.collect()
        if self.gpu:
            torch.cuda.empty_cache()

    def profile(self, ddp: Any, optimizer: Any, requested: float) -> None:
        """``--steps`` steps under torch.profiler, after one step of profiler warm-up. Nothing here waits
        for the GPU: a wait of the probe's own would read as the job's host sync. The trace is written
        when the active window closes."""
        torch, args = self.torch, self.args
        profiler = torch.profiler
        activities = [profiler.ProfilerActivity.CPU]
        if self.gpu:
            activities.append(profiler.ProfilerActivity.CUDA)
        path = os.path.join(args.files_dir, trace_name(self.rank, requested)) if args.files_dir else None
        schedule = profiler.schedule(wait=0, warmup=1, active=args.steps, repeat=1)

        def export(prof: Any) -> None:
            if path is not None:
                prof.export_chrome_trace(path)

        with profiler.profile(
            activities=activities,
            schedule=schedule,
            on_trace_ready=export,
            record_shapes=False,
            profile_memory=False,
            with_stack=False,
        ) as prof:
            for _ in range(args.steps + 1):
                self.step(ddp, optimizer)
                prof.step()


def parse_caps(text: str) -> list[float]:
    """Bucket sizes in MB from ``25,100,400``; ValueError names the first that is not a positive number."""
    caps = []
    for part in text.split(","):
        if part.strip():
            value = float(part)
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"bucket size {part.strip()!r} is not a positive number")
            caps.append(value)
    return caps


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("nccl", "gloo"), default="nccl")
    parser.add_argument("--params-m", type=float, help="model size in millions of parameters")
    parser.add_argument("--batch", type=int, help="sequences per step and rank")
    parser.add_argument("--seq", type=int, help="tokens per sequence")
    parser.add_argument("--warmup", type=int, help="steps before profiling")
    parser.add_argument("--steps", type=int, help="profiled steps")
    parser.add_argument(
        "--bucket-cap-mb",
        default=f"{DEFAULT_BUCKET_CAP_MB:g}",
        help="DDP bucket size in MB; several, comma-separated, are profiled one after the other",
    )
    parser.add_argument("--plant", choices=PLANTS, help="add one anti-pattern to every step")
    parser.add_argument("--loader-workers", type=int, default=2)
    parser.add_argument("--loader-sleep-ms", type=float, default=0.0, help="sleep per batch in the dataset")
    parser.add_argument(
        "--op-timeout", type=float, default=900.0, help="seconds before torch aborts a collective"
    )
    parser.add_argument("--results", help="file rank 0 appends its JSON progress lines to")
    parser.add_argument("--log-dir", help="where each rank writes its NCCL log (nccl-rank<N>.log)")
    parser.add_argument("--files-dir", help="where each rank writes its trace")
    args = parser.parse_args(argv)
    defaults = GPU_DEFAULTS if args.backend == "nccl" else CPU_DEFAULTS
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    try:
        args.bucket_caps = parse_caps(args.bucket_cap_mb)
    except ValueError as exc:
        parser.error(f"--bucket-cap-mb: {exc}")
    if not args.bucket_caps:
        parser.error("--bucket-cap-mb names no bucket size")
    if args.plant == "sync" and args.backend != "nccl":
        parser.error("--plant sync needs a GPU (nccl)")
    if min(args.params_m, args.batch, args.seq, args.steps) <= 0 or args.warmup < 0:
        parser.error("--params-m, --batch, --seq and --steps must be positive, --warmup not negative")
    if args.warmup + args.steps + 1 >= DDP_TIMED_ITERATION:
        parser.error(f"--warmup + --steps must stay below {DDP_TIMED_ITERATION - 1}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rank = common.rank()
    common.nccl_log_per_rank(args.log_dir, rank)
    if args.files_dir:
        os.makedirs(args.files_dir, exist_ok=True)
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning)
    with common.Progress(args.results, rank) as progress:
        probe = Probe(args)
        progress.emit(start_record(probe))
        for phase in PHASES:  # each phase's hang budget is its own, not the sum over bucket sizes
            progress.emit({"event": "warm", "collective": phase})
        for cap in args.bucket_caps:
            probe.run_cap(cap, progress.emit)
        probe.dist.barrier()
        progress.emit({"event": "done"})
        probe.dist.destroy_process_group()
    return 0


def start_record(probe: Probe) -> dict[str, Any]:
    """The ``start`` line: the job, the model's size and shape, the software it runs on."""
    args, shape = probe.args, probe.shape
    return {
        "event": "start",
        "ranks": probe.ranks,
        "backend": args.backend,
        "parameters": parameter_count(shape),
        "gradient_bytes": gradient_bytes(shape),
        "shape": {"hidden": shape.hidden, "heads": shape.heads, "layers": shape.layers, "vocab": shape.vocab},
        "batch": args.batch,
        "seq": args.seq,
        "plant": args.plant,
        **common.versions(probe.torch, probe.device),
    }


if __name__ == "__main__":
    sys.exit(main())
