"""Two training anti-patterns read from a trace, step by step: single-process DataParallel, and process
groups (communicators) created inside the training loop.

**DataParallel** (``nn.DataParallel``): one process drives every GPU. Each step it scatters the batch from
GPU 0, replicates the model onto the other GPUs, and gathers the outputs back onto GPU 0 (and in backward
reduces the gradients there), all under one Python interpreter. Its forward is a ``DataParallel.forward``
record_function range (``DistributedDataParallel.forward`` is DDP's, a different name); its copies are the
autograd functions ``Scatter``, ``Gather``, ``Broadcast`` and ``ReduceAddCoalesced`` (and their backward
nodes) among the CPU ops, and ``replicate`` among the Python frames of a ``with_stack=True`` trace.

**A communicator per step**: ``dist.new_group()`` / ``init_process_group()`` inside the loop makes a new
process group each time, and its first collective builds a new communicator (NCCL: ``ncclCommInitRank``,
a bootstrap across every rank, buffers on every GPU, dozens of host syncs). The trace shows it by any of:

- ``record_param_comms`` with collective name ``init`` (torch records the communicator's creation so; the
  unique-id broadcast before it is ``broadcastUniqueNCCLID``);
- the Python frames of the functions that create groups (``with_stack=True`` traces);
- a process group first used in this step (``record_param_comms``' process group name), or, on gloo, a
  collective on a ``pt_gloo_runloop`` thread first seen in this step (each gloo group runs its own). Both
  are relative to the steps before, so the first profiled step cannot tell by them.

A step's count is the largest of the counts those signals give (they see the same creations).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

DATAPARALLEL_FORWARD = "DataParallel.forward"
DATAPARALLEL_COPIES = ("Scatter", "Gather", "Broadcast", "ReduceAddCoalesced")
BACKWARD_PREFIX = "autograd::engine::evaluate_function: "
REPLICATE_FRAME = "replicate.py"
# The c10d functions that create a process group, as Python frames name them
# ("torch/distributed/distributed_c10d.py(5364): new_group"); counted once per outermost frame.
GROUP_CREATORS = (
    "init_process_group",
    "new_group",
    "new_subgroups",
    "new_subgroups_by_enumeration",
    "split_group",
    "_new_process_group_helper",
    "init_device_mesh",
)
COMM_INIT = "init"
PROCESS_GROUP_KEY = "Process Group Name"

Window = tuple[int, float, float]


@dataclass
class PatternSpans:
    """What one streaming pass keeps for the two patterns (moments in µs)."""

    dataparallel: list[float] = field(default_factory=list)
    copies: list[float] = field(default_factory=list)
    comm_inits: list[float] = field(default_factory=list)
    creations: list[tuple[float, float]] = field(default_factory=list)
    group_uses: list[tuple[float, str]] = field(default_factory=list)

    def see_cpu(self, name: str, start: float, args: dict[str, Any]) -> None:
        """A CPU op or record_function range."""
        if name == DATAPARALLEL_FORWARD:
            self.dataparallel.append(start)
        elif _is_copy(name):
            self.copies.append(start)
        elif name == "record_param_comms":
            if args.get("Collective name") == COMM_INIT:
                self.comm_inits.append(start)
            group = args.get(PROCESS_GROUP_KEY)
            if group is not None:
                self.group_uses.append((start, str(group)))

    def see_frame(self, name: str, start: float, end: float) -> None:
        """A Python frame (``with_stack=True``)."""
        function = name.rpartition(": ")[2]
        if function in GROUP_CREATORS and "distributed" in name:
            self.creations.append((start, end))
        elif function == "replicate" and REPLICATE_FRAME in name:
            self.copies.append(start)


def _is_copy(name: str) -> bool:
    base = name.removeprefix(BACKWARD_PREFIX).removesuffix("Backward")
    return base in DATAPARALLEL_COPIES


@dataclass
class StepPatterns:
    """One step's counts; ``new_communicators`` is None where no signal could say."""

    dataparallel_calls: int = 0
    dataparallel_copies: int = 0
    new_communicators: int | None = None


class _Steps:
    """The step windows, sorted by start, and which one holds a moment."""

    def __init__(self, windows: list[Window]) -> None:
        self.windows = windows
        self.starts = [start for _, start, _ in windows]

    def __len__(self) -> int:
        return len(self.windows)

    def index(self, moment: float) -> int | None:
        found = bisect_right(self.starts, moment) - 1
        return found if found >= 0 and moment < self.windows[found][2] else None


def per_step(spans: PatternSpans, windows: list[Window], gloo: list[tuple[float, Any]]) -> list[StepPatterns]:
    """Each step's counts of the two patterns (``windows`` sorted by start); ``gloo`` holds the (start,
    thread) of gloo's collectives."""
    steps = [StepPatterns() for _ in windows]
    where = _Steps(windows)
    for moment in spans.dataparallel:
        _count(steps, where, moment, "dataparallel_calls")
    for moment in spans.copies:
        _count(steps, where, moment, "dataparallel_copies")
    signals = [
        _in_steps(where, spans.comm_inits),
        _in_steps(where, [start for start, _ in _outermost(spans.creations)]),
        _first_uses(where, spans.group_uses),
        _first_uses(where, [(start, str(thread)) for start, thread in gloo]),
    ]
    for signal in signals:
        for index, count in enumerate(signal):
            if count is None:
                continue
            known = steps[index].new_communicators
            steps[index].new_communicators = count if known is None else max(known, count)
    return steps


def _count(steps: list[StepPatterns], windows: _Steps, moment: float, name: str) -> None:
    index = windows.index(moment)
    if index is not None:
        setattr(steps[index], name, getattr(steps[index], name) + 1)


def _in_steps(windows: _Steps, moments: list[float]) -> list[int | None]:
    """Per step, how many of ``moments`` fall in it; all None when there are none (nothing seen)."""
    if not moments:
        return [None] * len(windows)
    counts: list[int | None] = [0] * len(windows)
    for moment in moments:
        index = windows.index(moment)
        if index is not None:
            counts[index] = (counts[index] or 0) + 1
    return counts


def _first_uses(windows: _Steps, uses: list[tuple[float, str]]) -> list[int | None]:
    """Per step after the first, how many keys (process groups, gloo threads) no earlier step used;
    None for the first step (everything is new there) and for all steps when nothing was used."""
    if not uses:
        return [None] * len(windows)
    keys: dict[int, set[str]] = defaultdict(set)
    for moment, key in uses:
        index = windows.index(moment)
        if index is not None:
            keys[index].add(key)
    seen: set[str] = set(keys.get(0, ()))
    counts: list[int | None] = [None]
    for index in range(1, len(windows)):
        fresh = keys.get(index, set()) - seen
        counts.append(len(fresh))
        seen |= fresh
    return counts


def _outermost(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The spans not inside another (new_group → _new_process_group_helper is one creation)."""
    kept: list[tuple[float, float]] = []
    for start, end in sorted(spans, key=lambda span: (span[0], -span[1])):
        if kept and start >= kept[-1][0] and end <= kept[-1][1]:
            continue
        kept.append((start, end))
    return kept


def summarize_patterns(steps: list[StepPatterns]) -> dict[str, Any]:
    """Over every profiled step (a pattern is in the code, warm-up or not): the totals the judge reads."""
    known = [s.new_communicators for s in steps if s.new_communicators is not None]
    return {
        "dataparallel_steps": sum(1 for s in steps if s.dataparallel_calls),
        "dataparallel_calls": sum(s.dataparallel_calls for s in steps),
        "dataparallel_copies": sum(s.dataparallel_copies for s in steps),
        "communicator_steps": sum(1 for n in known if n) if known else None,
        "communicator_known_steps": len(known),
        "new_communicators": sum(known) if known else None,
    }
