"""The report's training chapter (checklist section 4 measured): the train.* verdicts, one row per rank
with the medians over its steady steps, each rank's steps, and what its trace could not answer. Host syncs
the user's code does not own (DDP's statistics, GradScaler, the optimizer, a communicator's setup) are
shown apart from the user's, in words, as information.

Reads only results.json (its ``training`` list and the ``train.*`` checks), so ``diagnose report``
re-renders it for any old run, whether the traces came from the built-in probe or ``diagnose trace``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from diagnose.catalog.stage_ids import TRAINING, TRAINING_PATTERNS
from diagnose.core.units import number, significant

VERDICT_IDS = TRAINING + TRAINING_PATTERNS
# Steps shown per rank: a long trace's steps look alike, and the medians above already sum them up.
MAX_STEPS_SHOWN = 12


@dataclass
class StepView:
    step: str
    step_ms: str
    compute_ms: str
    comm_ms: str
    exposed_ms: str
    overlap: str
    tail_ms: str
    syncs: str
    input_ms: str


@dataclass
class RankView:
    rank: str
    host: str
    device: str
    source: str
    steps: int
    step_ms: str
    compute_ms: str
    comm_ms: str
    exposed_ms: str
    overlap: str
    tail_ms: str
    syncs: str
    input_ms: str
    stall_ms: str
    sync_causes: str
    framework_syncs: str  # syncs per step the user cannot remove (information), and their causes
    framework_sync_causes: str
    step_source: str
    trace: str
    step_rows: list[StepView] = field(default_factory=list)
    hidden_steps: int = 0
    not_judged: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class VerdictView:
    id: str
    status: str
    message: str


@dataclass
class TrainingView:
    verdicts: list[VerdictView]
    ranks: list[RankView]
    cpu_only: bool


def _step_view(step: dict[str, Any]) -> StepView:
    return StepView(
        step=str(step.get("step", "—")),
        step_ms=number(step.get("step_ms")),
        compute_ms=number(step.get("compute_ms")),
        comm_ms=number(step.get("comm_ms")),
        exposed_ms=number(step.get("exposed_comm_ms")),
        overlap=number(step.get("overlap_ratio")),
        tail_ms=number(step.get("tail_ms")),
        syncs=significant(step.get("syncs_per_step"), 6),
        input_ms=number(step.get("input_wait_ms")),
    )


def _rank_view(entry: dict[str, Any]) -> RankView:
    summary = entry.get("summary") if isinstance(entry.get("summary"), dict) else {}
    steps = [s for s in entry.get("steps") or [] if isinstance(s, dict)]
    causes = _causes(summary.get("sync_causes"))
    framework = _causes(summary.get("framework_sync_causes"))
    return RankView(
        rank=str(entry.get("rank", "—")),
        host=str(entry.get("host") or "—"),
        device=str(entry.get("device") or "—"),
        source=str(entry.get("source") or "—"),
        steps=int(summary.get("steady_steps") or 0),
        step_ms=number(summary.get("step_ms")),
        compute_ms=number(summary.get("compute_ms")),
        comm_ms=number(summary.get("comm_ms")),
        exposed_ms=number(summary.get("exposed_comm_ms")),
        overlap=number(summary.get("overlap_ratio")),
        tail_ms=number(summary.get("tail_ms")),
        syncs=significant(summary.get("syncs_per_step"), 6),
        input_ms=number(summary.get("input_wait_ms")),
        stall_ms=number(summary.get("input_stall_ms")),
        sync_causes=causes,
        framework_syncs=significant(summary.get("framework_syncs_per_step"), 6) if framework else "",
        framework_sync_causes=framework,
        step_source=str(entry.get("step_source") or "—"),
        trace=str(entry.get("trace") or "—"),
        step_rows=[_step_view(s) for s in steps[:MAX_STEPS_SHOWN]],
        hidden_steps=max(0, len(steps) - MAX_STEPS_SHOWN),
        not_judged=[str(x) for x in entry.get("not_judged") or []],
        notes=[str(x) for x in entry.get("notes") or []],
    )


def _causes(value: Any) -> str:
    """Sync causes counted over the steady steps, as a sentence: "cause ×n, cause ×m"."""
    if not isinstance(value, dict):
        return ""
    return ", ".join(f"{cause} ×{n}" for cause, n in sorted(value.items()))


def build_training(results: dict[str, Any]) -> TrainingView | None:
    """The chapter's view model, or None when the run measured no training trace."""
    entries = [e for e in results.get("training") or [] if isinstance(e, dict)]
    if not entries:
        return None
    checks = [c for c in results.get("checks") or [] if c.get("id") in VERDICT_IDS]
    verdicts = [
        VerdictView(str(c["id"]), str(c.get("status")), str(c.get("message") or ""))
        for c in sorted(checks, key=lambda c: VERDICT_IDS.index(c["id"]))
    ]
    ranks = sorted(
        entries,
        key=lambda e: (str(e.get("host") or ""), e.get("rank") if isinstance(e.get("rank"), int) else -1),
    )
    return TrainingView(
        verdicts=verdicts,
        ranks=[_rank_view(e) for e in ranks],
        cpu_only=all(e.get("device") == "cpu" for e in entries),
    )
