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
admin's drain.
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
from diagnose.core.vars import Vars
from diagnose.engine import stages as engine
from diagnose.engine.results import ResultsStore
from diagnose.engine.run import RunOptions, prepare
from diagnose.engine.run_ids import new_run_id, run_header
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
    argv: list[str] = field(default_factory=list)


@dataclass
class NodeCheckOutcome:
    """One node-check: the results, how long it took, and what was done in Slurm."""

    node: str
    results: list[CheckResult]
    elapsed_s: float
    action: slurm_drain.Action | None = None
    slurm_error: str | None = None

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
        if self.slurm_error is not None:
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
    notes = [note for note in (outcome.action.note if outcome.action else "",) if note]
    if outcome.slurm_error:
        notes.append(f"Slurm not updated: {outcome.slurm_error}")
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


def update_slurm(outcome: NodeCheckOutcome) -> None:
    """--drain: read the node's state and drain, resume or leave it (slurm_drain.decide)."""
    findings = grouped_findings(outcome.findings)
    try:
        node = slurm_drain.read_node(outcome.node)
        action = slurm_drain.decide(outcome.healthy, node, slurm_drain.drain_reason(findings))
        slurm_drain.apply(outcome.node, action)
    except slurm_drain.SlurmError as exc:
        outcome.slurm_error = str(exc)
        return
    outcome.action = action


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
        new_run_id(started), started, None, playbook.name, profile, ["diagnose", *argv]
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
    store.add_checks(outcome.results)
    store.finish(finished=datetime.now(timezone.utc).isoformat(timespec="seconds"))


def run_node_check(options: NodeCheckOptions, environ: Mapping[str, str] = os.environ) -> NodeCheckOutcome:
    """Check this node (ConfigError for a bad option or variable), then, with --drain, update Slurm."""
    started = datetime.now(timezone.utc)
    clock = time.monotonic()
    node = this_node(environ)
    host, checks, playbook = prepare_node(options, node)
    results, record = check_node(host, checks)
    outcome = NodeCheckOutcome(node=node, results=results, elapsed_s=time.monotonic() - clock)
    if options.drain:
        update_slurm(outcome)
    if options.json_path:
        profile = host.vars.str(PROFILE_VARIABLE)
        write_json(
            Path(options.json_path), outcome, record, playbook, profile, started, redact_argv(options.argv)
        )
    return outcome
