"""What a run would do, shown without doing it: ``diagnose run --list-hosts`` and ``--check``.

Operators check an inventory change before a night of runs the way they do with Ansible: which hosts a
pattern selects and how they are reached, which profile and expected values each host ends up with
after every group_vars/host_vars level and ``-e``, and the exact commands each check would run. Nothing
here opens a connection or writes a file.
"""

from __future__ import annotations

from collections.abc import Sequence

from diagnose.core.check import Check
from diagnose.core.hosts import Host
from diagnose.engine.run import RunRequest
from diagnose.engine.stages import commands_of
from diagnose.targets.view import list_hosts, relevant_vars


def host_lines(hosts: Sequence[Host]) -> list[str]:
    """One line per host: name, how it is reached, its groups."""
    rows = list_hosts(hosts)
    width = max((len(r["name"]) for r in rows), default=4)
    lines = [f"hosts ({len(rows)}):"]
    for row in rows:
        if row["connection"] == "local":
            reach = "local"
        else:
            user = f"{row['user']}@" if row["user"] else ""
            port = f":{row['port']}" if row["port"] else ""
            reach = f"{row['connection']} {user}{row['address']}{port}"
        groups = ",".join(row["groups"]) or "ungrouped"
        lines.append(f"  {row['name']:<{width}}  {reach}  groups={groups}")
    return lines


def plan_lines(hosts: Sequence[Host], checks: Sequence[Check], benchmarks: str | None) -> list[str]:
    """Per host its merged variables that matter; then each distinct set of check commands, once."""
    lines = host_lines(hosts)
    for host in hosts:
        lines.append(f"\n{host.name}: profile {host.vars.get('diagnose_profile') or 'none'}")
        lines += [f"  {key} = {value}" for key, value in relevant_vars(host).items()]
    plans: dict[tuple[tuple[str, str], ...], list[str]] = {}
    for host in hosts:
        commands = tuple((c.key, c.script) for c in commands_of(checks, host.vars))
        plans.setdefault(commands, []).append(host.name)
    for commands, names in plans.items():
        shown = (
            names[0]
            if len(names) == 1
            else f"{len(names)} hosts ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})"
        )
        lines.append(f"\ncommands on {shown}, in one batch, each under its own timeout:")
        lines += [f"  [{key}] {script}" for key, script in commands]
    lines.append(f"\nchecks: {', '.join(c.id for c in checks)}")
    lines.append(f"benchmarks: {benchmarks or 'none'}")
    return lines


def dry_run_lines(request: RunRequest, show_commands: bool, skip_benchmarks: bool) -> list[str]:
    """``--check`` (``show_commands``): the plan with every command; ``--list-hosts``: the hosts only."""
    if not show_commands:
        return host_lines(request.hosts)
    plan = request.playbook.benchmarks
    benchmarks = (
        f"{', '.join(plan.collectives)} ({plan.tool})"
        if plan and plan.enabled and not skip_benchmarks
        else None
    )
    return plan_lines(request.hosts, request.host_checks, benchmarks)
