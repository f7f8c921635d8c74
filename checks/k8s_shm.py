"""k8s.shm — ``/dev/shm`` in the pod is large enough for NCCL's shared-memory transport.

Between GPUs of one node that cannot use P2P, NCCL's SHM transport creates a segment in ``/dev/shm`` per
peer and channel (``nccl-shm-recv-...`` of 9637888 bytes, about 9.2 MiB, in NVIDIA/nccl issues 342 and 525),
and PyTorch's DataLoader workers share batches there too. A container runtime's default ``/dev/shm`` is a
64 MiB tmpfs: a few such segments fill it and NCCL fails with "posix_fallocate failed: No space left on
device" or a bus error. ``min_shm_mib`` defaults to 1024 because NVIDIA's NCCL troubleshooting guide asks
for at least 1 GB of shared memory in containers (``--shm-size=1g``) and 8 GPUs x 7 peers x 9.2 MiB is
already above 500 MiB.
"""

from __future__ import annotations

from collections.abc import Mapping

from diagnose.core.check import Check, Command, Facts
from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.vars import Vars
from diagnose.parsers.pod import NOT_A_POD, POD_VARIABLE, parse_shm, pod_label, pod_of

DEFAULT_MIN_SHM_MIB = 1024
REMEDIATION = (
    "Mount a memory-backed emptyDir at /dev/shm in the pod (volumes: - name: dshm, emptyDir: {medium: "
    "Memory, sizeLimit: 16Gi}; volumeMounts: - name: dshm, mountPath: /dev/shm), or give the container "
    "`--shm-size` outside Kubernetes; the memory it uses counts against the pod's memory limit."
)


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    pod = pod_of(host_vars)
    if pod is None:
        return {"pod": None}
    return {"pod": pod, **parse_shm(outputs["shm"].stdout)}


def judge(facts: Facts, host_vars: Vars) -> Outcome:
    pod = facts["pod"]
    if pod is None:
        return Outcome("SKIP", f"{host_vars.host or 'this host'} is {NOT_A_POD}")
    where = pod_label(pod)
    minimum = host_vars.int("min_shm_mib", DEFAULT_MIN_SHM_MIB)
    wanted = f">= {minimum} MiB"
    if facts["size_kib"] is None:
        return Outcome(
            "FAIL",
            f"{where} has no /dev/shm: NCCL's SHM transport cannot create its segments",
            None,
            wanted,
            remediation=REMEDIATION,
        )
    mib = facts["size_kib"] / 1024
    observed = f"{mib:.0f} MiB ({facts['filesystem']})"
    if mib < minimum:
        return Outcome(
            "FAIL",
            f"/dev/shm in {where} is {observed}, below {minimum} MiB"
            + (" (the container runtime's 64 MiB default)" if facts["size_kib"] == 65536 else "")
            + ": NCCL's SHM segments will not fit (posix_fallocate: No space left on device)",
            observed,
            wanted,
            remediation=REMEDIATION,
        )
    return Outcome("PASS", f"/dev/shm in {where} is {observed}", observed, wanted)


POD_COMMANDS = (Command("shm", "df -P -k /dev/shm", timeout=10),)


def commands_for(host_vars: Vars) -> tuple[Command, ...]:
    """In a pod only: an SSH host has no pod to judge, and pays nothing for this check."""
    return POD_COMMANDS if host_vars.get(POD_VARIABLE) is not None else ()


CHECK = Check(
    id="k8s.shm",
    checklist="2",
    summary="/dev/shm in the pod is at least min_shm_mib (default 1024 MiB) for NCCL's SHM transport",
    commands=POD_COMMANDS,
    commands_for=commands_for,
    parse=parse,
    judge=judge,
    remediation=REMEDIATION,
    action="check_config",
)
