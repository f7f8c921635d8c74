"""Copy bandwidths of one host, measured by a program diagnose ships there and starts with torchrun.

The per-host figures that the fleet is judged by (:mod:`diagnose.probes.fleet_judge`) besides single-node busbw:

* ``memcpy``: host memory to host memory, one large tensor copy (every host, GPU or not);
* ``h2d`` and ``d2h``: per GPU, pinned host memory to the GPU and back — the PCIe path (a link trained
  narrow or slow, a GPU behind the wrong root complex, a degraded switch all show here);
* ``peer``: for every ordered pair of GPUs, a device-to-device copy — NVLink where the GPUs have it (torch
  enables peer access), PCIe or a bounce through the host where they do not; each row says which.

Every figure is the median of ``--reps`` timed copies of ``--bytes`` after an untimed warm-up copy. GPU
copies are timed between two CUDA events on the stream that does the copy (for a peer copy torch copies
on the source device's current stream); host copies with the wall clock. GPUs and pairs are measured
one at a time, so each figure is that link's own, not its share of a shared root complex.

Like :mod:`diagnose.shipped.collective_bench` it runs with nothing but the standard library and torch, imports torch
only inside :func:`main`, and rank 0 appends JSON lines to ``--results`` (``start``, ``warm`` per metric,
one ``row`` per figure with ``collective`` = the metric and ``bytes``, ``done``). The ``start`` line names
what could not be measured on this host (no GPU, one GPU) so that a missing figure is never silent;
``start`` and ``done`` carry the host's clock, so the record shows when each host was measured.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

if __package__:  # imported on the controller, as diagnose.shipped.<program>
    from . import common
else:  # run on a host as program.py, the launcher's copy of common.py beside it
    import common

METRICS = ("memcpy", "h2d", "d2h", "peer")
DEFAULT_BYTES = 256 << 20
DEFAULT_REPS = 10


def gbps(nbytes: int, seconds: float) -> float:
    """Bytes moved per second, in GB/s (1e9 B/s, as nccl-tests and nvbandwidth print)."""
    return nbytes / seconds / 1e9 if seconds > 0 else 0.0


def expected_rows(gpus: int, nbytes: int, device: str) -> list[tuple[str, int]]:
    """The (metric, bytes) rows this program emits on a host with ``gpus`` GPUs, in order."""
    rows = [("memcpy", nbytes)]
    if device == "cuda" and gpus > 0:
        rows += [("h2d", nbytes)] * gpus + [("d2h", nbytes)] * gpus
        rows += [("peer", nbytes)] * (gpus * (gpus - 1))
    return rows


class Probe:
    """The timed copies of one host."""

    def __init__(self, args: argparse.Namespace, emit: Callable[[dict[str, Any]], None]) -> None:
        import torch

        self.torch = torch
        self.args = args
        self.emit = emit
        self.gpus = torch.cuda.device_count() if args.device == "cuda" else 0

    def median_seconds(self, timed: Callable[[], float]) -> tuple[float, list[float]]:
        """One untimed call, then ``reps`` timed ones: the median and every sample."""
        timed()
        samples = [timed() for _ in range(self.args.reps)]
        return statistics.median(samples), samples

    def row(self, metric: str, seconds: float, samples: list[float], **extra: Any) -> None:
        nbytes = self.args.bytes
        self.emit(
            {
                "event": "row",
                "collective": metric,
                "bytes": nbytes,
                "gbps": round(gbps(nbytes, seconds), 3),
                "samples_gbps": [round(gbps(nbytes, s), 3) for s in samples],
                **extra,
            }
        )

    def memcpy(self) -> None:
        torch = self.torch
        n = self.args.bytes
        src = torch.ones(n, dtype=torch.uint8)
        dst = torch.empty(n, dtype=torch.uint8)

        def once() -> float:
            began = time.perf_counter()
            dst.copy_(src)
            return time.perf_counter() - began

        self.emit({"event": "warm", "collective": "memcpy"})
        seconds, samples = self.median_seconds(once)
        self.row("memcpy", seconds, samples, threads=torch.get_num_threads())

    def _timed_on(self, device: int, copy: Callable[[], Any]) -> Callable[[], float]:
        """A timer of ``copy`` between two events on ``device``'s current stream."""
        torch = self.torch

        def once() -> float:
            with torch.cuda.device(device):
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                copy()
                end.record()
                end.synchronize()
                return start.elapsed_time(end) / 1e3

        return once

    def host_device(self) -> None:
        torch, n = self.torch, self.args.bytes
        host = torch.ones(n, dtype=torch.uint8).pin_memory()
        for direction in ("h2d", "d2h"):
            self.emit({"event": "warm", "collective": direction})
            for gpu in range(self.gpus):
                device = torch.empty(n, dtype=torch.uint8, device=f"cuda:{gpu}")
                if direction == "h2d":
                    timer = self._timed_on(gpu, lambda d=device, h=host: d.copy_(h, non_blocking=True))
                else:
                    timer = self._timed_on(gpu, lambda d=device, h=host: h.copy_(d, non_blocking=True))
                seconds, samples = self.median_seconds(timer)
                self.row(direction, seconds, samples, gpu=gpu, name=torch.cuda.get_device_name(gpu))

    def peers(self) -> None:
        torch, n = self.torch, self.args.bytes
        buffers = [torch.empty(n, dtype=torch.uint8, device=f"cuda:{g}") for g in range(self.gpus)]
        self.emit({"event": "warm", "collective": "peer"})
        for src in range(self.gpus):
            for dst in range(self.gpus):
                if src == dst:
                    continue
                timer = self._timed_on(
                    src, lambda s=buffers[src], d=buffers[dst]: d.copy_(s, non_blocking=True)
                )
                seconds, samples = self.median_seconds(timer)
                p2p = bool(torch.cuda.can_device_access_peer(src, dst))
                self.row("peer", seconds, samples, src=src, dst=dst, p2p=p2p)

    def not_measured(self) -> list[str]:
        """What this host cannot give, said in the ``start`` line."""
        if self.args.device != "cuda":
            return ["h2d, d2h: no GPU (CPU host)", "peer: no GPU (CPU host)"]
        if self.gpus == 0:
            return ["h2d, d2h: torch sees no CUDA device", "peer: torch sees no CUDA device"]
        if self.gpus == 1:
            return ["peer: one GPU, no pair"]
        return []

    def start_record(self) -> dict[str, Any]:
        torch = self.torch
        record: dict[str, Any] = {
            "event": "start",
            "time": round(time.time(), 3),
            "device": self.args.device,
            "torch": torch.__version__,
            "bytes": self.args.bytes,
            "reps": self.args.reps,
            "gpus": [torch.cuda.get_device_name(g) for g in range(self.gpus)],
            "not_measured": self.not_measured(),
        }
        if self.gpus:
            record["pci_bus_ids"] = [common.bus_id(self.torch, g) for g in range(self.gpus)]
        return record

    def run(self) -> None:
        self.emit(self.start_record())
        self.memcpy()
        if self.gpus:
            self.host_device()
        if self.gpus > 1:
            self.peers()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--bytes", type=int, default=DEFAULT_BYTES, help="bytes per timed copy")
    parser.add_argument("--reps", type=int, default=DEFAULT_REPS, help="timed copies per figure")
    parser.add_argument("--results", help="file rank 0 appends its JSON lines to")
    parser.add_argument("--log-dir", help="unused: the launcher passes it to every program")
    args = parser.parse_args(argv)
    if args.bytes <= 0 or args.reps <= 0:
        parser.error("need --bytes > 0 and --reps > 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rank = common.rank()
    if rank != 0:
        return 0
    with common.Progress(args.results, rank) as progress:
        probe = Probe(args, progress.emit)
        if args.device == "cuda" and probe.gpus == 0:
            print("fleet probe: --device cuda but torch sees no CUDA device", file=sys.stderr)
        probe.run()
        progress.emit({"event": "done", "time": round(time.time(), 3)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
