"""Turn one host's raw command outputs into check results: the pure part of the host stage.

The engine owns I/O (connections, evidence files); this module only decides, so every branch here —
missing tool, timeout, unparsable output, a rule's verdict — is testable on captured outputs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from diagnose.catalog.actions import declared
from diagnose.core.check import Check, ClusterCheck, Facts, ParseError
from diagnose.core.model import CheckResult, CommandOutput, Outcome
from diagnose.core.vars import Vars

_MISSING_TOOL = re.compile(r"\S+ is missing on \S+:")


def outcome_result(
    check: Check | ClusterCheck, host: str | None, outcome: Outcome, evidence: str | None
) -> CheckResult:
    """The result row of ``outcome``: the rule's action where it chose one, else what the check declares."""
    chosen = outcome.action if outcome.status not in ("PASS", "SKIP") else None
    return CheckResult(
        id=check.id,
        host=host,
        checklist=check.checklist,
        status=outcome.status,
        observed=outcome.observed,
        expected=outcome.expected,
        message=outcome.message,
        remediation=outcome.remediation if outcome.remediation is not None else check.remediation,
        evidence=evidence,
        action=chosen or declared(check, outcome.status, outcome.message),
    )


def _blocking_problem(check: Check, outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Outcome | None:
    """A command that could not give an answer decides the check before its parser runs."""
    host = host_vars.host or "this host"
    commands = check.host_commands(host_vars)
    # Any command that did not complete — never ran, cut off with its batch, timed out — leaves the check
    # unjudgeable, fallback sources included: a verdict from half the evidence ("no NCCL found" when the
    # probe never ran) would be a false one.
    for command in commands:
        if command.auxiliary:
            continue
        output = outputs.get(command.key)
        if output is None or output.error:
            reason = output.error if output else "the command was not run"
            return Outcome("ERROR", f"`{command.script}` could not run on {host}: {reason}")
        if output.timed_out:
            limit = min(command.timeout, host_vars.float("command_timeout_s") or command.timeout)
            return Outcome(
                "ERROR",
                f"`{command.script}` timed out on {host} after {limit:.0f} s (hung tool or device?)",
                remediation="Find out why the command hangs on this host (a wedged driver or HCA often does "
                "this); the check cannot be judged until it answers.",
            )
    for command in commands:
        if command.required and command.tool and not command.auxiliary and outputs[command.key].not_found:
            reason = check.no_hardware(host_vars) if check.no_hardware else None
            if reason:
                return Outcome("SKIP", f"{command.tool} is not installed on {host}; {reason}")
            return Outcome(
                "ERROR",
                f"{command.tool} is missing on {host}: `{command.script}` was not found",
                remediation=f"Install {command.tool} on {host} (or set the profile to one without this "
                "hardware if the host really has none).",
            )
    return None


def evaluate_check(
    check: Check, outputs: Mapping[str, CommandOutput], host_vars: Vars, evidence: str | None
) -> tuple[CheckResult, Facts | None]:
    """One check on one host: the result, and the facts for cluster-wide rules (None if not parsed)."""
    host = host_vars.host
    problem = _blocking_problem(check, outputs, host_vars)
    if problem is not None:
        return outcome_result(check, host, problem, evidence), None
    try:
        facts = check.parse(outputs, host_vars)
    except Exception as exc:  # ParseError for odd output; anything else is a parser bug on odd output too
        commands = check.host_commands(host_vars)
        first = commands[0].script if commands else check.id
        detail = str(exc) if isinstance(exc, ParseError) else f"{type(exc).__name__}: {exc}"
        problem = Outcome("ERROR", f"unparsable output of `{first}`: {detail}", action="contact_support")
        return outcome_result(check, host, problem, evidence), None
    try:
        outcome = check.judge(facts, host_vars)
    except Exception as exc:  # a rule bug must cost one result, never the run
        outcome = Outcome(
            "ERROR", f"rule {check.id} failed: {type(exc).__name__}: {exc}", action="contact_support"
        )
    return outcome_result(check, host, outcome, evidence), facts


def evaluate_cluster(
    check: ClusterCheck, facts: Mapping[str, Mapping[str, Facts]], host_vars: Mapping[str, Vars]
) -> list[CheckResult]:
    """A cluster-wide rule over the hosts whose facts exist; host=None results speak for the cluster."""
    try:
        outcomes = check.judge(facts, host_vars)
    except Exception as exc:
        outcomes = [
            Outcome("ERROR", f"rule {check.id} failed: {type(exc).__name__}: {exc}", action="contact_support")
        ]
    return [outcome_result(check, o.host, o, None) for o in outcomes]


def fold_into_root_causes(
    results: list[CheckResult], facts: Mapping[str, Facts], checks: list[Check], host_vars: Vars
) -> None:
    """Where a root check already names the cause, the checks folded under it SKIP and point there instead
    of each repeating it: ib.devices finding no RDMA device (its ``absence``), or the root's own tool
    missing (nvidia-smi for gpu.topology and the GPU health checks)."""
    reasons: dict[str, str] = {}
    missing_tool: dict[str, str] = {}
    by_id = {r.id: r for r in results}
    for check in checks:
        if check.absence is not None and check.id in facts:
            try:
                reason = check.absence(facts[check.id], host_vars)
            except Exception:  # a rule bug leaves the results as they are
                reason = None
            if reason:
                reasons[check.id] = reason
        root = by_id.get(check.id)
        if root is not None and root.status == "ERROR" and _MISSING_TOOL.match(root.message):
            missing_tool[check.id] = root.message.split(":")[0]
    folded = {c.id: c.folded_under for c in checks}
    for result in results:
        root = folded.get(result.id)
        if root in reasons and result.status != "PASS":
            result.status, result.message = "SKIP", f"not judged: {reasons[root]}; see {root}"
            result.remediation, result.action = None, "none"
        elif (
            root in missing_tool
            and result.status == "ERROR"
            and result.message.startswith(missing_tool[root])
        ):
            result.status, result.message = "SKIP", f"not judged: {missing_tool[root]}; see {root}"
            result.remediation, result.action = None, "none"
