"""k8s.host_parity — a pod sees what its node has (RDMA devices, GPUs, NCCL).

When the inventory holds both a pod (``diagnose_k8s_node``) and, as an SSH host, the node it runs on, the
node's own facts are the best statement of what the pod could have: a node with 8 HCAs and a pod that sees 0
is the device plugin or the pod spec, never the hardware. Per-host checks judge each against the profile;
this one names the difference between the two, pod by pod. The node is the host whose inventory name or
``ansible_host`` equals the pod's node name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from diagnose.core.check import ClusterCheck, Facts
from diagnose.core.model import Outcome
from diagnose.core.vars import Vars
from diagnose.parsers.pod import NODE_VARIABLE, POD_VARIABLE


def _node_host(node: str, host_vars: Mapping[str, Vars]) -> str | None:
    for name, values in host_vars.items():
        if POD_VARIABLE in values:
            continue
        if node in (name, values.get("ansible_host")):
            return name
    return None


def _hcas(by_check: Mapping[str, Facts], check_id: str) -> int | None:
    """HCAs a process there can open: listed by ibv_devinfo and backed by a uverbs device node."""
    facts = by_check.get(check_id)
    if not facts or "devices" not in facts:
        return None
    listed = len(facts["devices"])
    dev = facts.get("dev")
    return min(listed, len(dev["uverbs"])) if isinstance(dev, dict) and "uverbs" in dev else listed


def _node_view(by_check: Mapping[str, Facts]) -> dict[str, Any]:
    topo = by_check.get("gpu.topology") or {}
    return {
        "HCAs": _hcas(by_check, "ib.devices"),
        "GPUs": len(topo["topo_gpus"]) if "topo_gpus" in topo else None,
        "NCCL": (by_check.get("nccl.version") or {}).get("version"),
    }


def _pod_view(by_check: Mapping[str, Facts]) -> dict[str, Any]:
    resources = by_check.get("k8s.resources") or {}
    gpus = resources.get("gpus")
    return {
        "HCAs": _hcas(by_check, "k8s.rdma_devices"),
        "GPUs": gpus["count"] if gpus else None,
        "NCCL": (by_check.get("nccl.version") or {}).get("version"),
    }


def judge(facts: Mapping[str, Mapping[str, Facts]], host_vars: Mapping[str, Vars]) -> list[Outcome]:
    outcomes: list[Outcome] = []
    pairs = 0
    for pod, values in sorted(host_vars.items()):
        node_name = values.get(NODE_VARIABLE)
        if POD_VARIABLE not in values or not node_name:
            continue
        node = _node_host(str(node_name), host_vars)
        if node is None or node not in facts or pod not in facts:
            continue
        pairs += 1
        on_node, in_pod = _node_view(facts[node]), _pod_view(facts[pod])
        gaps = []
        for what in ("HCAs", "GPUs"):
            has, sees = on_node[what], in_pod[what]
            if has is not None and sees is not None and sees < has:
                gaps.append(f"node {node} has {has} {what}, pod {pod} sees {sees}")
        if on_node["NCCL"] and in_pod["NCCL"] and on_node["NCCL"] != in_pod["NCCL"]:
            gaps.append(f"node {node} has NCCL {on_node['NCCL']}, pod {pod} loads {in_pod['NCCL']}")
        observed = {"node": on_node, "pod": in_pod}
        if gaps:
            outcomes.append(Outcome("FAIL", "; ".join(gaps), observed, on_node, host=pod))
        else:
            outcomes.append(
                Outcome("PASS", f"pod {pod} sees what node {node} has", observed, on_node, host=pod)
            )
    if not pairs:
        return [Outcome("SKIP", "no pod's node is in the inventory: nothing to compare", None, None)]
    return outcomes


CHECK = ClusterCheck(
    id="k8s.host_parity",
    checklist="2",
    summary="each pod sees the HCAs and GPUs its node has, and the same NCCL (when the node is in the inventory)",
    uses=("ib.devices", "k8s.rdma_devices", "gpu.topology", "k8s.resources", "nccl.version"),
    judge=judge,
    remediation="Give the pod the node's devices (device-plugin resources for every HCA and GPU the job "
    "uses) and build its image with the NCCL the nodes are validated with; compare the pod's "
    "k8s.rdma_devices and k8s.resources results.",
    action="check_config",
)
