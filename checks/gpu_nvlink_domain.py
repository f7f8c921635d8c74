"""gpu.nvlink_domain — on an NVL72 compute tray every GPU is registered in the rack's NVLink domain.

On GB200/GB300 NVL72 racks the 72 GPUs of 18 trays reach each other through the rack's NVSwitch trays; a GPU
that did not register with the fabric (state not Completed, or Completed with a failed status such as
``Insufficient Resources``) cannot take part in multi-node NVLink (MNNVL) collectives, and NCCL quietly falls
back to the network or fails at import of remote memory. A GPU can also be registered while its fabric health
reads Unhealthy or its bandwidth Degraded. And the four GPUs of one tray must sit in one clique of one
cluster UUID: two values on one tray mean the tray straddles two partitions.

The facts (one dict per GPU, with the tray's index and chassis serial from ``platformInfo``) also feed the
rack-wide rule ``nvlink.rack``, which compares trays: a tray is judged here, the rack there.

Hosts that are no tray SKIP: an HGX B200/H100 board reports Completed/Success with clique 0 and an all-zero
cluster UUID (NVSwitches, but no multi-node domain), older GPUs and drivers print no fabric at all, and the
test bed's hosts answer nothing to ``-q -x``. Only a profile that sets ``expected_nvlink_domain_gpus`` turns
such a host into a FAIL: a tray whose registration failed looks exactly like that (zero UUID, clique 0).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from diagnose.config.profiles import no_gpu_reason, no_gpu_required, profile_label
from diagnose.core.check import Check, Command, Facts, ParseError
from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.vars import Vars
from diagnose.parsers.nvlink_fabric import SMI_QX, healthy, in_domain, parse_fabric_xml, registered

REMEDIATION = (
    "A GPU whose fabric registration failed (Insufficient Resources, state not Completed) needs the rack's "
    "NVLink fabric looked at: the NVSwitch trays' NVLink subnet manager and fabric manager (their logs name "
    "the GPU), then a reset of the tray's GPUs or a reboot of the tray. Unhealthy fabric health or Degraded "
    "bandwidth on a registered GPU points at its NVLink cables or switch ports. A tray in another clique or "
    "cluster than its rack was partitioned apart: check the rack's NVLink partition configuration."
)
WANTED = "every GPU registered (Completed/Success) in one clique of one cluster UUID, fabric health Healthy"


def commands_for(host_vars: Vars) -> tuple[Command, ...]:
    """The full XML listing only where the profile expects a multi-node NVLink domain: it costs an 8-GPU host
    about three GPU queries, and every other host pays nothing for this check."""
    return (SMI_QX,) if host_vars.int("expected_nvlink_domain_gpus") else ()


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    """``gpus`` is None where nvidia-smi gave no XML (no such query on this driver or tool), with the reason."""
    output = outputs.get("nvidia_smi_qx")
    if output is None:
        return {"gpus": None, "reason": "not listed: no multi-node NVLink domain is expected here"}
    if not output.ok or not output.stdout.strip():
        reason = output.error or ("timed out" if output.timed_out else f"exit {output.exit_code}")
        return {"gpus": None, "reason": f"nvidia-smi -q -x gave no listing ({reason})"}
    try:
        return {"gpus": parse_fabric_xml(output.stdout), "reason": None}
    except ParseError as error:
        return {"gpus": None, "reason": str(error)}


def tray_of(gpus: list[dict[str, Any]]) -> dict[str, Any]:
    """The tray's place as its GPUs report it: tray index, slot and chassis serial (None where N/A)."""
    first = next((g for g in gpus if g.get("tray_index") is not None), gpus[0] if gpus else {})
    return {key: first.get(key) for key in ("tray_index", "slot", "chassis_serial")}


def place(host: str, facts: Facts, host_vars: Vars) -> str:
    """``tray 4 (node7) of rack R1``: how every message names a tray."""
    tray = tray_of(facts.get("gpus") or [])
    rack = host_vars.str("nvlink_rack") or tray["chassis_serial"]
    index = f"tray {tray['tray_index']} ({host})" if tray["tray_index"] is not None else f"tray {host}"
    return f"{index} of rack {rack}" if rack else f"{index} (rack unknown)"


def _label(gpu: dict[str, Any]) -> str:
    module = f" module {gpu['module_id']}" if gpu.get("module_id") is not None else ""
    return f"GPU {gpu['bus_id']}{module}"


def _fault(gpu: dict[str, Any]) -> str | None:
    if not registered(gpu):
        state = gpu.get("state") or "no state"
        return f"{_label(gpu)} fabric {state}/{gpu.get('status') or 'no status'}"
    if not healthy(gpu):
        return (
            f"{_label(gpu)} fabric health {gpu.get('health') or '?'}, bandwidth {gpu.get('bandwidth') or '?'}"
        )
    if not in_domain(gpu):
        return f"{_label(gpu)} in no NVLink domain (cluster UUID zero, clique {gpu.get('clique_id')})"
    return None


def judge(facts: Facts, host_vars: Vars) -> Outcome:
    host = host_vars.host or "this host"
    reason = no_gpu_reason(host_vars)
    if reason:
        return Outcome("SKIP", f"NVLink domain not judged on {host}: {reason}", None, WANTED)
    expected = host_vars.int("expected_nvlink_domain_gpus")
    gpus = facts["gpus"]
    tray = any(in_domain(g) or g.get("tray_index") is not None for g in gpus or [])
    if not expected and not tray:
        shown = facts["reason"] or "no GPU in a multi-node NVLink domain (cluster UUID zero or no fabric)"
        return Outcome(
            "SKIP",
            f"{host} is no NVLink-domain tray: {shown}, and {profile_label(host_vars)} expects no domain",
            None,
            WANTED,
        )
    if gpus is None:
        return Outcome(
            "ERROR", f"{host}: {facts['reason']}; the NVLink domain cannot be judged", None, WANTED
        )
    where = place(host, facts, host_vars)
    observed = {
        g["bus_id"]: f"{g.get('state') or 'N/A'}/{g.get('status') or 'N/A'} clique {g.get('clique_id')} "
        f"cluster {g.get('cluster_uuid') or 'N/A'} health {g.get('health') or 'N/A'}"
        for g in gpus
    }
    if not gpus:
        return Outcome("FAIL", f"{where}: nvidia-smi lists no GPU", observed, WANTED, remediation=REMEDIATION)
    faults = [f for f in (_fault(g) for g in gpus) if f]
    domains = sorted({(g["cluster_uuid"], g["clique_id"]) for g in gpus if in_domain(g)}, key=str)
    if len(domains) > 1:
        faults.append(
            "its GPUs sit in "
            + " and ".join(f"clique {c} of cluster {u}" for u, c in domains)
            + ": one tray split across partitions"
        )
    if faults:
        return Outcome("FAIL", f"{where}: " + "; ".join(faults), observed, WANTED, remediation=REMEDIATION)
    (uuid, clique_id) = domains[0]
    return Outcome(
        "PASS",
        f"{where}: {len(gpus)} GPUs registered (Completed/Success, Healthy) in clique {clique_id} "
        f"of cluster {uuid}",
        observed,
        WANTED,
    )


CHECK = Check(
    id="gpu.nvlink_domain",
    checklist="H",
    summary="NVL72 trays: every GPU registered in the rack's NVLink domain (one clique, one cluster UUID)",
    commands=(SMI_QX,),
    commands_for=commands_for,
    parse=parse,
    judge=judge,
    remediation=REMEDIATION,
    no_hardware=no_gpu_required,
    folded_under="gpu.topology",
    action="check_config",
)
