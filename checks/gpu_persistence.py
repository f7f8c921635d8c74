"""gpu.persistence — persistence mode is on for every GPU.

Without it the driver tears a GPU's state down when its last client exits and builds it again for the next
one: every job start (and every ``nvidia-smi`` call) pays a second or more per GPU, and settings made
between jobs (application clocks, power limits, compute mode) are lost. ``nvidia-persistenced`` (the
supported way) or ``nvidia-smi -pm 1`` keep the GPUs initialised. Read from the summary table's
Persistence-M column, the same ``nvidia-smi`` call gpu.topology makes.
"""

from __future__ import annotations

from collections.abc import Mapping

from diagnose.config.profiles import no_gpu_reason, no_gpu_required
from diagnose.core.check import Check, Facts
from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.vars import Vars
from diagnose.parsers.nvidia_smi import SMI_SUMMARY, parse_persistence

REMEDIATION = (
    "Enable persistence mode: run nvidia-persistenced (`systemctl enable --now nvidia-persistenced`; shipped "
    "with the driver), or `nvidia-smi -pm 1` as root after every boot."
)


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    return {"gpus": parse_persistence(outputs["nvidia_smi"].stdout)}


def judge(facts: Facts, host_vars: Vars) -> Outcome:
    host = host_vars.host or "this host"
    wanted = "persistence mode On for every GPU"
    reason = no_gpu_reason(host_vars)
    if reason:
        return Outcome("SKIP", f"persistence mode not judged on {host}: {reason}", None, wanted)
    gpus = facts["gpus"]
    if not gpus:
        return Outcome("ERROR", f"nvidia-smi lists no GPU on {host} (see gpu.topology)")
    observed = {str(g["index"]): g["persistence"] for g in gpus}
    off = [f"GPU {g['index']} ({g['bus_id']})" for g in gpus if g["persistence"] != "On"]
    if not off:
        return Outcome(
            "PASS",
            f"persistence mode On for the {len(gpus)} GPU{'s' if len(gpus) != 1 else ''} of {host}",
            observed,
            wanted,
        )
    return Outcome(
        "WARN",
        f"persistence mode Off on {host}: {', '.join(off)}; every job start re-initialises the GPU and "
        "settings made between jobs are lost",
        observed,
        wanted,
        remediation=REMEDIATION,
    )


CHECK = Check(
    id="gpu.persistence",
    checklist="H",
    summary="persistence mode On for every GPU (nvidia-persistenced)",
    commands=(SMI_SUMMARY,),
    parse=parse,
    judge=judge,
    remediation=REMEDIATION,
    no_hardware=no_gpu_required,
    folded_under="gpu.topology",
    action="check_config",
)
