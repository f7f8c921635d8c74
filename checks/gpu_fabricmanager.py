"""gpu.fabricmanager — on NVSwitch systems the GPU fabric is trained and the fabric manager runs.

On HGX/DGX boards the GPUs reach each other through NVSwitch chips that nvidia-fabricmanager (FM) programs.
Until FM has registered a GPU with the fabric, CUDA initialisation on it fails with "system not yet
initialized"; Hopper and later GPUs report the registration as ``fabric.state`` (Not Started, In Progress,
Completed) and ``fabric.status`` (Success or an error), read from the shared ``--query-gpu`` call (or the
``-q`` Fabric section on drivers that reject the field). A100 GPUs report N/A there, so on a profile that
expects NVSwitch (``expected_nvswitch``) the check falls back to FM itself running.

FM is looked for as a systemd unit (``systemctl is-active nvidia-fabricmanager``) and as a process (the
pattern ``[n]v-fabricmanager`` does not match the shell that runs pgrep). In a VM the hypervisor owns the
NVSwitches and runs FM outside the guest: a trained fabric with no FM visible is a PASS that says so, as on
the lent 2x H200 VM. A compute tray of an NVL72 rack runs no FM either: the rack's NVLink switch trays
train the fabric, and the message says that instead. GPUs without NVSwitch (N/A everywhere, and a profile that does not expect one) SKIP.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from diagnose.config.profiles import no_gpu_reason, no_gpu_required, profile_label
from diagnose.core.check import Check, Command, Facts
from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.vars import Vars
from diagnose.parsers.gpu_query import GPU_QUERY, NOT_APPLICABLE, gpu_label, parse_gpu_query

FM_SCRIPT = (
    "if command -v systemctl >/dev/null 2>&1; then "
    'echo "systemctl $(systemctl is-active nvidia-fabricmanager 2>/dev/null)"; '
    'else echo "systemctl missing"; fi; '
    "if ! command -v pgrep >/dev/null 2>&1; then echo 'process unknown'; "
    "elif pgrep -f '[n]v-fabricmanager' >/dev/null 2>&1; then echo 'process running'; "
    "else echo 'process none'; fi"
)

REMEDIATION = (
    "Start the fabric manager and keep it running: `systemctl enable --now nvidia-fabricmanager` (its version "
    "must equal the driver's exactly; read /var/log/fabricmanager.log for the reason it stops). CUDA fails "
    "with 'system not yet initialized' on these GPUs until the fabric state is Completed. In a VM the "
    "hypervisor runs it: ask the provider."
)


def parse_fm_probe(text: str) -> dict[str, Any]:
    """``systemd``: the unit's state (active, inactive, failed, …) or None without systemd;
    ``process``: True/False, None when pgrep is missing."""
    systemd: str | None = None
    process: bool | None = None
    for line in text.splitlines():
        word, _, rest = line.strip().partition(" ")
        if word == "systemctl":
            state = rest.strip()
            systemd = None if state in ("", "missing") else state
        elif word == "process":
            process = {"running": True, "none": False}.get(rest.strip())
    return {"systemd": systemd, "process": process}


def _state(value: str | None) -> str | None:
    return None if value is None or value.strip().lower() in NOT_APPLICABLE else value.strip()


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    gpus = [
        {
            "index": row.get("index"),
            "bus_id": row.get("pci.bus_id"),
            "state": _state(row.get("fabric.state")),
            "status": _state(row.get("fabric.status")),
        }
        for row in outputs["gpu_query"].parsed(parse_gpu_query)
    ]
    probe = outputs.get("fabric_manager")
    facts: Facts = {"gpus": gpus}
    facts.update(parse_fm_probe(probe.stdout if probe is not None else ""))
    return facts


def _fm_text(facts: Facts) -> tuple[bool, str]:
    """Whether FM was seen running, and how the message says where (or that it is not visible)."""
    if facts["systemd"] == "active":
        return True, "nvidia-fabricmanager active (systemd)"
    if facts["process"]:
        return True, "nv-fabricmanager process running"
    seen = []
    if facts["systemd"] is not None:
        seen.append(f"systemd unit {facts['systemd']}")
    seen.append("no nv-fabricmanager process" if facts["process"] is False else "processes not listed")
    return False, "fabric manager not visible on the host (" + ", ".join(seen) + ")"


def judge(facts: Facts, host_vars: Vars) -> Outcome:
    host = host_vars.host or "this host"
    wanted = "fabric state Completed/Success on every GPU, fabric manager running (where NVSwitch is present)"
    reason = no_gpu_reason(host_vars)
    if reason:
        return Outcome("SKIP", f"GPU fabric not judged on {host}: {reason}", None, wanted)
    gpus = facts["gpus"]
    if not gpus:
        return Outcome(
            "ERROR", f"nvidia-smi lists no GPU on {host}, so the fabric cannot be judged (see gpu.topology)"
        )
    running, fm = _fm_text(facts)
    reported = [g for g in gpus if g["state"] is not None]
    observed = {
        "fabric": {str(g["index"]): f"{g['state'] or 'N/A'}/{g['status'] or 'N/A'}" for g in gpus},
        "fabric_manager": fm,
    }
    if reported:
        bad = [
            f"{gpu_label({'index': g['index'], 'pci.bus_id': g['bus_id']})} fabric {g['state']}"
            + (f"/{g['status']}" if g["status"] else "")
            for g in reported
            if g["state"].lower() != "completed" or (g["status"] or "success").lower() != "success"
        ]
        if bad:
            return Outcome(
                "FAIL",
                f"{host}: " + "; ".join(bad) + f"; {fm}. CUDA init fails with 'system not yet initialized' "
                "until the fabric manager has trained the fabric",
                observed,
                wanted,
                remediation=REMEDIATION,
            )
        if facts["systemd"] == "failed":
            return Outcome(
                "WARN",
                f"{host}: fabric trained (Completed/Success on {len(reported)} GPUs) but the "
                "nvidia-fabricmanager unit has failed; GPUs reset or added later will not join the fabric",
                observed,
                wanted,
                remediation=REMEDIATION,
            )
        outside = (
            "by the rack's NVLink switch trays"
            if host_vars.int("expected_nvlink_domain_gpus")
            else "outside the guest (hypervisor)"
        )
        where = fm if running else f"{fm}, i.e. managed {outside}"
        return Outcome(
            "PASS",
            f"{host}: fabric trained (Completed/Success on {len(reported)} GPUs); {where}",
            observed,
            wanted,
        )
    if host_vars.bool("expected_nvswitch") is True:
        if running:
            return Outcome(
                "PASS",
                f"{host}: the GPUs report no fabric state (N/A, as A100 and older drivers do); {fm}",
                observed,
                wanted,
            )
        return Outcome(
            "FAIL",
            f"{host}: {profile_label(host_vars)} expects NVSwitch but {fm}; CUDA init fails with 'system not yet "
            "initialized' until it runs",
            observed,
            wanted,
            remediation=REMEDIATION,
        )
    return Outcome(
        "SKIP",
        f"no NVSwitch fabric on {host}: fabric.state is N/A on every GPU and {profile_label(host_vars)} does not "
        "expect NVSwitch",
        observed,
        wanted,
    )


CHECK = Check(
    id="gpu.fabricmanager",
    checklist="H",
    summary="NVSwitch systems: GPU fabric state Completed/Success and nvidia-fabricmanager running",
    commands=(GPU_QUERY, Command("fabric_manager", FM_SCRIPT, timeout=10, required=False)),
    parse=parse,
    judge=judge,
    remediation=REMEDIATION,
    no_hardware=no_gpu_required,
    folded_under="gpu.topology",
    action="check_config",
)
