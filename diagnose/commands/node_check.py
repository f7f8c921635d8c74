"""``diagnose node-check``: the fast node-local checks on the node it runs on, for a scheduler to act on.

Slurm sites run a node health check from slurmd (HealthCheckProgram every few minutes, or Prolog/Epilog
around each job) and expect it to be quick, quiet and decisive: a few seconds, one line, an exit code, and
a bad node drained with a reason an admin can act on. This is the host stage of ``diagnose run`` (the
same checks, parsers and rules, over the local connection) restricted to the ``node-check`` playbook's
checks, without a run folder: the evidence lives in a temporary folder for the run's length only.

Healthy means no check FAILed and none is ERROR (a check that could not judge — nvidia-smi hanging, a tool
missing where the profile expects the hardware — is as much a reason to keep jobs away as a FAIL);
WARN and SKIP are healthy. Exit codes (the contract a Prolog or a wrapper relies on):

    0  healthy                       (and, with --drain, a drain node-check had set is lifted)
    1  unhealthy                     (and, with --drain, the node is drained with the reason)
    2  usage or configuration error  (nothing was checked; nothing was changed in Slurm)
    3  internal error, or --drain could not read or change the node in Slurm

With ``--drain`` the node's Slurm state is changed as :mod:`diagnose.slurm.drain` decides: never an
admin's drain. With ``--k8s`` (node-check in a pod, its node named by ``NODE_NAME`` from the downward API)
the node is cordoned and tainted, or released, as :mod:`diagnose.k8s.nodes` decides: never an operator's
cordon or taint. Either way a new quarantine respects the cap (``max_quarantine``, ``max_quarantine_pct``
of the cluster's nodes, :mod:`diagnose.quarantine.cap`): beyond it the node is reported, not taken out.
"""

from __future__ import annotations

import os
import re
import socket
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from diagnose.config.playbook import PROFILE_VARIABLE, Playbook
from diagnose.core.check import Check
from diagnose.core.hosts import Host
from diagnose.core.model import SEVERITY, CheckResult, HostRecord
from diagnose.core.redact import redact_argv
from diagnose.core.units import counted
from diagnose.core.vars import Vars
from diagnose.engine import stages as engine
from diagnose.engine.results import ResultsStore
from diagnose.engine.run import RunOptions, prepare
from diagnose.engine.run_ids import new_run_id, run_header
from diagnose.parsers.pod import NODE_VARIABLE
from diagnose.quarantine.cap import DONE, LEFT, WITHHELD, Candidate, Cap, cap_finding, cap_of
from diagnose.quarantine.cap import record as quarantine_record
from diagnose.quarantine.kubernetes import CordonStage, NodeFindings, judges_the_node
from diagnose.slurm import drain as slurm_drain

EXIT_HEALTHY, EXIT_UNHEALTHY, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
PLAYBOOK = "node-check"
UNHEALTHY = ("FAIL", "ERROR")
#: A finding's detail in the summary line and the drain reason: its message, at most this long.
DETAIL_LIMIT = 80
# How nvidia-smi names a GPU's PCI address, "(00000000:2A:00.0)", beside the GPU index in messages.
_BUS_ID = re.compile(r"\s*\((?:[0-9A-Fa-f]{4}){1,2}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]\)")


@dataclass
class NodeCheckOptions:
    """What the command line holds."""

    profile: str | None = None
    extra_vars: list[str] = field(default_factory=list)
    inventory: str | None = None  # lends this node's variables; None: this machine's defaults
    json_path: str | None = None
    drain: bool = False
    k8s: bool = False
    argv: list[str] = field(default_factory=list)


@dataclass
class NodeCheckOutcome:
    """One node-check: the results, how long it took, and what was done in Slurm."""

    node: str
    results: list[CheckResult]
    elapsed_s: float
    action: slurm_drain.Action | None = None
    slurm_error: str | None = None
    #: results.json's ``quarantine`` entries and the cluster-wide ``quarantine.cap`` result, when the cap
    #: withheld this node (--drain, --k8s).
    quarantine: list[dict[str, Any]] = field(default_factory=list)
    cap_result: CheckResult | None = None
    k8s_note: str = ""
    k8s_error: str | None = None
    run_id: str = ""

    @property
    def findings(self) -> list[CheckResult]:
        """FAIL and ERROR results, worst first (FAIL before ERROR), in catalog order within each."""
        bad = [r for r in self.results if r.status in UNHEALTHY]
        return sorted(bad, key=lambda r: -SEVERITY[r.status])

    @property
    def healthy(self) -> bool:
        return not self.findings

    @property
    def exit_code(self) -> int:
        if self.slurm_error is not None or self.k8s_error is not None:
            return EXIT_INTERNAL
        return EXIT_HEALTHY if self.healthy else EXIT_UNHEALTHY


def this_node(environ: Mapping[str, str] = os.environ) -> str:
    """The Slurm node name: slurmd's ``SLURMD_NODENAME`` (set for HealthCheckProgram, Prolog, Epilog and
    job steps), else the short hostname, which is the NodeName on most clusters."""
    return environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def short_detail(result: CheckResult) -> str:
    """A finding in a few words for the line and the drain reason: the check's message without the
    node's name (the reason is on that node already) and without PCI bus ids (the GPU index stays), cut
    to DETAIL_LIMIT characters."""
    message = result.message or result.status
    if result.host:
        name = re.escape(result.host)
        message = re.sub(rf"^{name}:?\s+|\s+on {name}\b", "", message)
    message = re.sub(r"\s+", " ", _BUS_ID.sub("", message)).strip().rstrip(".")
    if result.status == "ERROR":
        message = f"ERROR {message}"
    return message if len(message) <= DETAIL_LIMIT else message[: DETAIL_LIMIT - 3].rstrip(" ,;:") + "..."


def grouped_findings(findings: list[CheckResult]) -> list[tuple[str, str]]:
    """(check ids, detail) with the checks that say the same thing joined (``ib.link_rate,
    ib.port_state`` for one hung ``ibstat``), in the findings' order."""
    groups: dict[str, list[str]] = {}
    for result in findings:
        groups.setdefault(short_detail(result), []).append(result.id)
    return [(",".join(ids), detail) for detail, ids in groups.items()]


def summary_line(outcome: NodeCheckOutcome) -> str:
    """The one line slurmd's log (or the Prolog's) keeps."""
    stats = f"{len(outcome.results)} checks, {outcome.elapsed_s:.1f} s"
    notes = [note for note in (outcome.action.note if outcome.action else "", outcome.k8s_note) if note]
    if outcome.slurm_error:
        notes.append(f"Slurm not updated: {outcome.slurm_error}")
    if outcome.k8s_error:
        notes.append(f"Kubernetes not updated: {outcome.k8s_error}")
    tail = f" ({'; '.join([stats, *notes])})"
    if outcome.healthy:
        return f"diagnose node-check: OK {outcome.node}{tail}"
    verdict = outcome.findings[0].status
    found = "; ".join(f"{ids} {detail}" for ids, detail in grouped_findings(outcome.findings))
    return f"diagnose node-check: {verdict} {outcome.node}: {found}{tail}"


def prepare_node(options: NodeCheckOptions, node: str) -> tuple[Host, list[Check], Playbook]:
    """This node as a host with its merged variables, and the playbook's checks (ConfigError: exit 2).

    Without ``--inventory`` the target is this machine with the default inventory's variables; with one,
    the inventory's host named like this node lends its variables (profile, expected values), and the
    checks still run here, over the local connection."""
    extra = list(options.extra_vars)
    if options.profile:
        extra.append(f"{PROFILE_VARIABLE}={options.profile}")
    if options.inventory:
        extra.append("ansible_connection=local")
    request = prepare(
        RunOptions(
            inventories=[options.inventory] if options.inventory else [],
            playbook=PLAYBOOK,
            limit=node if options.inventory else None,
            extra_vars=extra,
            formats="json",
            skip_benchmarks=True,
        )
    )
    found = request.hosts[0]
    host = Host(name=node, groups=list(found.groups), vars=Vars(dict(found.vars), host=node))
    return host, request.host_checks, request.playbook


def check_node(host: Host, checks: list[Check]) -> tuple[list[CheckResult], HostRecord]:
    """The host stage on this node; the evidence folder is removed afterwards, so no result points to it."""
    with tempfile.TemporaryDirectory(prefix="diagnose-node-check-") as scratch:
        state = engine.assess_host(host, checks, Path(scratch), False, None)
        engine.close_all({host.name: state})
    for result in state.results:
        result.evidence = None
    assert state.record is not None
    return state.results, state.record


def update_slurm(outcome: NodeCheckOutcome, cap: Cap) -> None:
    """--drain: read the node's state and drain, resume or leave it (slurm_drain.decide). A new drain
    must fit under the quarantine cap, counted over every node of the cluster before it is made and again
    after: nodes draining at the same moment agree (oldest drain first) on which of them stay drained."""
    findings = grouped_findings(outcome.findings)
    try:
        node = slurm_drain.read_node(outcome.node)
        action = slurm_drain.decide(outcome.healthy, node, slurm_drain.drain_reason(findings))
        new = action.verb == "drain" and not (node["drain"] and slurm_drain.ours(node["reason"]))
        if new:
            action = _within_cap(outcome, action, cap, slurm_drain.read_nodes(), made=False)
        slurm_drain.apply(outcome.node, action)
        if new and action.verb == "drain":
            settled = _within_cap(outcome, action, cap, slurm_drain.read_nodes(), made=True)
            if settled is not action:
                slurm_drain.apply(outcome.node, slurm_drain.Action("resume"))
                action = settled
    except slurm_drain.SlurmError as exc:
        outcome.slurm_error = str(exc)
        return
    outcome.action = action
    _record_slurm(outcome, action, node)


def _within_cap(
    outcome: NodeCheckOutcome, action: slurm_drain.Action, cap: Cap, nodes: list[dict[str, Any]], made: bool
) -> slurm_drain.Action:
    """``action``, or ``none`` with the cap's finding when the drain would go (or, ``made``, went)
    beyond it."""
    holders = slurm_drain.held(nodes)
    limit = cap.limit(len(nodes))
    others = [name for name in holders if name != outcome.node]
    beyond = outcome.node in holders[limit:] if made else len(others) >= limit
    if not beyond:
        return action
    taken = [Candidate(name, ()) for name in others[:limit]]
    mine = Candidate(outcome.node, tuple(r.id for r in outcome.findings))
    outcome.cap_result = cap_finding(taken, [mine], cap, len(nodes), "drained")
    held = f"{counted(len(others), 'node')} drained by diagnose already"
    return slurm_drain.Action("none", note=f"not drained: quarantine cap, {held}, {cap.describe(len(nodes))}")


def _record_slurm(outcome: NodeCheckOutcome, action: slurm_drain.Action, node: dict[str, Any]) -> None:
    """The ``quarantine`` entry of what was done (or withheld, or left to an admin) to this node."""
    checks = [r.id for r in outcome.findings]
    if action.verb in ("drain", "resume"):
        why = action.reason or "checks passed"
        outcome.quarantine.append(
            quarantine_record("slurm", outcome.node, action.verb, DONE, why=why, checks=checks)
        )
    elif outcome.cap_result is not None:
        outcome.quarantine.append(
            quarantine_record(
                "slurm", outcome.node, "drain", WITHHELD, why="beyond the quarantine cap", checks=checks
            )
        )
    elif slurm_drain.out_of_service(node) and node["reason"] and not slurm_drain.ours(node["reason"]):
        outcome.quarantine.append(
            quarantine_record(
                "slurm", outcome.node, "drain", LEFT, by="operator", why=str(node["reason"]), checks=checks
            )
        )


def update_k8s(outcome: NodeCheckOutcome, host: Host, run_id: str, environ: Mapping[str, str]) -> None:
    """--k8s: cordon and taint (or release) the Kubernetes node this pod runs on, within the cap."""
    node = environ.get("NODE_NAME") or host.vars.str(NODE_VARIABLE)
    if not node:
        outcome.k8s_error = "set NODE_NAME from the downward API (fieldRef: spec.nodeName)"
        return
    failed = [r.id for r in outcome.findings if r.status == "FAIL" and judges_the_node(r.id)]
    judged = not any(r.status == "ERROR" for r in outcome.results)
    findings = NodeFindings(node, 0, [outcome.node], failed, judged)
    stage = CordonStage([], run_id)
    outcome.cap_result = stage.act_alone(findings, host.vars)
    outcome.quarantine += stage.records
    refused = [r for r in stage.records if r["state"] == "failed"]
    if refused:
        outcome.k8s_error = f"kubectl {refused[0]['step']} {node}: {refused[0].get('detail', '')}"
    elif outcome.cap_result is not None:
        outcome.k8s_note = f"node {node} not cordoned: quarantine cap"
    else:
        done = sorted(
            {
                r["step"]
                for r in stage.records
                if r["state"] == DONE and r["step"] in ("cordon", "uncordon", "taint", "untaint")
            }
        )
        outcome.k8s_note = f"node {node}: {', '.join(done)}" if done else ""


def write_json(
    path: Path,
    outcome: NodeCheckOutcome,
    record: HostRecord,
    playbook: Playbook,
    profile: str | None,
    started: datetime,
    argv: list[str],
) -> None:
    """A results.json (schema 1) of this node-check, for ``diagnose report`` or a site's collector."""
    run: dict[str, Any] = run_header(
        outcome.run_id or new_run_id(started), started, None, playbook.name, profile, ["diagnose", *argv]
    )
    run["node_check"] = {
        "node": outcome.node,
        "healthy": outcome.healthy,
        "elapsed_s": round(outcome.elapsed_s, 3),
        "slurm_action": outcome.action.verb if outcome.action else None,
        "slurm_note": outcome.action.note if outcome.action else None,
        "slurm_error": outcome.slurm_error,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    store = ResultsStore(path, run)
    store.set_host(record)
    store.add_checks(outcome.results + ([outcome.cap_result] if outcome.cap_result else []))
    for entry in outcome.quarantine:
        store.add_record("quarantine", entry)
    store.finish(finished=datetime.now(timezone.utc).isoformat(timespec="seconds"))


def run_node_check(options: NodeCheckOptions, environ: Mapping[str, str] = os.environ) -> NodeCheckOutcome:
    """Check this node (ConfigError for a bad option or variable), then, with --drain, update Slurm, and
    with --k8s, the Kubernetes node."""
    started = datetime.now(timezone.utc)
    clock = time.monotonic()
    node = this_node(environ)
    host, checks, playbook = prepare_node(options, node)
    results, record = check_node(host, checks)
    outcome = NodeCheckOutcome(node=node, results=results, elapsed_s=time.monotonic() - clock)
    outcome.run_id = new_run_id(started)
    if options.drain:
        update_slurm(outcome, cap_of([host.vars]))
    if options.k8s:
        update_k8s(outcome, host, outcome.run_id, environ)
    if options.json_path:
        profile = host.vars.str(PROFILE_VARIABLE)
        write_json(
            Path(options.json_path), outcome, record, playbook, profile, started, redact_argv(options.argv)
        )
    return outcome
