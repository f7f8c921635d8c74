"""The quarantine cap: how many nodes diagnose may hold out of service at once, and which ones.

When one node fails, taking it out (a Slurm drain, a Kubernetes cordon and taint) protects the jobs. When
a fifth of the cluster fails in the same night, the nodes are rarely broken one by one: a configuration
push, the fabric, a driver or image rollout is the shared cause, and draining them all would turn a
finding into an outage. So the number of nodes diagnose holds out is capped (``max_quarantine`` nodes,
``max_quarantine_pct`` of the selected nodes, 10 % and at least one node by default); beyond the cap the
failing nodes are reported, not taken out, and one cluster-wide ``quarantine.cap`` finding says why.

Who is taken out first is deterministic, so two runs over the same failures act alike: nodes diagnose
already holds out (keeping them avoids flapping), then the nodes with the most FAILing checks, then
inventory order. Everything here is pure; the schedulers' I/O is in :mod:`diagnose.quarantine.kubernetes`
and :mod:`diagnose.slurm.drain`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from diagnose.catalog.stage_ids import QUARANTINE_CAP
from diagnose.config.quarantine_settings import DEFAULT_QUARANTINE_PCT, MAX_QUARANTINE, MAX_QUARANTINE_PCT
from diagnose.core.model import CheckResult
from diagnose.core.units import counted
from diagnose.core.vars import Vars

SECTION = "quarantine"
#: What a record's ``state`` says: carried out, held back by the cap, kept as an earlier run left it,
#: left to whoever set it, or tried and refused by the scheduler.
DONE, WITHHELD, KEPT, LEFT, FAILED = "done", "withheld", "kept", "left", "failed"
BY_DIAGNOSE, BY_OPERATOR = "diagnose", "operator"
SHARED_CAUSE = (
    "So many failing nodes at once point to a shared cause (configuration, the fabric, a driver or image "
    "rollout) rather than to each node."
)
REMEDIATION = (
    "Look for what the failing nodes share: the same check failing everywhere, one rack or leaf switch, the "
    "image or driver version rolled out last. Fix that cause and rerun; the nodes withheld stay in service "
    "meanwhile. Raise max_quarantine or max_quarantine_pct only when that many nodes really are broken one "
    "by one."
)


@dataclass(frozen=True)
class Cap:
    """``max_quarantine`` (None: not set) and ``max_quarantine_pct`` (None: not set, 10 % applies)."""

    count: int | None = None
    pct: float | None = None

    def limit(self, selected: int) -> int:
        """Nodes that may be out at once among ``selected``: the count alone when only it is set, else
        the share (at least one node unless the share is 0), the smaller of the two when both are."""
        share: int | None = None
        if self.pct is not None or self.count is None:
            pct = DEFAULT_QUARANTINE_PCT if self.pct is None else self.pct
            share = math.floor(pct * selected / 100 + 1e-9)
            share = max(share, 1) if pct > 0 and selected else share
        limits = [n for n in (self.count, share) if n is not None]
        return min([*limits, selected])

    def describe(self, selected: int) -> str:
        """``at most 2 of 20 selected nodes (max_quarantine_pct 10 %)`` for messages and --check."""
        rules = []
        if self.count is not None:
            rules.append(f"{MAX_QUARANTINE} {self.count}")
        if self.pct is not None or self.count is None:
            pct = DEFAULT_QUARANTINE_PCT if self.pct is None else self.pct
            rules.append(
                f"{MAX_QUARANTINE_PCT} {pct:g} %" + ("" if self.pct is not None else ", the default")
            )
        return f"at most {self.limit(selected)} of {selected} selected nodes ({'; '.join(rules)})"


def cap_of(values: Iterable[Vars]) -> Cap:
    """The strictest cap the hosts' variables set (they are usually set once, for all hosts)."""
    counts, pcts = [], []
    for host_vars in values:
        count, pct = host_vars.int(MAX_QUARANTINE), host_vars.float(MAX_QUARANTINE_PCT)
        if count is not None:
            counts.append(count)
        if pct is not None:
            pcts.append(pct)
    return Cap(min(counts) if counts else None, min(pcts) if pcts else None)


@dataclass(frozen=True)
class Candidate:
    """A failing node: the checks that FAILed on it, whether diagnose already holds it out, and its place
    in the inventory (the last tie-break)."""

    node: str
    failed: tuple[str, ...]
    held: bool = False
    order: int = 0


def ranked(candidates: Iterable[Candidate]) -> list[Candidate]:
    """Held nodes first, then the most FAILing checks, then inventory order, then the name."""
    return sorted(candidates, key=lambda c: (not c.held, -len(c.failed), c.order, c.node))


def split(candidates: Iterable[Candidate], limit: int) -> tuple[list[Candidate], list[Candidate]]:
    """(taken out, withheld): the first ``limit`` of :func:`ranked`, and the rest."""
    order = ranked(candidates)
    return order[:limit], order[limit:]


def cap_finding(
    taken: Sequence[Candidate], withheld: Sequence[Candidate], cap: Cap, selected: int, verb: str
) -> CheckResult:
    """The cluster-wide ``quarantine.cap`` result: PASS while the failing nodes fit under the cap, FAIL
    (with the shared-cause reading) once some were withheld. ``verb`` names the action (``cordoned``)."""
    limit = cap.limit(selected)
    observed: dict[str, Any] = {
        "failing": len(taken) + len(withheld),
        "limit": limit,
        "selected": selected,
        "taken": [c.node for c in taken],
        "withheld": [c.node for c in withheld],
    }
    expected = f"failing nodes ≤ {limit}"
    if not withheld:
        message = f"{counted(len(taken), 'failing node')} {verb}, within the cap: {cap.describe(selected)}"
        return CheckResult(QUARANTINE_CAP, None, "H", "PASS", observed, expected, message)
    shown = ", ".join(c.node for c in withheld[:8]) + (", ..." if len(withheld) > 8 else "")
    message = (
        f"{len(taken) + len(withheld)} nodes failed, more than the quarantine cap ({cap.describe(selected)}): "
        f"{len(taken)} {verb}, {len(withheld)} reported only ({shown}). {SHARED_CAUSE}"
    )
    return CheckResult(QUARANTINE_CAP, None, "H", "FAIL", observed, expected, message, REMEDIATION)


def record(
    scheduler: str,
    node: str,
    step: str,
    state: str,
    *,
    by: str = BY_DIAGNOSE,
    why: str = "",
    detail: str = "",
    hosts: Sequence[str] = (),
    checks: Sequence[str] = (),
) -> dict[str, Any]:
    """One entry of results.json's ``quarantine`` list: a drain, cordon, taint (or their lifting) made,
    withheld, kept or left to its owner, on ``node`` of ``scheduler`` (``kubernetes``, ``slurm``)."""
    entry: dict[str, Any] = {"scheduler": scheduler, "node": node, "step": step, "state": state, "by": by}
    if detail:
        entry["detail"] = detail
    if why:
        entry["why"] = why
    if hosts:
        entry["hosts"] = list(hosts)
    if checks:
        entry["checks"] = list(checks)
    return entry
