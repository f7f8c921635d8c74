"""The report's chapter on what diagnose did to nodes: cordons, taints and drains made, withheld by the
quarantine cap, lifted or left to an operator, and NVIDIA bug reports brought home.

It reads results.json's ``quarantine`` and ``bug_report`` lists as :mod:`diagnose.render.acted` folds them,
and is absent from a run that acted on no node and collected no report.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from diagnose.core.units import human_bytes, is_number
from diagnose.render.acted import COLLECTED, FAILED, LEFT, LIFTED, OUT, WITHHELD, NodeAction, node_actions
from diagnose.render.text import show

#: How each outcome reads in the table.
OUTCOME_WORDS = {
    OUT: "taken out",
    WITHHELD: "withheld (cap)",
    LIFTED: "lifted",
    LEFT: "left to its operator",
    FAILED: "refused",
}
#: The status class an outcome's cell takes (a refused step and a withheld node want a look).
OUTCOME_STATUS = {OUT: "WARN", WITHHELD: "FAIL", LIFTED: "PASS", LEFT: "SKIP", FAILED: "ERROR"}
#: The only evidence path linked: the bug report's own place in the run folder (a hostile path is shown as
#: text, never as a link).
LINKABLE = re.compile(r"raw/[^/\\]+/nvidia-bug-report\.log\.gz")
#: Rows each table shows (refused and taken-out nodes first); the rest are counted, and are in results.json.
MAX_ROWS = 200


@dataclass
class NodeRow:
    node: str
    scheduler: str
    outcome: str
    status: str
    verbs: str
    checks: str
    hosts: str
    by: str
    steps: list[str]


@dataclass
class BugReportRow:
    host: str
    checks: str
    state: str
    status: str
    evidence: str | None
    link: str | None  # relative to the report, which lives in the run folder
    size: str
    detail: str


@dataclass
class QuarantineView:
    nodes: list[NodeRow]
    bug_reports: list[BugReportRow]
    counts: dict[str, int]  # outcome words → nodes
    more_nodes: int = 0
    more_reports: int = 0


def _node_row(action: NodeAction) -> NodeRow:
    return NodeRow(
        node=show(action.node, 120),
        scheduler=action.scheduler,
        outcome=OUTCOME_WORDS[action.outcome],
        status=OUTCOME_STATUS[action.outcome],
        verbs=action.verbs,
        checks=", ".join(action.checks) or (show(action.why, 200) if action.why else "—"),
        hosts=", ".join(action.hosts) if action.hosts and action.hosts != [action.node] else "",
        by=action.by,
        steps=[show(step, 300) for step in action.details],
    )


def _size(entry: dict[str, Any]) -> str:
    if not is_number(entry.get("bytes")):
        return "—"
    kept = human_bytes(int(entry["bytes"]))
    if entry.get("truncated") and is_number(entry.get("size")):
        return f"{kept} of {human_bytes(int(entry['size']))} (cut)"
    return kept


def _bug_row(entry: dict[str, Any]) -> BugReportRow:
    evidence = entry.get("evidence") if isinstance(entry.get("evidence"), str) else None
    state = str(entry.get("state") or "failed")
    linked = evidence is not None and LINKABLE.fullmatch(evidence) is not None and ".." not in evidence
    return BugReportRow(
        host=show(entry.get("host"), 120),
        checks=", ".join(str(c) for c in entry.get("checks") or []),
        state=state.replace("_", " "),
        status="PASS" if state == "collected" else "WARN" if state in COLLECTED or evidence else "ERROR",
        evidence=show(evidence, 200) if evidence else None,
        link=quote(evidence) if linked and evidence else None,
        size=_size(entry),
        detail=show(entry.get("detail") or "", 300),
    )


def build_quarantine(results: dict[str, Any]) -> QuarantineView | None:
    """The chapter's rows, or None when the run neither acted on a node nor collected a bug report."""
    actions = node_actions(results)
    reports = [e for e in results.get("bug_report") or [] if isinstance(e, dict)]
    if not actions and not reports:
        return None
    counts: dict[str, int] = {}
    for action in actions:
        word = OUTCOME_WORDS[action.outcome]
        counts[word] = counts.get(word, 0) + 1
    return QuarantineView(
        [_node_row(a) for a in actions[:MAX_ROWS]],
        [_bug_row(e) for e in reports[:MAX_ROWS]],
        counts,
        max(0, len(actions) - MAX_ROWS),
        max(0, len(reports) - MAX_ROWS),
    )
