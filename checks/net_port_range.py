"""net.port_range — the ephemeral port range must leave room for NCCL's many TCP sockets.

NCCL bootstraps (and, on a TCP fallback, moves data) over sockets from ``ip_local_port_range``; a narrow
range makes large jobs fail at init with "Address already in use" or hang in bootstrap.
"""

from __future__ import annotations

from collections.abc import Mapping

from diagnose.core.check import Check, Command, Facts
from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.vars import Vars
from diagnose.parsers.sysctl import parse_port_range

DEFAULT_MIN_WIDTH = 16384


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    return parse_port_range(outputs["port_range"].stdout)


def judge(facts: Facts, host_vars: Vars) -> Outcome:
    minimum = host_vars.int("min_port_range", DEFAULT_MIN_WIDTH)
    observed = f"{facts['low']}-{facts['high']} ({facts['width']} ports)"
    expected = f">= {minimum} ports"
    if facts["width"] < minimum:
        return Outcome(
            "FAIL", f"ephemeral port range {observed} is narrower than {minimum}", observed, expected
        )
    return Outcome("PASS", f"ephemeral port range {observed}", observed, expected)


CHECK = Check(
    id="net.port_range",
    checklist="3",
    summary="net.ipv4.ip_local_port_range is wide enough for NCCL's sockets",
    commands=(Command("port_range", "cat /proc/sys/net/ipv4/ip_local_port_range"),),
    parse=parse,
    judge=judge,
    remediation=(
        "Widen the range, e.g. `sysctl -w net.ipv4.ip_local_port_range='1024 65000'`, and persist it in "
        "/etc/sysctl.d/; keep reserved service ports out with net.ipv4.ip_local_reserved_ports."
    ),
    action="check_config",
)
