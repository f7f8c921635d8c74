"""What every program diagnose ships to the hosts does alike: find its place in the job, join the process
group on its device, name the software it runs on, and report progress as JSON lines.

The launcher copies this file into the launch's folder beside the program (``common.py`` next to
``program.py``: see ``LaunchSpec.beside``), and the program imports it from its own folder; on the
controller the programs import it from this package. Like them it uses nothing but the standard library
and torch, and touches torch only through the module a caller hands in, so importing it costs nothing.

The progress protocol the launcher follows: rank 0 prints one JSON object per line and appends the same
line to ``--results``, flushed at once, so that every row measured before a hang or a crash is kept.
"""

from __future__ import annotations

import datetime
import json
import os
from dataclasses import dataclass
from typing import IO, Any


@dataclass(frozen=True)
class Place:
    """This process's place in the job, as torchrun's environment gives it."""

    rank: int
    ranks: int
    local_rank: int
    local_ranks: int


def rank() -> int:
    """This process's rank; 0 outside torchrun (a program run by hand is its own rank 0)."""
    return int(os.environ.get("RANK", "0"))


def place() -> Place:
    """Rank and world size (required: a process group needs them), local rank and local world size."""
    return Place(
        rank=int(os.environ["RANK"]),
        ranks=int(os.environ["WORLD_SIZE"]),
        local_rank=int(os.environ.get("LOCAL_RANK", "0")),
        local_ranks=int(os.environ.get("LOCAL_WORLD_SIZE", "1")),
    )


def join_group(torch: Any, dist: Any, backend: str, op_timeout_s: float, gpu: int) -> Any:
    """Join the job's process group and return this rank's device: on ``nccl`` GPU ``gpu``, made the
    current device and bound to the communicator; on ``gloo`` the CPU. A collective that takes longer
    than ``op_timeout_s`` is aborted by torch, so a hung peer ends the program instead of stalling it."""
    timeout = datetime.timedelta(seconds=op_timeout_s)
    if backend == "nccl":
        device = torch.device("cuda", gpu)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", timeout=timeout, device_id=device)
        return device
    dist.init_process_group("gloo", timeout=timeout)
    return torch.device("cpu")


def versions(torch: Any, device: Any) -> dict[str, Any]:
    """torch's version and, on a GPU, NCCL's and the GPU's name: what a ``start`` line reports."""
    info: dict[str, Any] = {"torch": torch.__version__}
    if device.type == "cuda":
        nccl = torch.cuda.nccl.version()
        info["nccl"] = ".".join(str(p) for p in nccl) if isinstance(nccl, tuple) else str(nccl)
        info["gpu"] = torch.cuda.get_device_name(device)
    return info


def bus_id(torch: Any, gpu: int) -> str | None:
    """GPU ``gpu``'s PCI address as nvidia-smi prints it (00000000:18:00.0), to match other checks' GPUs."""
    props = torch.cuda.get_device_properties(gpu)
    parts = [getattr(props, f"pci_{name}_id", None) for name in ("domain", "bus", "device")]
    if any(not isinstance(p, int) for p in parts):
        return None
    return f"{parts[0]:08X}:{parts[1]:02X}:{parts[2]:02X}.0"


def nccl_log_per_rank(log_dir: str | None, rank: int) -> None:
    """With NCCL_DEBUG set, send this rank's NCCL log to ``<log_dir>/nccl-rank<N>.log``, which the
    launcher brings home as evidence; NCCL reads the variable when it starts, so call this first."""
    if log_dir and os.environ.get("NCCL_DEBUG"):
        os.makedirs(log_dir, exist_ok=True)
        os.environ["NCCL_DEBUG_FILE"] = os.path.join(log_dir, f"nccl-rank{rank}.log")


class Progress:
    """Rank 0's progress lines (see the module docstring); on the other ranks :meth:`emit` does nothing."""

    def __init__(self, results: str | None, rank: int) -> None:
        self.speaks = rank == 0
        self.file: IO[str] | None = (
            open(results, "a", encoding="utf-8") if results and self.speaks else None  # noqa: SIM115
        )

    def emit(self, record: dict[str, Any]) -> None:
        if not self.speaks:
            return
        line = json.dumps(record)
        print(line, flush=True)
        if self.file is not None:
            self.file.write(line + "\n")
            self.file.flush()

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
