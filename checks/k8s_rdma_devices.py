"""k8s.rdma_devices — the RDMA devices NCCL would open are visible *inside* the pod.

The most common container failure on an RDMA cluster is a host that has every HCA and a pod that has none:
the container runtime only passes ``/dev/infiniband/uverbsN`` in when a device plugin allocates it (the
RDMA shared device plugin's ``rdma/*`` resources, the SR-IOV device plugin's VFs) or when the pod mounts
the host's ``/dev/infiniband`` and runs privileged. NCCL then falls back to TCP sockets without an error.
The commands are ib.devices' own (same keys, one run), read in the pod; the verdict names the pod and
its node so that the operator can compare with the node's ib.devices result.
"""

from __future__ import annotations

from collections.abc import Mapping

from diagnose.checks import ib_devices
from diagnose.config.profiles import no_fabric_reason
from diagnose.core.check import Check, Facts
from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.vars import Vars
from diagnose.parsers.pod import NOT_A_POD, pod_label, pod_of
from diagnose.parsers.rdma import describe_kind, fabric_ports, natural_key, normalise_kind

REMEDIATION = (
    "Give the pod its RDMA devices: request the device plugin's resource in the container's "
    "resources.limits (rdma/<name> from the RDMA shared device plugin, or the SR-IOV network device "
    "plugin's VF resource with its Multus network); add the IPC_LOCK capability so that memory can be "
    "registered. Mounting the host's /dev/infiniband as a hostPath volume with securityContext.privileged also "
    "works, but the scheduler then counts none of the HCAs in use (k8s.resources warns about it)."
)


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    pod = pod_of(host_vars)
    if pod is None:
        return {"pod": None}
    return {"pod": pod, **ib_devices.parse(outputs, host_vars)}


def _dev_seen(dev: Facts) -> str:
    if not dev["present"]:
        return "no /dev/infiniband"
    if not dev["uverbs"]:
        return f"/dev/infiniband with only {', '.join(dev['entries']) or 'nothing'} (no uverbs device)"
    return f"/dev/infiniband with {len(dev['uverbs'])} uverbs devices"


def _rdma_requests(pod: Facts) -> str:
    asked = [f"{name}: {n}" for name, n in pod["resources"].items() if name.startswith("rdma/")]
    return f"it requests {', '.join(asked)}" if asked else "it requests no rdma/* resource"


def judge(facts: Facts, host_vars: Vars) -> Outcome:
    pod = facts["pod"]
    if pod is None:
        return Outcome("SKIP", f"{host_vars.host or 'this host'} is {NOT_A_POD}; see ib.devices")
    where = pod_label(pod)
    dev, devices = facts["dev"], facts["devices"]
    kind = normalise_kind(host_vars.str("expected_link_layer"))
    label = describe_kind(kind) if kind else "RDMA"
    expected = host_vars.int("expected_hca_count")
    wanted = f"{expected} {label} ports in the pod" if expected else "RDMA devices in the pod"
    seen = _dev_seen(dev)
    listed = sorted((d["name"] for d in devices), key=natural_key)
    observed = f"{seen}; ibv_devinfo: {', '.join(listed) or 'no device'}"
    reason = no_fabric_reason(host_vars)
    if reason:
        return Outcome("SKIP", f"{where}: {seen}; {reason}", observed, wanted)
    if not dev["present"] or not dev["uverbs"]:
        return Outcome(
            "FAIL",
            f"{where} has {seen}: the node's RDMA devices are not passed into the pod ({_rdma_requests(pod)}), "
            "so NCCL in the pod can only use TCP sockets",
            observed,
            wanted,
            remediation=REMEDIATION,
        )
    if facts["verbs_state"] == "missing":
        return Outcome(
            "ERROR",
            f"ibv_devinfo is missing in {where} ({seen}); cannot tell which HCAs NCCL would see",
            observed,
            wanted,
            remediation="Add ibverbs-utils (Debian/Ubuntu) or libibverbs-utils (RHEL) to the pod's image.",
        )
    if facts["verbs_state"] != "ok":
        return Outcome("ERROR", f"ibv_devinfo did not answer in {where} ({facts['verbs_state']})", observed)
    ports = fabric_ports(facts["ports"], kind)
    names = sorted({p["device"] for p in ports}, key=natural_key)
    if expected is not None and len(ports) < expected:
        shown = ", ".join(names) or "none"
        return Outcome(
            "FAIL",
            f"{where} sees {len(ports)} {label} ports ({shown}), expected {expected}; {_rdma_requests(pod)}",
            observed,
            wanted,
            remediation=REMEDIATION,
        )
    return Outcome(
        "PASS", f"{where} sees {len(ports)} {label} ports ({', '.join(names)}); {seen}", observed, wanted
    )


CHECK = Check(
    id="k8s.rdma_devices",
    checklist="2",
    summary="the pod has /dev/infiniband uverbs devices and ibv_devinfo lists the expected HCAs in it",
    commands=ib_devices.CHECK.commands,
    parse=parse,
    judge=judge,
    remediation=REMEDIATION,
    action="check_config",
)
