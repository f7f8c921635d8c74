"""host.reachable — the host answers over SSH (or locally) within the connect timeout.

The engine connects before any other check runs; a host it cannot reach gets this check's FAIL with the
reason (refused, timed out, authentication, changed host key) and every other check of that host is left
out rather than reported as a cascade of errors.

Its action (docs/actions.md) follows the reason: a host that does not answer at all, or whose sshd
accepted the connection and then never spoke (timed out, no route, host down), is a hung or powered-off
node, to reboot (through its BMC); every other reason (refused, authentication, host key, name
resolution, a pod not running, the inventory's own settings) is a setting to fix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from diagnose.core.check import Check, Command, Facts, ParseError
from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.vars import Vars


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    lines = outputs["identity"].stdout.splitlines()
    if len(lines) < 3:
        raise ParseError("expected user, host name and kernel release")
    return {"user": lines[0].strip(), "hostname": lines[1].strip(), "kernel": lines[2].strip()}


# The connectors' words for a host that does not answer (diagnose/connectors/ssh_common.py, the kernel's
# EHOSTUNREACH / EHOSTDOWN texts).
_SILENT = re.compile(r"timed out|no route to host|host is down", re.IGNORECASE)


def action_for(status: str, message: str) -> str | None:
    """``reboot`` for an unreachable host that does not answer; None (the declared check_config) else."""
    return "reboot" if status == "FAIL" and _SILENT.search(message) else None


def judge(facts: Facts, host_vars: Vars) -> Outcome:
    observed = f"{facts['user']}@{facts['hostname']} (Linux {facts['kernel']})"
    return Outcome("PASS", f"connected as {observed}", observed, "a working login")


CHECK = Check(
    id="host.reachable",
    checklist="–",
    summary="SSH (or local) connection works within the timeout",
    commands=(Command("identity", "id -un; uname -n; uname -r", timeout=10),),
    parse=parse,
    judge=judge,
    remediation=(
        "Check that the host is up and sshd listens on the inventory's ansible_host/ansible_port, that the "
        "key in ansible_ssh_private_key_file is authorised for ansible_user, and that known_hosts holds the "
        "host's current key."
    ),
    action="check_config",
    action_for=action_for,
)
