"""host.os — which distribution and kernel the host runs, for the report's environment table.

Nothing to fail on its own: the kernel release also decides DMA-BUF GPUDirect (``gpu.gpudirect``), and a
host on another distribution than its peers stands out in the environment table beside the versions.
"""

from __future__ import annotations

from collections.abc import Mapping

from diagnose.core.check import Check, Command, Facts
from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.vars import Vars
from diagnose.parsers.gpudirect import parse_kernel_release
from diagnose.parsers.os_release import parse_os_release


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    facts = parse_os_release(outputs["os_release"].stdout)
    facts["kernel"] = parse_kernel_release(outputs["uname"].stdout)["kernel"]
    return facts


def judge(facts: Facts, host_vars: Vars) -> Outcome:
    host = host_vars.host or "this host"
    observed = f"{facts['pretty_name'] or 'unknown distribution'}, Linux {facts['kernel'] or 'unknown'}"
    wanted = "a readable /etc/os-release"
    if not facts["pretty_name"]:
        return Outcome(
            "WARN", f"{host} has no readable /etc/os-release; Linux {facts['kernel']}", observed, wanted
        )
    return Outcome("PASS", f"{host} runs {observed}", observed, wanted)


CHECK = Check(
    id="host.os",
    checklist="–",
    summary="distribution (/etc/os-release) and kernel release, for the environment table",
    commands=(
        Command("os_release", "cat /etc/os-release", timeout=10, required=False),
        Command("uname", "uname -r", timeout=10),
    ),
    parse=parse,
    judge=judge,
    remediation="Provide /etc/os-release (part of every systemd-era distribution's base files).",
    action="check_config",
)
