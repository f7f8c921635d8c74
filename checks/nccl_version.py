"""nccl.version — which NCCL this host's jobs load, found in the order that decides it.

First the benchmark interpreter's ``torch.cuda.nccl.version()`` (``bench_python``, else
``ansible_python_interpreter``, default ``python3``: the Python the benchmarks will run): PyTorch wheels bundle their own NCCL and that is the one a training job runs. Then a system
``libnccl.so.2`` from ``ldconfig -p``, its version read from the file the SONAME link resolves to. Then the
``libnccl2`` / ``libnccl`` package. The same version on every host is judged by ``versions.consistency``.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from diagnose.config.profiles import no_gpu_reason, no_gpu_required
from diagnose.core.check import Check, Command, Facts
from diagnose.core.install_hint import cuda_aarch64_torch_command, is_arm64
from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.vars import Vars
from diagnose.parsers.nccl_version import (
    TORCH_PROBE,
    choose_nccl_version,
    parse_nccl_libs,
    parse_torch_probe,
    system_nccl_versions,
)
from diagnose.parsers.nvidia_presence import NVIDIA_PRESENCE, parse_nvidia_presence

# ldconfig -p runs once: its NCCL lines are printed and then resolved from the same listing.
LIBS_SCRIPT = (
    'PATH="$PATH:/sbin:/usr/sbin"\n'
    "l=$(ldconfig -p 2>/dev/null | grep 'libnccl\\.so')\n"
    '[ -n "$l" ] && printf \'%s\\n\' "$l"\n'
    "for lib in $(printf '%s\\n' \"$l\" | sed -n 's/.*libnccl\\.so.* => //p'); do\n"
    '  echo "resolved $(readlink -f "$lib")"\n'
    "done\n"
    "dpkg-query -W libnccl2 2>/dev/null\n"
    "rpm -q libnccl 2>/dev/null | grep -v 'not installed'\n"
    "true\n"
)


def commands_for(host_vars: Vars) -> tuple[Command, ...]:
    python = (
        host_vars.str("bench_python") or host_vars.str("ansible_python_interpreter", "python3") or "python3"
    )
    probe = f"{shlex.quote(python)} -c {shlex.quote(TORCH_PROBE)}"
    return (
        Command("torch_probe", probe, timeout=60, required=False),
        Command("nccl_libs", LIBS_SCRIPT, timeout=15, required=False),
        NVIDIA_PRESENCE,
    )


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    probe = outputs["torch_probe"]
    torch_facts = parse_torch_probe(probe.stdout, probe.exit_code)
    if probe.timed_out:
        torch_facts["error"] = "the torch probe timed out"
    facts = choose_nccl_version(torch_facts, parse_nccl_libs(outputs["nccl_libs"].stdout))
    # Whether the host has an NVIDIA GPU decides which torch build the remedy for a missing torch names.
    presence = outputs.get(NVIDIA_PRESENCE.key)
    seen = parse_nvidia_presence(presence.stdout) if presence else {}
    facts["nvidia_gpu"] = seen.get("nvidia_gpu")
    # On aarch64 the default torch wheel is the CPU build: the remedy names PyTorch's CUDA index there.
    facts["machine"] = seen.get("machine")
    return facts


def judge(facts: Facts, host_vars: Vars) -> Outcome:
    host = host_vars.host or "this host"
    wanted = "an NCCL the jobs can load (same version on every host)"
    version = facts["version"]
    if version:
        others = [v for v in system_nccl_versions(facts["system"]) if v != version]
        note = ""
        if facts["source"] == "torch" and others:
            note = f"; system NCCL {', '.join(others)} also installed (used by nccl-tests/MPI, not by torch)"
        return Outcome("PASS", f"NCCL {version} on {host} from {facts['where']}{note}", version, wanted)
    python = facts["python"] or host_vars.str("ansible_python_interpreter", "python3")
    looked = (
        f"torch in {python}: {facts['torch_error']}; no libnccl.so in `ldconfig -p`; "
        "no libnccl2 (dpkg) or libnccl (rpm) package"
    )
    # Without a profile nothing asks for NCCL unless the host shows an NVIDIA GPU, whose ranks would need it.
    excused = no_gpu_required(host_vars) if facts["nvidia_gpu"] is not True else None
    reason = no_gpu_reason(host_vars) or excused
    if reason:
        return Outcome(
            "SKIP", f"no NCCL on {host} ({looked}); {reason}, collectives use gloo", "no NCCL", wanted
        )
    remediation = (
        "Install a CUDA build of PyTorch in the benchmark interpreter (it bundles NCCL), or point "
        "ansible_python_interpreter at the environment that has it; for nccl-tests install libnccl2."
    )
    if is_arm64(facts.get("machine")):
        remediation = (
            f"{host} is aarch64, where `pip install torch` gives the CPU build (no CUDA, no NCCL): install "
            f"the CUDA build from PyTorch's index ({cuda_aarch64_torch_command(python)}; cu130 needs driver "
            "580 or later, .../whl/cu128 an older one), or point ansible_python_interpreter at an "
            "environment that has it; for nccl-tests install libnccl2."
        )
    return Outcome("FAIL", f"no NCCL found on {host}: {looked}", "no NCCL", wanted, remediation=remediation)


CHECK = Check(
    id="nccl.version",
    checklist="3",
    summary="NCCL found on the host (torch's, else the system library or package)",
    commands=commands_for(Vars()),
    parse=parse,
    judge=judge,
    remediation="Install NCCL (via a CUDA PyTorch build or libnccl2) in one version on every host.",
    no_hardware=no_gpu_required,
    commands_for=commands_for,
    action="check_config",
)
