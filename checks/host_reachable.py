"""host.reachable — the host answers over SSH (or locally) within the connect timeout.

The engine connects before any other check runs; a host it cannot reach gets this check's FAIL with the
reason (refused, timed out, authentication, changed host key) and every other check of that host is left
out rather than reported as a cascade of errors.
"""

from __future__ import annotations

from collections.abc import Mapping

from diagnose.core.check import Check, Command, Facts, ParseError
from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.vars import Vars


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    lines = outputs["identity"].stdout.splitlines()
    if len(lines) < 3:
        raise ParseError("expected user, host name and kernel release")
    return {"user": lines[0].strip(), "hostname": lines[1].strip(), "kernel": lines[2].strip()}


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
)
