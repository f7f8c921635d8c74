"""k8s.resources — the pod asks for the device-plugin resources the profile expects, and got them.

GPUs, RDMA devices and SR-IOV VFs reach a pod only through extended resources (``nvidia.com/gpu``,
``rdma/*``, ``nvidia.com/hostdev``, ``openshift.io/*``, ``intel.com/*``) that a device plugin allocates. Two
things go wrong: the pod spec never asks (a copied manifest without the RDMA resource), or the scheduler
cannot give it (Pending, ``Insufficient rdma/...``: the plugin advertises no free unit). Then what the
container sees is compared with what was allocated: a pod that requested 8 GPUs and shows fewer device
nodes was not given its allocation, and one that shows more than it asked for is using GPUs the scheduler
counts as free for others (privileged, or ``NVIDIA_VISIBLE_DEVICES=all``). The HCAs likewise: a privileged
pod that mounts the node's ``/dev/infiniband`` through a hostPath volume reaches every HCA without asking a
device plugin for any, so NCCL works while the scheduler counts none of them in use; that is a WARN naming
the pod, the volume and the resource it should request.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping

from diagnose.core.check import Check, Command, Facts
from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.vars import Vars
from diagnose.parsers.nvidia_smi import SMI_LIST
from diagnose.parsers.pod import NOT_A_POD, POD_VARIABLE, parse_gpu_devices, pod_label, pod_of

GPU_RESOURCE = "nvidia.com/gpu"
#: Extended resources through which a device plugin hands a pod RDMA devices or SR-IOV VFs: the RDMA shared
#: device plugin (rdma/*), NVIDIA's network operator (nvidia.com/hostdev), the SR-IOV network device
#: plugin's resource prefixes (openshift.io/*, intel.com/* by default, *sriov* by convention).
RDMA_RESOURCES = ("rdma/*", "*/rdma*", "nvidia.com/hostdev", "openshift.io/*", "intel.com/*", "*sriov*")
_INSUFFICIENT = re.compile(r"Insufficient (?P<resource>[\w.\-/]*\w)")
REMEDIATION = (
    "Request every device the job needs in the container's resources.limits (nvidia.com/gpu, the RDMA "
    "or SR-IOV resource of the network operator, e.g. rdma/rdma_shared_device_a or nvidia.com/hostdev); "
    "for a Pending pod, check the node's allocatable (`kubectl describe node`) and the device plugin's "
    "pods and logs: a resource advertised as 0 means the plugin found no device matching its selectors."
)


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    pod = pod_of(host_vars)
    if pod is None:
        return {"pod": None}
    listing = outputs.get("gpu_list")
    smi = listing.stdout if listing is not None and listing.ok else None
    return {"pod": pod, "gpus": parse_gpu_devices(outputs["dev_nvidia"].stdout, smi)}


def judge(facts: Facts, host_vars: Vars) -> Outcome:
    pod = facts["pod"]
    if pod is None:
        return Outcome("SKIP", f"{host_vars.host or 'this host'} is {NOT_A_POD}")
    where = pod_label(pod)
    resources: dict[str, int | str] = pod["resources"]
    asked = ", ".join(f"{name}: {n}" for name, n in sorted(resources.items())) or "no extended resource"
    wanted_names = host_vars.list("expected_k8s_resources") or []
    expected_gpus = host_vars.int("expected_gpu_count")
    wanted = (
        ", ".join([*wanted_names, *([f"{GPU_RESOURCE}: {expected_gpus}"] if expected_gpus else [])])
        or "the resources the pod requests, allocated"
    )
    gpus = facts["gpus"]
    observed = f"requests {asked}; sees {gpus['count']} GPUs ({gpus['source']})"
    if pod["unscheduled"] is not None:
        message = pod["unscheduled"]["message"]
        short = sorted(set(_INSUFFICIENT.findall(message)))
        named = f"no node can give it {', '.join(short)}" if short else "it was not scheduled"
        return Outcome(
            "FAIL",
            f"{where} is {pod['phase'] or 'Pending'} ({pod['unscheduled']['reason']}): {named}: {message}",
            observed,
            wanted,
            remediation=REMEDIATION,
        )
    missing = [g for g in wanted_names if not any(fnmatch.fnmatchcase(n, g) for n in resources)]
    if missing:
        return Outcome(
            "FAIL",
            f"{where} does not request {', '.join(missing)} (it requests {asked}): the device plugin "
            "gives the pod nothing it does not ask for",
            observed,
            wanted,
            remediation=REMEDIATION,
        )
    requested = resources.get(GPU_RESOURCE, 0)
    requested = requested if isinstance(requested, int) else 0
    if expected_gpus and requested < expected_gpus:
        return Outcome(
            "FAIL",
            f"{where} requests {requested} {GPU_RESOURCE}, expected {expected_gpus}",
            observed,
            wanted,
            remediation=REMEDIATION,
        )
    if gpus["count"] < requested:
        return Outcome(
            "FAIL",
            f"{where} requested {requested} GPUs but sees {gpus['count']} ({gpus['source']}): the "
            "allocation did not reach the container",
            observed,
            wanted,
            remediation="Check that the pod runs with the NVIDIA container runtime (runtimeClassName "
            "nvidia where containerd's default is runc) and that the NVIDIA device plugin is healthy.",
        )
    warnings, fixes = [], []
    if gpus["count"] > requested:
        warnings.append(
            f"{where} sees {gpus['count']} GPUs but requested {requested}: the extra GPUs count as free "
            "for the scheduler and may be given to another pod"
        )
        fixes.append(
            "Request the GPUs the job uses (nvidia.com/gpu) rather than exposing all of them through "
            "privileged mode or NVIDIA_VISIBLE_DEVICES=all."
        )
    bypass = rdma_bypass(pod)
    if bypass:
        warnings.append(bypass)
        fixes.append(BYPASS_REMEDIATION)
    if warnings:
        return Outcome("WARN", "; ".join(warnings), observed, wanted, remediation=" ".join(fixes))
    return Outcome("PASS", f"{where} requests {asked}; sees {gpus['count']} GPUs", observed, wanted)


BYPASS_REMEDIATION = (
    "Request the HCAs through a device plugin instead of the node's /dev/infiniband: an rdma/* resource of the "
    "RDMA shared device plugin (e.g. rdma/rdma_shared_device_a: 1) or the SR-IOV network device plugin's VF "
    "resource with its Multus network, drop the hostPath volume, and keep only the IPC_LOCK capability instead "
    "of privileged."
)


def rdma_bypass(pod: Facts) -> str | None:
    """Why this pod uses the node's HCAs behind the scheduler's back, or None: privileged, with the node's
    /dev/infiniband (or /dev) mounted from the host, and no RDMA or SR-IOV resource requested."""
    mounts = pod.get("host_rdma_mounts") or []
    if not (pod["privileged"] and mounts):
        return None
    if any(fnmatch.fnmatchcase(name, pattern) for name in pod["resources"] for pattern in RDMA_RESOURCES):
        return None
    shown = ", ".join(
        f"hostPath {m['path']} (volume {m['volume']} in container {m['container']})" for m in mounts
    )
    return (
        f"{pod_label(pod)} reaches the node's HCAs through privileged: true and {shown} without requesting "
        "an RDMA or SR-IOV device-plugin resource (no rdma/*, nvidia.com/hostdev or SR-IOV VF resource): it "
        "works, but the scheduler counts none of those HCAs in use and may give them to another pod"
    )


POD_COMMANDS = (
    Command("dev_nvidia", "ls -1 /dev | grep -E '^nvidia[0-9]+$' || true", timeout=10),
    SMI_LIST,
)


def commands_for(host_vars: Vars) -> tuple[Command, ...]:
    """In a pod only: an SSH host has no pod to judge, and pays nothing for this check."""
    return POD_COMMANDS if host_vars.get(POD_VARIABLE) is not None else ()


CHECK = Check(
    id="k8s.resources",
    checklist="2",
    summary="the pod requests the expected GPU/RDMA/SR-IOV resources and sees the GPUs it was allocated",
    commands=POD_COMMANDS,
    commands_for=commands_for,
    parse=parse,
    judge=judge,
    remediation=REMEDIATION,
    action="check_config",
)
