"""host.memlock — the login the job runs in may lock (pin) enough memory for RDMA.

Every buffer NCCL's InfiniBand/RoCE transport sends from or receives into is registered with the HCA, which
pins its pages, and pinned pages count against RLIMIT_MEMLOCK (``ulimit -l``). The distribution default
(64 KiB, 8 MiB on recent systemd) makes ``ibv_reg_mr`` fail, so NCCL errors out or falls back to sockets.
Where an RDMA fabric is expected the limit must be ``unlimited`` unless ``min_memlock_kib`` says otherwise.
A low soft limit under a high hard limit is a WARN: a launcher can raise it (``ulimit -l unlimited``), but
most do not. Without a fabric nothing registers memory, so a low limit is not judged (SKIP).

This is the limit of the login diagnose uses; jobs started by slurmd or containerd inherit *their* service
limits (``LimitMEMLOCK`` in the systemd unit), which the remediation names.
"""

from __future__ import annotations

from collections.abc import Mapping

from diagnose.config.profiles import fabric_expected, no_fabric_reason
from diagnose.core.check import Check, Command, Facts
from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.vars import Vars
from diagnose.parsers.limits import MEMLOCK_SCRIPT, parse_memlock

REMEDIATION = (
    "Raise the locked-memory limit for the job's login: `* - memlock unlimited` in "
    "/etc/security/limits.d/rdma.conf (PAM logins, ssh), `LimitMEMLOCK=infinity` in the slurmd and "
    "containerd/docker systemd units (jobs inherit the service's limit; `systemctl daemon-reload` and restart "
    "them), `--ulimit memlock=-1:-1` for docker run; then log in again."
)


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    return parse_memlock(outputs["memlock"].stdout)


def _enough(kib: int | None, minimum: int | None) -> bool:
    """None is unlimited; with no minimum set, only unlimited is enough."""
    if kib is None:
        return True
    return minimum is not None and kib >= minimum


def judge(facts: Facts, host_vars: Vars) -> Outcome:
    host = host_vars.host or "this host"
    minimum = host_vars.int("min_memlock_kib")
    wanted = f">= {minimum} KiB" if minimum is not None else "unlimited"
    observed = f"soft {facts['soft']}, hard {facts['hard']}" + (
        "" if facts["soft"] == "unlimited" else " (KiB)"
    )
    soft_ok = _enough(facts["soft_kib"], minimum)
    if soft_ok:
        return Outcome("PASS", f"memlock limit on {host}: {observed}", observed, wanted)
    if minimum is None and not fabric_expected(host_vars):
        reason = no_fabric_reason(host_vars) or "no RDMA fabric is expected"
        return Outcome(
            "SKIP",
            f"memlock limit on {host} is {observed}; not judged: {reason}, and only RDMA registration needs it",
            observed,
            wanted,
        )
    effect = "NCCL's IB transport cannot register its buffers (ibv_reg_mr fails) or falls back to sockets"
    if _enough(facts["hard_kib"], minimum):
        return Outcome(
            "WARN",
            f"memlock soft limit on {host} is {facts['soft']} KiB (hard {facts['hard']}): unless the launcher "
            f"raises it, {effect}",
            observed,
            wanted,
            remediation=REMEDIATION,
        )
    return Outcome(
        "FAIL",
        f"memlock limit on {host} is {observed}, expected {wanted}: {effect}",
        observed,
        wanted,
        remediation=REMEDIATION,
    )


CHECK = Check(
    id="host.memlock",
    checklist="H",
    summary="ulimit -l is unlimited (or >= min_memlock_kib) where RDMA registers memory",
    commands=(Command("memlock", MEMLOCK_SCRIPT, timeout=10),),
    parse=parse,
    judge=judge,
    remediation=REMEDIATION,
    action="check_config",
)
