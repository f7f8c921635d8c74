"""What a run would do to nodes, for ``diagnose run --check``: the policy, which nodes are eligible and the
cap in nodes, and which hosts would send their NVIDIA bug report home. Nothing here touches a node."""

from __future__ import annotations

from typing import Any

from diagnose.config.quarantine_settings import (
    BUG_REPORT_MAX_BYTES,
    BUG_REPORT_TIMEOUT,
    COLLECT_BUG_REPORT,
    DEFAULT_BUG_REPORT_MAX_BYTES,
    DEFAULT_BUG_REPORT_TIMEOUT_S,
)
from diagnose.core.units import counted, duration, human_bytes
from diagnose.k8s.nodes import ANNOTATION, CONDITION, TAINT_EFFECT, TAINT_KEY
from diagnose.parsers.pod import NODE_VARIABLE
from diagnose.quarantine.cap import cap_of

#: Nodes named on the eligible line before the list is cut.
SHOWN = 8


def _names(names: list[str]) -> str:
    return ", ".join(names[:SHOWN]) + (f", ... ({len(names)} in all)" if len(names) > SHOWN else "")


def quarantine_plan_lines(request: Any) -> list[str]:
    """The ``acting on nodes`` section of ``--check`` for a RunRequest (its hosts and options)."""
    hosts = list(request.hosts)
    reporting = [h for h in hosts if h.vars.bool(COLLECT_BUG_REPORT, False)]
    cordon = bool(getattr(request.options, "k8s_cordon", False))
    if not cordon and not reporting:
        return ["\nacting on nodes: none (no --k8s-cordon; collect_bug_report is off)"]
    lines = ["\nacting on nodes:"]
    if cordon:
        pods = [h for h in hosts if h.connection == "kubectl"]
        nodes = list(dict.fromkeys(str(h.vars[NODE_VARIABLE]) for h in pods if h.vars.get(NODE_VARIABLE)))
        cap = cap_of(h.vars for h in hosts)
        lines += [
            f"  --k8s-cordon: a node under a pod whose checks FAIL gets the taint {TAINT_KEY}=<check>:{TAINT_EFFECT}, "
            f"a cordon (unless already unschedulable), the annotation {ANNOTATION} and the condition "
            f"{CONDITION}=False; a node whose pods all pass loses only what that annotation says diagnose set",
            f"  eligible: {counted(len(nodes), 'node')} under {counted(len(pods), 'pod')}"
            + (f": {_names(nodes)}" if nodes else ""),
            f"  quarantine cap: {cap.describe(len(nodes))}; beyond it failing nodes are reported (quarantine.cap), "
            "not cordoned",
        ]
        unplaced = [h.name for h in pods if not h.vars.get(NODE_VARIABLE)]
        if unplaced:
            lines.append(f"  pods without a node (not scheduled): {_names(unplaced)}")
    if reporting:
        first = reporting[0].vars
        timeout = (
            first.float(BUG_REPORT_TIMEOUT, DEFAULT_BUG_REPORT_TIMEOUT_S) or DEFAULT_BUG_REPORT_TIMEOUT_S
        )
        limit = first.int(BUG_REPORT_MAX_BYTES, DEFAULT_BUG_REPORT_MAX_BYTES) or DEFAULT_BUG_REPORT_MAX_BYTES
        lines.append(
            f"  bug reports: nvidia-bug-report.sh on each of {counted(len(reporting), 'host')} with collect_bug_report "
            f"whose gpu.* checks FAIL, at most {duration(timeout)} and {human_bytes(limit)} each (as the first "
            "host sets them), into raw/<host>/nvidia-bug-report.log.gz"
        )
    return lines
