"""The ranks' trace metrics → the ``train.*`` checks of checklist section 4 (pure: facts in, results out).

:func:`judge_training` gives the four the training probe and ``diagnose trace`` share (overlap, tail,
syncs, input); :func:`judge_patterns` the two anti-patterns only a user's own job can have (single-process
DataParallel, communicators created inside the loop). Host syncs are judged only where the user's code
owns them (:mod:`diagnose.trace.owners`); DDP's, GradScaler's, the optimizer's and a communicator's setup
syncs are named in the message and the observed values as information.

Exposed communication alone cannot say whose fault it is: a slow fabric makes every all-reduce long, and
a job that hides nothing exposes even a fast one. So the all-reduce time a step needs on *this* fabric
is computed from what the collectives stage measured (busbw) and the bytes the step reduced:
``bytes · 2(n−1)/n / busbw``. Communication far above that points at the fabric (``bench.*``,
``nccl.transport``); communication near it but exposed points at the job (buckets, ``no_sync``, a sync
point). The two get different messages and remediations.

An NCCL kernel also runs while it waits for the slowest rank to arrive, so one rank's communication time
is fabric time plus waiting. The fabric is therefore judged on the rank that waits least (the minimum
communication over the ranks), and a rank whose communication exceeds that minimum by a material amount
is waiting for a peer: rank skew, named as its own cause. The excess is taken step by step and must stand
out of the steps' own scatter (:mod:`diagnose.trace.peers`: on a socket-bound pair of H200s one rank's step
boundary fell inside an all-reduce, and the medians differed by 57 ms where the steps agreed), and exceed
what the fabric's measured rate explains for this rank. And part of an all-reduce cannot hide at all:
the time the fabric needs beyond the backward compute it could run behind is subtracted before the job's
overlap is blamed. Exposure is judged only when it matters both relatively and absolutely (at least
``train_min_exposed_comm_ms`` and ``train_max_exposed_comm_pct`` of the step): a small healthy exposure
passes, a fully serialized one fails even when the step is long. Where the collectives stage failed its
all-reduce under the floor of its normal range (a fabric, or ``NCCL_P2P_DISABLE``/``NCCL_SHM_DISABLE``, that
does not deliver), material exposure is the fabric's and the words say so: "a fabric that delivers" is said
only of one that did.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from diagnose.catalog.stage_ids import (
    TRAIN_COMMUNICATOR,
    TRAIN_DATAPARALLEL,
    TRAIN_INPUT,
    TRAIN_OVERLAP,
    TRAIN_SYNC,
    TRAIN_TAIL,
)
from diagnose.core.model import SEVERITY, CheckResult, worst
from diagnose.core.units import counted, noun_for
from diagnose.core.vars import Vars
from diagnose.trace.analyze import RankAnalysis
from diagnose.trace.owners import WHY
from diagnose.trace.peers import SKEW_NOISE_K, Peers, paired_excess, rank_label, steady_comm

CHECKLIST = "4"
# Defaults of the profile variables (diagnose/config/profiles.py names and explains each).
DEFAULTS: dict[str, float] = {
    "train_min_overlap_ratio": 0.7,
    "train_max_exposed_comm_pct": 5.0,
    "train_min_exposed_comm_ms": 1.0,
    "train_max_tail_pct": 10.0,
    "train_max_syncs_per_step": 0,
    "train_max_input_stall_pct": 5.0,
    "train_fabric_slowdown": 2.0,
}

REMEDY_FABRIC = (
    "The all-reduces themselves are slow, not the job: read bench.all_reduce (busbw against the expected "
    "range) and nccl.transport (NET/Socket where NET/IB was expected), and the node-health checks of the "
    "hosts these ranks ran on, before tuning the job."
)
REMEDY_OVERLAP = (
    "The fabric delivers, but the job waits for it: keep DDP's bucket_cap_mb near the default (one huge "
    "bucket starts the all-reduce only after the whole backward pass), use no_sync() only on accumulation "
    "micro-steps, and remove host syncs (.item(), torch.cuda.synchronize()) inside backward."
)
REMEDY_SKEW = (
    "One rank reaches the all-reduce late and the others wait inside their NCCL kernels: find what slows that "
    "rank (its DataLoader or storage, host CPU contention, a throttled or slower GPU: the fleet.* and "
    "node-health checks of its host) before tuning the fabric or the job's buckets."
)
REMEDY_UNKNOWN = (
    "No fabric baseline: run the collectives stage (diagnose run) or pass -e train_fabric_busbw_gbps=... to "
    "tell a slow fabric from poor overlap; meanwhile check bucket_cap_mb, no_sync() use and host syncs."
)
REMEDY_TAIL = (
    "The last gradient bucket is reduced after the backward pass ends: make the first-filled bucket small "
    "(DDP's first bucket is 1 MB by default; a larger bucket_cap_mb enlarges the others), avoid "
    "gradient hooks that delay the final bucket, and check the fabric if every all-reduce is slow."
)
REMEDY_SYNC = (
    "Move .item(), .cpu(), print(tensor) and torch.cuda.synchronize() out of the step (log every N steps, "
    "keep metrics on the GPU and reduce them asynchronously): each sync stalls the CPU until the GPU drains."
)
REMEDY_DATAPARALLEL = (
    "Replace nn.DataParallel with DistributedDataParallel, one process per GPU: torchrun "
    "--nproc-per-node=<GPUs> train.py, dist.init_process_group('nccl') and DDP(model, "
    "device_ids=[local_rank]). DataParallel drives every GPU from one Python process and, each step, "
    "scatters the batch from GPU 0, replicates the model onto the others and gathers the outputs (and in "
    "backward the gradients) back onto GPU 0."
)
REMEDY_COMMUNICATOR = (
    "Create process groups once, before the training loop (init_process_group at start-up; new_group or "
    "init_device_mesh for subgroups right after it), and pass the same group to every step's collectives. "
    "Each new group's first collective builds a new communicator across all its ranks (NCCL: "
    "ncclCommInitRank, a bootstrap and buffers on every GPU, dozens of host syncs), and groups never "
    "destroyed keep their GPU memory until the job runs out of it."
)
REMEDY_INPUT = (
    "The GPU idles while the DataLoader fetches: raise num_workers, set pin_memory=True and "
    "persistent_workers=True, prefetch (prefetch_factor), and check the storage the dataset reads from."
)


@dataclass
class FabricBaseline:
    """What the collectives stage measured; None fields are unknown."""

    busbw_gbps: float | None
    grad_bytes: int | None
    ranks: int
    nodes: int
    # The floor of the normal range the collectives stage failed that all-reduce against (None: it passed,
    # or was judged against no range): the fabric does not deliver what the hardware should.
    failed_floor_gbps: float | None = None

    def allreduce_ms(self, nbytes: int | None, ranks: int | None = None) -> float | None:
        """The time one all-reduce of ``nbytes`` takes at the measured busbw (nccl-tests' bus factor)."""
        ranks = ranks or self.ranks
        if not self.busbw_gbps or not nbytes or ranks < 2:
            return None
        return nbytes * 2.0 * (ranks - 1) / ranks / (self.busbw_gbps * 1e9) * 1000.0


@dataclass
class _Finding:
    """One rank's verdict on one check."""

    rank: int
    status: str
    detail: str
    kind: str = ""  # "fabric", "skew", "overlap" or "unknown" for train.overlap's remediation


def baseline_from_benchmarks(
    entries: list[dict[str, Any]], grad_bytes: int | None = None
) -> FabricBaseline | None:
    """The fabric as the collectives stage measured it: the all_reduce entry's busbw at its largest size
    (the bandwidth-bound end of the sweep, the regime a step's gradient buckets run in)."""
    for entry in entries:
        if entry.get("collective") != "all_reduce" or entry.get("status") == "ERROR":
            continue
        rows = [r for r in entry.get("rows") or [] if isinstance(r.get("busbw_gbps"), (int, float))]
        if not rows:
            continue
        largest = max(rows, key=lambda r: r.get("bytes") or 0)
        return FabricBaseline(
            busbw_gbps=float(largest["busbw_gbps"]),
            grad_bytes=grad_bytes,
            ranks=int(entry.get("ranks") or 0),
            nodes=int(entry.get("nodes") or 0),
            failed_floor_gbps=_floor(entry.get("normal_range_gbps"))
            if entry.get("status") == "FAIL"
            else None,
        )
    return None


def _floor(normal_range: Any) -> float | None:
    if isinstance(normal_range, list) and normal_range and isinstance(normal_range[0], (int, float)):
        return float(normal_range[0])
    return None


def _mib(nbytes: int | None) -> str:
    return f"{(nbytes or 0) / 2**20:.1f} MiB"


def _threshold(host_vars: Vars, name: str) -> float:
    value = host_vars.float(name)
    return DEFAULTS[name] if value is None else value


def _pct(part: float | None, whole: float | None) -> float | None:
    if part is None or not whole:
        return None
    return 100.0 * part / whole


def _overlap(
    analysis: RankAnalysis, host_vars: Vars, baseline: FabricBaseline | None, peers: Peers
) -> _Finding:
    s = analysis.summary
    rank = rank_label(analysis)
    min_ratio = _threshold(host_vars, "train_min_overlap_ratio")
    ratio, exposed, comm, step = s["overlap_ratio"], s["exposed_comm_ms"], s["comm_ms"], s["step_ms"]
    share = _pct(exposed, step) or 0.0
    material = max(
        _threshold(host_vars, "train_min_exposed_comm_ms"),
        step * _threshold(host_vars, "train_max_exposed_comm_pct") / 100.0,
    )
    nbytes = s.get("comm_bytes") or (baseline.grad_bytes if baseline else None)
    expected = baseline.allreduce_ms(nbytes, analysis.world_size) if baseline else None
    fabric_ms = peers.least_comm_ms if peers.least_comm_ms is not None else comm
    slowdown = fabric_ms / expected if expected else None
    slow_fabric = slowdown is not None and slowdown > _threshold(host_vars, "train_fabric_slowdown")
    numbers = (
        f"exposed {exposed:.2f} ms of {comm:.2f} ms communication per {step:.2f} ms step "
        f"({share:.1f}%), overlap ratio " + ("unknown" if ratio is None else f"{ratio:.2f}")
    )
    fabric = ""
    if expected and baseline:
        least = (
            ""
            if peers.least_comm_rank in (None, rank)
            else f" (rank {peers.least_comm_rank}, which waits least)"
        )
        fabric = (
            f"; the all-reduce of {_mib(nbytes)} needs {expected:.2f} ms at the measured "
            f"{baseline.busbw_gbps:.1f} GB/s busbw, it took {slowdown:.1f}×{least}"
        )
    waited, noise = comm - fabric_ms, 0.0
    paired = paired_excess(steady_comm(analysis), peers.least_steps) if peers.least_steps else None
    if paired is not None and peers.least_comm_rank != rank:
        waited, noise = paired
    if expected is not None:
        waited = min(waited, comm - expected)  # what the fabric's own rate explains is no waiting
    waited = max(0.0, waited)
    # What no bucketing can hide: the step's own fabric time (its communication less any waiting) beyond the
    # backward compute it could run behind. The step's, not the sweep's: a socket's rate moves by a tenth
    # between the sweep and the step, and that tenth is no fault of the job's buckets. A fabric far below
    # the sweep's rate is judged as slow above; with no baseline, no time counts as unhidable.
    backward = s.get("backward_ms")
    unhidable = max(0.0, comm - waited - backward) if expected is not None and backward is not None else 0.0
    avoidable = max(0.0, exposed - unhidable - waited)
    if unhidable:
        fabric += (
            f"; {unhidable:.2f} ms of the communication cannot hide behind the {backward:.2f} ms of backward "
            "compute"
        )
    skew = ""
    if waited >= material and waited > SKEW_NOISE_K * noise:
        less = peers.most_compute_ms - s["compute_ms"]
        compute = (
            f"{less:.2f} ms less compute than the busiest rank" if less > 0 else "as much compute as any"
        )
        skew = (
            f"rank {rank} waits for rank {peers.least_comm_rank}: {waited:.2f} ms more communication than "
            f"rank {peers.least_comm_rank} with {compute} (compute skew across ranks "
            f"{peers.compute_skew_ms:.2f} ms)"
        )
    if ratio is None or ratio >= min_ratio or exposed < material:
        return _Finding(rank, "PASS", numbers + fabric)
    if slow_fabric:
        return _Finding(
            rank, "FAIL", f"slow fabric: {numbers}{fabric}" + (f"; {skew}" if skew else ""), "fabric"
        )
    if baseline is not None and baseline.failed_floor_gbps is not None:
        return _Finding(
            rank,
            "FAIL",
            f"exposed communication on a fabric below its expected rate (the collectives stage failed its "
            f"all-reduce under the floor of {baseline.failed_floor_gbps:g} GB/s busbw): {numbers}{fabric}"
            + (f"; {skew}" if skew else ""),
            "fabric",
        )
    if skew and avoidable < material:
        return _Finding(
            rank,
            "WARN",
            f"rank skew, not the fabric nor the job's overlap: {skew}; {numbers}{fabric}",
            "skew",
        )
    if avoidable < material:
        return _Finding(rank, "PASS", f"{numbers}{fabric}: only what cannot hide is exposed")
    if expected is not None:
        also = f"; and {skew}" if skew else ""
        return _Finding(
            rank, "FAIL", f"poor overlap on a fabric that delivers: {numbers}{fabric}{also}", "overlap"
        )
    return _Finding(rank, "FAIL", f"{numbers} (no fabric baseline to compare with)", "unknown")


def _tail(analysis: RankAnalysis, host_vars: Vars, baseline: FabricBaseline | None, peers: Peers) -> _Finding:
    s = analysis.summary
    limit = _threshold(host_vars, "train_max_tail_pct")
    share = _pct(s["tail_ms"], s["step_ms"]) or 0.0
    detail = (
        f"tail {s['tail_ms']:.2f} ms after the backward pass ({share:.1f}% of a {s['step_ms']:.2f} ms step)"
    )
    if share <= limit:
        return _Finding(rank_label(analysis), "PASS", detail)
    # A tail the fabric's own rate explains is not the job's last bucket: where the gradients' all-reduce
    # outlasts the backward compute it runs behind (a socket fabric, a small model), the rest must come after
    # the backward pass whatever the bucketing. The fabric's time is the sweep's figure or, where the step's
    # own all-reduce on the rank that waits least took longer (a socket's rate moves between the sweep and
    # the step), that; a fabric far below the sweep's rate is train.overlap's "slow fabric".
    nbytes = s.get("comm_bytes") or (baseline.grad_bytes if baseline else None)
    expected = baseline.allreduce_ms(nbytes, analysis.world_size) if baseline else None
    backward = s.get("backward_ms")
    if baseline and expected is not None and backward is not None:
        fabric_ms = max(expected, peers.least_comm_ms or 0.0)
        unhidable = max(0.0, fabric_ms - backward)
        beyond = _pct(s["tail_ms"] - unhidable, s["step_ms"]) or 0.0
        if beyond <= limit:
            took = (
                f", it took {fabric_ms:.2f} ms in the step on the rank that waits least"
                if fabric_ms > expected
                else ""
            )
            return _Finding(
                rank_label(analysis),
                "PASS",
                f"{detail}: the fabric's, not the job's: the all-reduce of {_mib(nbytes)} needs {expected:.2f} "
                f"ms at the measured {baseline.busbw_gbps:.1f} GB/s busbw{took}, {unhidable:.2f} ms more than "
                f"the {backward:.2f} ms of backward compute it can run behind",
            )
    return _Finding(rank_label(analysis), "WARN", detail)


def _sync(analysis: RankAnalysis, host_vars: Vars, baseline: FabricBaseline | None, peers: Peers) -> _Finding:
    s = analysis.summary
    limit = _threshold(host_vars, "train_max_syncs_per_step")
    count = s["syncs_per_step"]
    causes = ", ".join(f"{cause} ×{n}" for cause, n in sorted(s.get("sync_causes", {}).items()))
    others = s.get("framework_sync_causes") or {}
    detail = (
        f"{count:g} host {'sync' if count == 1 else 'syncs'} per step"
        + (" in the user's code" if others else "")
        + (f" over {s['steady_steps']} steps: {causes}" if causes else "")
    )
    if others:
        named = ", ".join(f"{cause} ×{n}" for cause, n in sorted(others.items()))
        why = "; ".join(WHY[owner] for owner in WHY if any(c.startswith(f"{owner}:") for c in others))
        detail += (
            f"; not the user's to remove (information, not judged): "
            f"{s.get('framework_syncs_per_step') or 0:g} per step over {s['steady_steps']} steps: {named} "
            f"({why})"
        )
    return _Finding(rank_label(analysis), "WARN" if count > limit else "PASS", detail)


def _dataparallel(
    analysis: RankAnalysis, host_vars: Vars, baseline: FabricBaseline | None, peers: Peers
) -> _Finding:
    s = analysis.summary
    steps, calls, copies = s["dataparallel_steps"], s["dataparallel_calls"], s["dataparallel_copies"]
    if not steps:
        return _Finding(
            rank_label(analysis), "PASS", f"no DataParallel.forward in {s['steps']} profiled steps"
        )
    detail = (
        f"single-process nn.DataParallel: DataParallel.forward ×{calls} in {steps} of {s['steps']} "
        f"profiled steps, {copies} of its copies (Scatter, Broadcast/replicate, Gather, ReduceAddCoalesced)"
    )
    if not copies:
        detail += ": no GPU to spread over in this trace, so it passes the batch through, but on GPUs one "
        detail += "process drives them all through GPU 0"
    return _Finding(rank_label(analysis), "WARN", detail)


def _communicator(
    analysis: RankAnalysis, host_vars: Vars, baseline: FabricBaseline | None, peers: Peers
) -> _Finding:
    """A communicator made in one step is a group's first use (the job's first collective, an evaluation
    group); made in several, the loop makes them: FAIL when every step that can tell does, else WARN."""
    s = analysis.summary
    creating, known, made = s["communicator_steps"], s["communicator_known_steps"], s["new_communicators"]
    detail = f"{counted(made, 'new communicator')} in {creating} of {counted(known, 'profiled step')} that can tell"
    if creating < 2:
        return _Finding(rank_label(analysis), "PASS", detail)
    status = "FAIL" if creating == known else "WARN"
    return _Finding(
        rank_label(analysis), status, f"process groups created inside the training loop: {detail}"
    )


def _input(
    analysis: RankAnalysis, host_vars: Vars, baseline: FabricBaseline | None, peers: Peers
) -> _Finding:
    s = analysis.summary
    limit = _threshold(host_vars, "train_max_input_stall_pct")
    gpu = s.get("input_stall_ms") is not None
    waited = s["input_stall_ms"] if gpu else s["input_wait_ms"]
    share = _pct(waited, s["step_ms"]) or 0.0
    what = "GPU idle while the DataLoader fetched" if gpu else "in the DataLoader"
    detail = f"{waited:.2f} ms per step {what} ({share:.1f}% of a {s['step_ms']:.2f} ms step)"
    return _Finding(rank_label(analysis), "WARN" if share > limit else "PASS", detail)


@dataclass(frozen=True)
class _Spec:
    check_id: str
    metric: str  # the summary key that must be known to judge
    title: str
    judge: Callable[[RankAnalysis, Vars, FabricBaseline | None, Peers], _Finding]
    expected: Callable[[Vars], dict[str, Any]]
    remediation: str
    unmeasured: str = "no step in the trace measured it"  # why a rank whose metric is None is skipped


SPECS = (
    _Spec(
        TRAIN_OVERLAP,
        "comm_ms",
        "communication hidden behind compute",
        _overlap,
        lambda v: {
            "min_overlap_ratio": _threshold(v, "train_min_overlap_ratio"),
            "max_exposed_comm_pct": _threshold(v, "train_max_exposed_comm_pct"),
            "min_exposed_comm_ms": _threshold(v, "train_min_exposed_comm_ms"),
            "fabric_slowdown": _threshold(v, "train_fabric_slowdown"),
        },
        REMEDY_OVERLAP,
    ),
    _Spec(
        TRAIN_TAIL,
        "tail_ms",
        "last-bucket tail",
        _tail,
        lambda v: {"max_tail_pct": _threshold(v, "train_max_tail_pct")},
        REMEDY_TAIL,
    ),
    _Spec(
        TRAIN_SYNC,
        "syncs_per_step",
        "host syncs per step",
        _sync,
        lambda v: {"max_syncs_per_step": _threshold(v, "train_max_syncs_per_step")},
        REMEDY_SYNC,
    ),
    _Spec(
        TRAIN_INPUT,
        "input_wait_ms",
        "input pipeline",
        _input,
        lambda v: {"max_input_stall_pct": _threshold(v, "train_max_input_stall_pct")},
        REMEDY_INPUT,
    ),
)


PATTERN_SPECS = (
    _Spec(
        TRAIN_DATAPARALLEL,
        "dataparallel_calls",
        "nn.DataParallel use",
        _dataparallel,
        lambda v: {"dataparallel_calls": 0},
        REMEDY_DATAPARALLEL,
    ),
    _Spec(
        TRAIN_COMMUNICATOR,
        "new_communicators",
        "communicators made per step",
        _communicator,
        lambda v: {"max_steps_creating_communicators": 1},
        REMEDY_COMMUNICATOR,
        "no collective and no process group in the profiled steps (a single-process job): no communicator "
        "to make",
    ),
)


def judge_patterns(analyses: list[RankAnalysis], source: str) -> list[CheckResult]:
    """One cluster-wide result per anti-pattern of a user's job (``train.dataparallel``,
    ``train.communicator``), from the same traces as :func:`judge_training`."""
    return [_judge_one(spec, analyses, Vars({}), None, source) for spec in PATTERN_SPECS]


def judge_training(
    analyses: list[RankAnalysis], host_vars: Vars, baseline: FabricBaseline | None, source: str
) -> list[CheckResult]:
    """One cluster-wide result per ``train.*`` check, naming the ranks behind its status.

    ``source`` says where the traces came from (the built-in probe, or the files a user gave) and heads
    every message, so the report tells the two apart.
    """
    return [_judge_one(spec, analyses, host_vars, baseline, source) for spec in SPECS]


def _judge_one(
    spec: _Spec, analyses: list[RankAnalysis], host_vars: Vars, baseline: FabricBaseline | None, source: str
) -> CheckResult:
    judged: list[_Finding] = []
    skipped: dict[str, list[int]] = {}
    peers = Peers.of([a for a in analyses if spec.check_id not in a.skipped])
    for analysis in sorted(analyses, key=rank_label):
        reason = analysis.skipped.get(spec.check_id)
        if reason is None and analysis.summary.get(spec.metric) is None:
            reason = spec.unmeasured
        if reason is not None:
            skipped.setdefault(reason, []).append(rank_label(analysis))
        else:
            judged.append(spec.judge(analysis, host_vars, baseline, peers))
    observed = {str(rank_label(a)): {k: a.summary.get(k) for k in _OBSERVED[spec.check_id]} for a in analyses}
    skip_text = "; ".join(f"rank {_ranks(r)} not judged: {why}" for why, r in skipped.items())
    result = CheckResult(
        id=spec.check_id,
        host=None,
        checklist=CHECKLIST,
        status="SKIP",
        observed=observed,
        expected=spec.expected(host_vars),
        message=f"{source}: {skip_text}" if skip_text else f"{source}: no trace",
    )
    if not judged:
        return result
    status = worst([f.status for f in judged])
    shown = [f for f in judged if f.status == status]
    parts = [f"rank {f.rank}: {f.detail}" for f in shown[:4]]
    if len(shown) > 4:
        parts.append(f"and {counted(len(shown) - 4, 'more rank')}")
    if status == "PASS":
        head = f"{spec.title} within limits on {noun_for(len(judged), 'rank')} {_ranks([f.rank for f in judged])}"
    else:
        head = (
            f"{spec.title} out of limits on {noun_for(len(shown), 'rank')} {_ranks([f.rank for f in shown])}"
        )
    result.status = status
    result.message = f"{source}: {head}; " + "; ".join(parts) + (f"; {skip_text}" if skip_text else "")
    if SEVERITY[status] > SEVERITY["PASS"]:
        result.remediation = _remediation(spec, shown)
    return result


def _remediation(spec: _Spec, shown: list[_Finding]) -> str:
    if spec.check_id != TRAIN_OVERLAP:
        return spec.remediation
    kinds = {f.kind for f in shown}
    if "fabric" in kinds:
        return REMEDY_FABRIC
    if "skew" in kinds:
        return REMEDY_SKEW
    if "unknown" in kinds:
        return REMEDY_UNKNOWN
    return REMEDY_OVERLAP


_OBSERVED = {
    TRAIN_OVERLAP: (
        "step_ms",
        "step_cpu_ms",
        "compute_ms",
        "backward_ms",
        "comm_ms",
        "exposed_comm_ms",
        "overlap_ratio",
        "comm_bytes",
    ),
    TRAIN_TAIL: ("step_ms", "step_cpu_ms", "tail_ms"),
    TRAIN_SYNC: ("syncs_per_step", "sync_causes", "framework_syncs_per_step", "framework_sync_causes"),
    TRAIN_DATAPARALLEL: ("steps", "dataparallel_steps", "dataparallel_calls", "dataparallel_copies"),
    TRAIN_COMMUNICATOR: ("communicator_steps", "communicator_known_steps", "new_communicators"),
    TRAIN_INPUT: ("step_ms", "input_wait_ms", "input_stall_ms"),
}


def _ranks(ranks: list[int]) -> str:
    return ", ".join(str(r) for r in ranks)


def training_record(analysis: RankAnalysis, host: str | None, source: str, evidence: str | None) -> dict:
    """One entry of results.json's top-level ``training`` list: the rank's summary, every step and what
    could not be judged, with the trace it came from."""
    return {
        "source": source,
        "host": host,
        "rank": analysis.rank,
        "rank_source": analysis.rank_source,
        "device": analysis.device,
        "backend": analysis.backend,
        "world_size": analysis.world_size,
        "trace": evidence,
        "step_source": analysis.step_source,
        "step_time": analysis.step_time,
        "summary": analysis.summary,
        "steps": [step.to_dict() for step in analysis.steps],
        "not_judged": list(analysis.not_judged),
        "notes": list(analysis.notes),
    }
