"""What diagnose did to the nodes, folded from results.json's ``quarantine`` and ``bug_report`` lists.

The quarantine code records one entry per step (annotate, taint, cordon, condition, drain and their
lifting) with its state; an operator reading a run wants one answer per node: taken out, withheld by the
cap, lifted, left to its operator, or a step the scheduler refused. This module is that one folding, so the
terminal's summary, the report's chapter and the Prometheus gauge agree. It shows what was recorded and
never judges again (docs/actions.md, "Cordon, quarantine cap, bug report", has the words).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from diagnose.catalog.stage_ids import QUARANTINE_CAP
from diagnose.core.units import human_bytes, is_number
from diagnose.render.hostlist import natural_key, summarize

#: A node's outcome, most telling first: a refused step, held out, withheld, lifted, left to an operator.
FAILED, OUT, WITHHELD, LIFTED, LEFT = "failed", "out", "withheld", "lifted", "left"
OUTCOMES = (FAILED, OUT, WITHHELD, LIFTED, LEFT)
#: Steps that take a node out, in the order their verbs are named; the rest of the record's steps lift.
TAKE_OUT = {"drain": "drained", "cordon": "cordoned", "taint": "tainted"}
LIFT_STEPS = ("uncordon", "untaint", "unannotate", "resume")
#: Bug-report states whose log came home (``truncated``: cut at ``bug_report_max_bytes``).
COLLECTED = ("collected", "truncated")
#: Clauses one terminal line names before it points at results.json for the rest.
LINE_CLAUSES = 4


@dataclass
class NodeAction:
    """One node's steps folded: its outcome, the words for it, why (the checks) and who set what."""

    scheduler: str
    node: str
    outcome: str
    verbs: str  # "cordoned and tainted", "kept drained", "lifted", "could not cordon"
    checks: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    by: str = "diagnose"
    why: str = ""
    # each step as recorded, for the report: "taint done: diagnose.health/unhealthy=gpu.xid:NoSchedule"
    details: list[str] = field(default_factory=list)
    note: str = ""  # "cordoned by an operator": a take-out step diagnose left to whoever had set it


def _entries(results: dict[str, Any], key: str) -> list[dict[str, Any]]:
    return [e for e in results.get(key) or [] if isinstance(e, dict)]


def _words(names: Iterable[str]) -> str:
    return " and ".join(names)


def _fold_node(scheduler: str, node: str, steps: list[dict[str, Any]]) -> NodeAction:
    """The outcome of one node's steps: any refused step wins, then a step that takes it out (done or kept),
    then withheld, then lifting, then what an operator set and diagnose left alone."""
    states = {str(s.get("step")): str(s.get("state")) for s in steps}
    failed = [name for name, state in states.items() if state == "failed"]
    done = [TAKE_OUT[n] for n in TAKE_OUT if states.get(n) == "done"]
    kept = [TAKE_OUT[n] for n in TAKE_OUT if states.get(n) == "kept"]
    if failed:
        outcome, verbs = FAILED, f"could not {_words(failed)}"
    elif done or kept:
        outcome = OUT
        verbs = _words(done) if done else f"kept {_words(kept)}"
        if done and kept:
            verbs += f" (kept {_words(kept)})"
    elif "withheld" in states.values():
        outcome, verbs = WITHHELD, "withheld"
    elif any(states.get(n) == "done" for n in LIFT_STEPS):
        outcome, verbs = LIFTED, "lifted"
    else:
        outcome, verbs = LEFT, "left to its operator"
    checks: list[str] = []
    hosts: list[str] = []
    for step in steps:
        checks += [str(c) for c in step.get("checks") or [] if str(c) not in checks]
        hosts += [str(h) for h in step.get("hosts") or [] if str(h) not in hosts]
    operator = next((s for s in steps if s.get("by") == "operator"), None)
    by_operator = [TAKE_OUT[n] for n in TAKE_OUT if states.get(n) == "left"]
    first = steps[0]
    return NodeAction(
        scheduler=scheduler,
        node=node,
        outcome=outcome,
        verbs=verbs,
        checks=checks,
        hosts=hosts,
        by="operator" if operator is not None and outcome == LEFT else str(first.get("by") or "diagnose"),
        why=str(first.get("why") or ""),
        details=[
            f"{s.get('step')} {s.get('state')}" + (f" by {s.get('by')}" if s.get("by") == "operator" else "")
            + (f": {s.get('detail')}" if s.get("detail") else "")
            for s in steps
        ],
        note=f"{_words(by_operator)} by an operator" if outcome == OUT and by_operator else "",
    )  # fmt: skip


def node_actions(results: dict[str, Any]) -> list[NodeAction]:
    """One entry per (scheduler, node) the run recorded steps for, in outcome order, then node name."""
    grouped: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for entry in _entries(results, "quarantine"):
        key = (str(entry.get("scheduler") or "?"), str(entry.get("node") or "?"))
        grouped.setdefault(key, []).append(entry)
    folded = [_fold_node(scheduler, node, steps) for (scheduler, node), steps in grouped.items()]
    return sorted(folded, key=lambda a: (OUTCOMES.index(a.outcome), natural_key(a.node), a.scheduler))


def cap_limit(results: dict[str, Any]) -> int | None:
    """The quarantine cap in nodes, as the run's ``quarantine.cap`` result recorded it."""
    for row in _entries(results, "checks"):
        observed = row.get("observed")
        if (
            row.get("id") == QUARANTINE_CAP
            and isinstance(observed, dict)
            and is_number(observed.get("limit"))
        ):
            return int(observed["limit"])
    return None


def _clauses(actions: list[NodeAction], results: dict[str, Any]) -> list[str]:
    """``cordoned and tainted gpu[03-04] (gpu.xid)``: nodes alike in outcome, words and checks, together."""
    groups: dict[tuple[str, str, tuple[str, ...], str], list[str]] = {}
    for action in actions:
        checks = tuple(action.checks) if action.outcome in (OUT, FAILED) else ()
        groups.setdefault((action.outcome, action.verbs, checks, action.note), []).append(action.node)
    limit = cap_limit(results)
    clauses = []
    for (outcome, verbs, checks, note), nodes in groups.items():
        names = summarize(nodes, limit=120)
        if outcome == WITHHELD:
            cap = f"quarantine cap {limit} reached" if limit is not None else "beyond the quarantine cap"
            clauses.append(f"withheld {names} ({cap}: see {QUARANTINE_CAP})")
        elif outcome == LEFT:
            clauses.append(f"left {names} as an operator set it")
        else:
            said = "; ".join(part for part in (", ".join(checks), note) if part)
            clauses.append(f"{verbs} {names}" + (f" ({said})" if said else ""))
    return clauses


def _line(clauses: list[str]) -> str:
    shown = clauses[:LINE_CLAUSES]
    rest = len(clauses) - len(shown)
    tail = f"; {rest} more in results.json's quarantine list" if rest else ""
    return "diagnose: " + "; ".join(shown) + tail


def _partial(report: dict[str, Any]) -> str:
    """What to know about a log that came home: cut at ``bug_report_max_bytes``, or stopped by its timeout."""
    notes = []
    if report.get("truncated") and is_number(report.get("bytes")):
        notes.append(f"cut at {human_bytes(int(report['bytes']))}")
    if report.get("state") not in COLLECTED:
        notes.append(f"{str(report.get('state') or 'failed').replace('_', ' ')}: partial")
    return ", ".join(notes)


def _bug_report_line(reports: list[dict[str, Any]]) -> str | None:
    """``bug report from gpu03: raw/gpu03/nvidia-bug-report.log.gz (cut at 64 MiB)``; a log stopped by its
    timeout still came home with what it wrote; hosts whose report did not are named with their state."""
    came = [r for r in reports if isinstance(r.get("evidence"), str) and r["evidence"]]
    missed = [r for r in reports if r not in came]
    parts = []
    if len(came) == 1:
        note = _partial(came[0])
        parts.append(
            f"bug report from {came[0].get('host')}: {came[0]['evidence']}" + (f" ({note})" if note else "")
        )
    elif came:
        notes = [f"{r.get('host')} {note}" for r in came if (note := _partial(r))]
        parts.append(
            f"bug reports from {summarize((str(r.get('host')) for r in came), limit=120)}: "
            "raw/<host>/nvidia-bug-report.log.gz" + (f" ({'; '.join(notes[:3])})" if notes else "")
        )
    by_state: dict[str, list[str]] = {}
    for report in missed:
        state = str(report.get("state") or "failed").replace("_", " ")
        by_state.setdefault(state, []).append(str(report.get("host")))
    parts += [
        f"no bug report from {summarize(hosts, limit=120)} ({state})" for state, hosts in by_state.items()
    ]
    return "diagnose: " + "; ".join(parts) if parts else None


def acted_lines(results: dict[str, Any]) -> list[str]:
    """At most three terminal lines: what was done to nodes (taken out, withheld, lifted), what was refused
    or left to an operator, and the bug reports; none on a run that acted on no node."""
    actions = node_actions(results)
    main = [a for a in actions if a.outcome in (OUT, WITHHELD, LIFTED)]
    other = [a for a in actions if a.outcome in (FAILED, LEFT)]
    lines = [_line(_clauses(group, results)) for group in (main, other) if group]
    bug = _bug_report_line(_entries(results, "bug_report"))
    return lines + ([bug] if bug else [])


def outcome_counts(results: dict[str, Any]) -> dict[tuple[str, str], int]:
    """(scheduler, outcome) → nodes: what the Prometheus gauge exports."""
    counts: dict[tuple[str, str], int] = {}
    for action in node_actions(results):
        key = (action.scheduler, action.outcome)
        counts[key] = counts.get(key, 0) + 1
    return counts
