"""host.cpu_governor — every CPU of a GPU node runs the ``performance`` cpufreq governor.

``powersave`` (intel_pstate's default), ``ondemand`` or ``schedutil`` let idle cores drop to their lowest
clock; the cores that launch kernels, run NCCL's proxy threads and the data loader then take a few
milliseconds to ramp up after every pause. The cost shows as launch latency and slow input pipelines, and
as one host slower than its peers when their BIOS or tuned profile differs. Where no cpufreq driver runs
(most cloud guests: the hypervisor owns the clocks) there is nothing to set and nothing is judged.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from diagnose.config.profiles import no_gpu_reason
from diagnose.core.check import Check, Command, Facts
from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.vars import Vars
from diagnose.parsers.kernel_settings import CPU_GOVERNORS, parse_cpu_governors

REMEDIATION = (
    "Set the performance governor on every CPU: `cpupower frequency-set -g performance` (linux-cpupower), "
    "the tuned profile `throughput-performance` or `latency-performance`, or `cpufreq.default_governor="
    'performance` on the kernel command line; check the BIOS power profile ("Maximum Performance") too.'
)


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    return {"governors": parse_cpu_governors(outputs["cpu_governors"].stdout)}


def cpu_ranges(cpus: list[int]) -> str:
    """``0-3,8,10-11``: how lscpu and the kernel write CPU lists."""
    spans: list[list[int]] = []
    for cpu in sorted(cpus):
        if spans and cpu == spans[-1][1] + 1:
            spans[-1][1] = cpu
        else:
            spans.append([cpu, cpu])
    return ",".join(f"{a}-{b}" if a != b else f"{a}" for a, b in spans)


def judge(facts: Facts, host_vars: Vars) -> Outcome:
    host = host_vars.host or "this host"
    wanted = "performance on every CPU"
    by_governor: dict[str, list[int]] = defaultdict(list)
    for cpu, governor in facts["governors"].items():
        by_governor[governor].append(int(cpu))
    observed = {g: cpu_ranges(cpus) for g, cpus in sorted(by_governor.items())}
    if not by_governor:
        return Outcome(
            "SKIP",
            f"no cpufreq governor on {host} (no cpufreq driver: the firmware or the hypervisor sets the clocks)",
            None,
            wanted,
        )
    reason = no_gpu_reason(host_vars)
    if reason:
        return Outcome("SKIP", f"CPU governor not judged on {host}: {reason}", observed, wanted)
    others = {g: c for g, c in observed.items() if g != "performance"}
    if not others:
        return Outcome("PASS", f"{len(facts['governors'])} CPUs on {host} run performance", observed, wanted)
    shown = "; ".join(f"{g} on CPU {c}" for g, c in others.items())
    return Outcome(
        "WARN",
        f"{host}: {shown} ({len(facts['governors']) - len(by_governor.get('performance', []))} of "
        f"{len(facts['governors'])} CPUs not at performance): cores ramp up late after each pause",
        observed,
        wanted,
        remediation=REMEDIATION,
    )


CHECK = Check(
    id="host.cpu_governor",
    checklist="H",
    summary="cpufreq governor performance on every CPU of a GPU node",
    commands=(Command("cpu_governors", CPU_GOVERNORS, timeout=10, required=False),),
    parse=parse,
    judge=judge,
    remediation=REMEDIATION,
    action="check_config",
)
