"""One host's part of the host stage, whichever way its batch ran: its state, its evidence, its verdicts.

The per-host path (:func:`diagnose.engine.stages.assess_host`: a connection, one framed batch) and the
Slurm step path (:mod:`diagnose.engine.step_stage`: every node's batch as one task of a single step) both
end here, so the rest of the engine sees the same results, the same evidence under ``raw/<host>/`` and
the same host.reachable however the commands travelled.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from diagnose.campaign.identity import identity_from_facts
from diagnose.connectors import Connection
from diagnose.core.check import Check, Command, Facts
from diagnose.core.hosts import Host, safe_name
from diagnose.core.model import CheckResult, CommandOutput, HostRecord
from diagnose.core.vars import Vars
from diagnose.engine.environment import environment_from_facts
from diagnose.engine.evaluate import evaluate_check, fold_into_root_causes


@dataclass
class HostState:
    """What the host stage learnt about one host, handed on to cluster rules and benchmarks."""

    host: Host
    connection: Connection | None = None
    facts: dict[str, Facts] = field(default_factory=dict)
    results: list[CheckResult] = field(default_factory=list)
    record: HostRecord | None = None

    @property
    def healthy(self) -> bool:
        """Reachable and answering: the hosts a benchmark is launched on.

        A host with a configuration FAIL (P2P disabled, a port Down) still runs the collectives: the
        measured effect of the fault is what the acceptance report has to show.
        """
        return self.connection is not None and any(
            r.id == "host.reachable" and r.status == "PASS" for r in self.results
        )


def _write_evidence(path: Path, text: str) -> None:
    """One open, write and close: a run writes a file per command per host, and at that count the
    buffered text layer of ``Path.write_text`` (its extra stat, ioctl and seeks) costs more than the data."""
    data = memoryview(text.encode("utf-8", errors="replace"))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    try:
        while data:
            data = data[os.write(fd, data) :]
    finally:
        os.close(fd)


def save_evidence(out_dir: Path, host: str, command: Command, output: CommandOutput) -> str:
    """Raw output as the operator would have seen it; stderr and exit status beside it when they matter."""
    folder = out_dir / "raw" / safe_name(host)
    name = safe_name(command.key)
    _write_evidence(folder / f"{name}.txt", output.stdout)
    if output.stderr or output.exit_code not in (0, None) or output.timed_out or output.error:
        status = (
            output.error or ("timed out" if output.timed_out else None) or f"exit code {output.exit_code}"
        )
        _write_evidence(folder / f"{name}.err.txt", f"$ {command.script}\n# {status}\n{output.stderr}")
    return f"raw/{safe_name(host)}/{name}.txt"


def commands_of(checks: Iterable[Check], host_vars: Vars) -> list[Command]:
    """Every command the host's checks need, once each: checks sharing a key share one run; those
    marked ``last`` (a diagnostic that loads the GPUs) after all the others."""
    by_key: dict[str, Command] = {}
    for check in checks:
        for command in check.host_commands(host_vars):
            by_key.setdefault(command.key, command)
    return sorted(by_key.values(), key=lambda command: command.last)


def mark_unreachable(state: HostState, checks: list[Check], reason: str, message: str) -> None:
    """The host could not be used at all: host.reachable FAILs with the reason, no other check runs."""
    reachable_check = next(c for c in checks if c.id == "host.reachable")
    assert state.record is not None
    state.record.error = reason
    state.results.append(
        CheckResult(
            id="host.reachable",
            host=state.host.name,
            checklist=reachable_check.checklist,
            status="FAIL",
            observed=reason,
            expected="a working login",
            message=message,
            remediation=reachable_check.remediation,
        )
    )


def judge_batch(
    state: HostState,
    checks: list[Check],
    commands: list[Command],
    outputs: dict[str, CommandOutput],
    out_dir: Path,
) -> None:
    """The host's batch came back (over its connection, or from a Slurm step): evidence, every check
    judged, and a host whose batch was cut taken out of the later stages."""
    host, record = state.host, state.record
    assert record is not None
    (out_dir / "raw" / safe_name(host.name)).mkdir(parents=True, exist_ok=True)
    evidence = {c.key: save_evidence(out_dir, host.name, c, outputs[c.key]) for c in commands}
    for check in checks:
        check_commands = check.host_commands(host.vars)
        path = evidence.get(check_commands[0].key) if check_commands else None
        result, facts = evaluate_check(check, outputs, host.vars, path)
        state.results.append(result)
        if facts is not None:
            state.facts[check.id] = facts
    fold_into_root_causes(state.results, state.facts, checks, host.vars)
    broken = next((o.error for o in outputs.values() if o.error), None)
    if broken is not None:
        # The host answered at first, then its batch was cut (frozen, connection lost): it is not a host
        # to launch benchmarks on, and the checks it never answered are ERRORs already.
        record.error = broken
        record.reachable = False
        for result in state.results:
            if result.id == "host.reachable":
                result.status = "FAIL"
                result.message = f"{host.name} stopped answering during the checks: {broken}"
                result.observed = broken
        if state.connection is not None:
            state.connection.close()
        state.connection = None
    else:
        record.reachable = True
    record.environment = environment_from_facts(state.facts)
    record.identity = identity_from_facts(state.facts)
    if host.vars.get("diagnose_k8s_node"):  # the node a pod runs on, beside the pod in the report
        record.environment["k8s_node"] = str(host.vars["diagnose_k8s_node"])
