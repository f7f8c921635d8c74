"""host.numa_balancing — automatic NUMA balancing is off on GPU nodes.

With ``kernel.numa_balancing=1`` the kernel unmaps pages of busy processes now and then to see which NUMA
node touches them, and migrates them there. A training job's pinned buffers cannot move, but its page
faults and the migrations of everything else (data loader workers, the Python heap) stall ranks at random:
the jitter that makes one rank late in every collective. NVIDIA's and most HPC tuning guides turn it off.
"""

from __future__ import annotations

from collections.abc import Mapping

from diagnose.config.profiles import no_gpu_reason
from diagnose.core.check import Check, Command, Facts
from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.vars import Vars
from diagnose.parsers.kernel_settings import NUMA_BALANCING, parse_numa_balancing

MODES = {0: "off", 1: "on", 2: "memory tiering", 3: "on with memory tiering"}

REMEDIATION = (
    "Turn automatic NUMA balancing off: `sysctl -w kernel.numa_balancing=0`, and keep it across reboots with "
    "`kernel.numa_balancing = 0` in /etc/sysctl.d/90-gpu.conf (or `numa_balancing=disable` on the kernel "
    "command line)."
)


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    output = outputs["numa_balancing"]
    return {"value": parse_numa_balancing(output.stdout, output.exit_code)}


def judge(facts: Facts, host_vars: Vars) -> Outcome:
    host = host_vars.host or "this host"
    value = facts["value"]
    wanted = "kernel.numa_balancing = 0"
    if value is None:
        return Outcome(
            "SKIP",
            f"{host} has no /proc/sys/kernel/numa_balancing: the kernel was built without NUMA balancing",
            None,
            wanted,
        )
    observed = f"kernel.numa_balancing = {value} ({MODES.get(value, 'unknown mode')})"
    reason = no_gpu_reason(host_vars)
    if reason:
        return Outcome("SKIP", f"{observed} on {host}; not judged: {reason}", observed, wanted)
    if value == 0:
        return Outcome("PASS", f"{observed} on {host}", observed, wanted)
    return Outcome(
        "WARN",
        f"{observed} on {host}: page migrations stall ranks under load",
        observed,
        wanted,
        remediation=REMEDIATION,
    )


CHECK = Check(
    id="host.numa_balancing",
    checklist="H",
    summary="kernel.numa_balancing = 0 on GPU nodes",
    commands=(Command("numa_balancing", NUMA_BALANCING, timeout=10, required=False),),
    parse=parse,
    judge=judge,
    remediation=REMEDIATION,
    action="check_config",
)
