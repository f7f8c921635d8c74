"""Who owns a host-device sync: the user's code, or a framework the user cannot remove it from.

A ``cudaStreamSynchronize`` / ``cudaEventSynchronize`` / ``cudaDeviceSynchronize`` stalls the host until
the GPU drains, whoever calls it. Only some are the user's to remove, and a verdict that blames the others
sends the user after code they do not own. The owner is read from the CPU ops that enclose the call on its
thread (the trace's op stack):

- **DDP's runtime statistics**: ``DistributedDataParallel`` times its iterations 1–10 and every 100th
  after (``kDDPRuntimeLoggingSampleRate``) with CUDA events, and waits for them at the start of its
  forward: a sync whose innermost enclosing op is the ``DistributedDataParallel.forward`` range itself
  (a user's ``.item()`` inside the model's forward has its own ``aten::item`` between the two). A job
  profiled in its first steps (``schedule(wait=1, warmup=1, active=3)``) shows one every step;
- **AMP's GradScaler**: ``GradScaler.step`` reads its found-inf flags with ``.item()`` (``_maybe_opt_step``)
  after ``unscale_`` checked the gradients (``aten::_amp_foreach_non_finite_check_and_unscale_``), then
  runs the optimizer or, on an overflow, skips to ``update()`` (``aten::_amp_update_scale_``). Named by
  GradScaler's Python frames where the trace has them (``with_stack=True``), else by that order: an
  ``.item()`` after the step's unscale op whose next op is the optimizer's step or the scale update (a
  user's ``.item()`` of a clipped gradient norm has GradScaler's own ``.item()`` after it);
- **the optimizer**: a sync inside ``Optimizer.step#…`` (found-inf handling, an optimizer that reads a
  scalar back);
- **communicator setup**: a process group's first collective builds its communicator (NCCL:
  ``ncclCommInitRank``, recorded as ``record_param_comms`` with collective name ``init``), with dozens of
  host syncs. Once per group it is the cost of having the group; a group made every step is the user's
  to fix, and ``train.communicator`` judges that, so ``train.sync`` only shows these;
- **user code**: everything else: ``.item()``, ``torch.cuda.synchronize()``, a blocking copy, or a sync
  inside one of the user's own ``record_function`` ranges (named by the innermost one).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass

USER = "user code"
DDP = "DDP runtime statistics"
AMP = "AMP GradScaler"
OPTIMIZER = "optimizer"
COMMUNICATOR = "communicator setup"

DDP_FORWARD = "DistributedDataParallel.forward"
OPTIMIZER_PREFIX = "Optimizer.step#"
ITEM_OPS = ("aten::item", "aten::_local_scalar_dense")
AMP_UNSCALE = "aten::_amp_foreach_non_finite_check_and_unscale_"
AMP_UPDATE = "aten::_amp_update_scale_"
AMP_OPS = (AMP_UNSCALE, AMP_UPDATE)
# The mark a communicator's creation leaves: record_param_comms with collective name "init".
COMM_INIT_OP = "record_param_comms (init)"
# Python frames (``with_stack=True``) of GradScaler's own methods, e.g.
# "torch/amp/grad_scaler.py(380): _maybe_opt_step".
GRAD_SCALER_FILE = "grad_scaler.py"
#: What each framework's sync is, for the reader of the report: the owners a user cannot remove a sync
#: from, shown as information, never judged.
WHY = {
    DDP: "DDP times its iterations 1–10 and every 100th with CUDA events and waits for them in its forward",
    AMP: "GradScaler.step reads the found-inf flags with .item() before the optimizer may run (an "
    "optimizer built with fused=True takes them on the GPU instead)",
    OPTIMIZER: "a sync inside Optimizer.step",
    COMMUNICATOR: "a new process group's first collective builds its communicator (train.communicator "
    "judges groups made inside the loop)",
}

Span = tuple[float, float]
Named = tuple[float, float, str]


@dataclass(frozen=True)
class SyncCall:
    """One sync call and what encloses it on its thread."""

    name: str  # the runtime call: cudaStreamSynchronize, ...
    ranges: tuple[str, ...]  # enclosing record_function ranges, outermost first
    frames: tuple[str, ...]  # enclosing Python frames of interest (with_stack traces)
    innermost_op: str | None  # the innermost enclosing CPU op or range, where it has a name kept
    in_item: bool  # inside aten::item / aten::_local_scalar_dense
    in_comm_init: bool  # inside the creation of a communicator
    found_inf_read: bool  # the .item() where GradScaler.step reads its found-inf flags


def owner_of(call: SyncCall) -> tuple[str, str]:
    """(owner, cause): who can remove the sync, and what it is, in words."""
    what = ".item()" if call.in_item else call.name
    if call.in_comm_init:
        return COMMUNICATOR, f"{COMMUNICATOR}: {call.name} in {COMM_INIT_OP}"
    if any(GRAD_SCALER_FILE in frame for frame in call.frames) or call.found_inf_read:
        return AMP, f"{AMP}: found-inf check ({what})"
    optimizer = next((r for r in reversed(call.ranges) if r.startswith(OPTIMIZER_PREFIX)), None)
    if optimizer is not None:
        return OPTIMIZER, f"{OPTIMIZER}: {what} in {optimizer}"
    if call.innermost_op == DDP_FORWARD:
        return DDP, f"{DDP}: {call.name} in {DDP_FORWARD}"
    if call.in_item:
        return USER, ".item() (aten::item)"
    if call.name == "cudaDeviceSynchronize":
        return USER, "torch.cuda.synchronize() (cudaDeviceSynchronize)"
    return USER, f"{call.name} in {call.ranges[-1]}" if call.ranges else call.name


class ThreadOps:
    """One host thread's CPU ops, indexed for the questions :func:`owner_of` asks of a sync on it.

    ``ops`` are every CPU op and range of the thread, unnamed (the stream keeps no name it does not need);
    ``ranges`` its record_function ranges and ``marks`` its item and AMP ops, named; ``frames`` its Python
    frames (traces taken with ``with_stack=True``).
    """

    def __init__(self, ops: list[Span], ranges: list[Named], marks: list[Named], frames: list[Named]) -> None:
        self.ops = sorted(ops, key=lambda span: (span[0], -span[1]))
        self.starts = [start for start, _ in self.ops]
        self.names = {(start, end): name for start, end, name in (*ranges, *marks)}
        self.ranges = sorted(ranges)
        self.items = sorted((s, e) for s, e, name in marks if name in ITEM_OPS)
        self.item_starts = [start for start, _ in self.items]
        self.unscales = sorted(end for _, end, name in marks if name == AMP_UNSCALE)
        self.optimizer_starts = sorted(s for s, _, name in ranges if name.startswith(OPTIMIZER_PREFIX))
        self.frames = sorted(f for f in frames if GRAD_SCALER_FILE in f[2])
        self.inits = [(s, e) for s, e, name in marks if name == COMM_INIT_OP]

    def call(self, name: str, moment: float) -> SyncCall:
        """The sync ``name`` that this thread called at ``moment``, with what encloses it."""
        innermost = self._innermost(moment)
        item = self._item(moment)
        return SyncCall(
            name=name,
            ranges=tuple(r[2] for r in self.ranges if r[0] <= moment <= r[1]),
            frames=tuple(f[2] for f in self.frames if f[0] <= moment <= f[1]),
            innermost_op=self.names.get(innermost) if innermost else None,
            in_item=item is not None,
            in_comm_init=any(start <= moment <= end for start, end in self.inits),
            found_inf_read=item is not None and self._reads_found_inf(item),
        )

    def _innermost(self, moment: float) -> Span | None:
        """The op with the latest start that still encloses ``moment`` (ops nest on one thread)."""
        index = bisect_right(self.starts, moment) - 1
        while index >= 0:
            if self.ops[index][1] >= moment:
                return self.ops[index]
            index -= 1
        return None

    def _item(self, moment: float) -> Span | None:
        """The outermost item op around ``moment`` (aten::item holds the aten::_local_scalar_dense it
        calls; item ops nest but never overlap otherwise)."""
        found = None
        index = bisect_right(self.item_starts, moment) - 1
        while index >= 0 and self.items[index][1] >= moment:
            found = self.items[index]
            index -= 1
        return found

    def _reads_found_inf(self, item: Span) -> bool:
        """GradScaler's ``.item()``: after the step's unscale op (no optimizer step between), and the op
        right after it is the optimizer's step or the scale update. A user's ``.item()`` between
        ``unscale_`` and ``step`` (a logged gradient norm) has GradScaler's own after it, so it stays the
        user's; so would, on a single process driving several GPUs, all but the last device's flag."""
        before = bisect_right(self.unscales, item[0]) - 1
        if before < 0:
            return False
        optimizers = self.optimizer_starts
        if bisect_right(optimizers, item[0]) > bisect_left(optimizers, self.unscales[before]):
            return False
        index = bisect_left(self.starts, item[1])
        name = self.names.get(self.ops[index]) if index < len(self.ops) else None
        return name is not None and (name.startswith(OPTIMIZER_PREFIX) or name == AMP_UPDATE)
