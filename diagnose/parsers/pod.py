"""A Kubernetes pod as diagnose sees it: the pod object (``kubectl get pod -o json``) and what the
container itself shows (``/dev/shm``, its network interfaces, its GPU device nodes).

The pod object says what was *asked for* (resources, Multus networks) and what the control plane *did*
(scheduling conditions, the CNI's network-status annotation); the in-pod outputs say what the process that
runs NCCL really got. The k8s.* checks compare the two, so both are reduced here to plain data.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping
from typing import Any

from diagnose.core.check import ParseError

# Multus writes network-status; releases before the device-info spec (2020) wrote networks-status.
NETWORK_STATUS_KEYS = ("k8s.v1.cni.cncf.io/network-status", "k8s.v1.cni.cncf.io/networks-status")
NETWORKS_KEY = "k8s.v1.cni.cncf.io/networks"
# Resources every pod has; the k8s checks are about the extended ones a device plugin hands out.
_BASIC_RESOURCES = {"cpu", "memory", "ephemeral-storage", "pods"}
_QUANTITY = re.compile(r"^\d+$")


def _count(value: Any) -> int | str:
    """Extended resources are whole numbers (the API refuses fractions); keep anything else as written."""
    text = str(value).strip()
    return int(text) if _QUANTITY.match(text) else text


def _resources(containers: list[dict[str, Any]]) -> dict[str, int | str]:
    """Extended resources of all containers, summed: limits, or requests where no limit is given.

    For extended resources the API requires request == limit when both are set, so either tells the
    device plugin's allocation; a pod asks for the sum over its containers.
    """
    total: dict[str, int | str] = {}
    for container in containers:
        resources = container.get("resources") or {}
        asked = {**(resources.get("requests") or {}), **(resources.get("limits") or {})}
        for name, value in asked.items():
            if name in _BASIC_RESOURCES or name.startswith("hugepages-"):
                continue
            amount = _count(value)
            previous = total.get(name, 0)
            both_numbers = isinstance(amount, int) and isinstance(previous, int)
            total[name] = previous + amount if both_numbers else amount  # type: ignore[operator]
    return total


# The host paths that hand a container the node's RDMA devices: /dev/infiniband itself, one of its device
# nodes, or the whole /dev.
_RDMA_HOST_PATHS = ("/dev", "/dev/infiniband")


def _host_rdma_mounts(spec: dict[str, Any]) -> list[dict[str, str]]:
    """Containers that mount the node's /dev/infiniband (or /dev) through a hostPath volume.

    With ``privileged: true`` such a container reaches every HCA of the node without a device plugin
    handing them out: NCCL works, but the scheduler counts nothing (what k8s.resources warns about).
    """
    host_paths = {}
    for volume in spec.get("volumes") or []:
        path = str(((volume or {}).get("hostPath") or {}).get("path") or "").rstrip("/") or None
        if path and (path in _RDMA_HOST_PATHS or path.startswith("/dev/infiniband/")):
            host_paths[volume.get("name")] = path
    return [
        {
            "container": str(container.get("name")),
            "volume": str(mount.get("name")),
            "path": host_paths[mount.get("name")],
        }
        for container in spec.get("containers") or []
        for mount in container.get("volumeMounts") or []
        if mount.get("name") in host_paths
    ]


def _network_status(annotations: dict[str, str]) -> tuple[str | None, list[dict[str, Any]]]:
    for key in NETWORK_STATUS_KEYS:
        if key in annotations:
            try:
                entries = json.loads(annotations[key])
            except json.JSONDecodeError as exc:
                raise ParseError(f"annotation {key} is not JSON: {exc}") from None
            if not isinstance(entries, list):
                raise ParseError(f"annotation {key} is not a list")
            return key, [
                {
                    "name": str(e.get("name") or ""),
                    "interface": e.get("interface"),
                    "ips": [str(ip) for ip in e.get("ips") or []],
                    "mac": e.get("mac"),
                    "default": bool(e.get("default")),
                    "device_info": e.get("device-info"),
                }
                for e in entries
                if isinstance(e, dict)
            ]
    return None, []


def _requested_networks(annotations: dict[str, str]) -> list[str]:
    """The ``networks`` annotation: ``a,ns/b`` or a JSON list of {name, namespace, interface}."""
    text = (annotations.get(NETWORKS_KEY) or "").strip()
    if not text:
        return []
    if text.startswith("["):
        try:
            entries = json.loads(text)
        except json.JSONDecodeError:
            return [text]
        return [
            f"{e['namespace']}/{e['name']}" if e.get("namespace") else str(e.get("name"))
            for e in entries
            if isinstance(e, dict) and e.get("name")
        ]
    return [part.strip().split("@")[0] for part in text.split(",") if part.strip()]


def parse_pod(pod: Any) -> dict[str, Any]:
    """Facts of one pod object: identity, node, phase, extended resources, scheduling trouble, networks."""
    if not isinstance(pod, dict) or pod.get("kind", "Pod") != "Pod" or "metadata" not in pod:
        raise ParseError(f"not a pod object: {str(pod)[:120]!r}")
    metadata, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    annotations = metadata.get("annotations") or {}
    unscheduled = next(
        (
            c
            for c in status.get("conditions") or []
            if c.get("type") == "PodScheduled" and str(c.get("status")) == "False"
        ),
        None,
    )
    status_key, networks = _network_status(annotations)
    return {
        "name": metadata.get("name"),
        "namespace": metadata.get("namespace", "default"),
        "node": spec.get("nodeName"),
        "phase": status.get("phase"),
        "privileged": any(
            (c.get("securityContext") or {}).get("privileged") for c in spec.get("containers") or []
        ),
        "resources": _resources(spec.get("containers") or []),
        "host_rdma_mounts": _host_rdma_mounts(spec),
        "unscheduled": (
            {"reason": unscheduled.get("reason"), "message": unscheduled.get("message") or ""}
            if unscheduled
            else None
        ),
        "requested_networks": _requested_networks(annotations),
        "network_status_key": status_key,
        "networks": networks,
    }


def parse_shm(text: str) -> dict[str, Any]:
    """``df -P -k /dev/shm``: the size of the filesystem mounted there, in KiB (None when df failed)."""
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 6 and fields[1].isdigit():
            return {"filesystem": fields[0], "size_kib": int(fields[1]), "mount": fields[5]}
    if text.strip() and not text.lstrip().startswith("Filesystem"):
        raise ParseError(f"no df line for /dev/shm in {text.strip()[:120]!r}")
    return {"filesystem": None, "size_kib": None, "mount": None}  # df found no /dev/shm


_IP_O = re.compile(r"^\d+:\s+(?P<iface>[^\s@:]+)(?:@\S+)?\s+(?P<family>inet6?|link/\w+)\s+(?P<addr>\S+)")
_FIB_LEAF = re.compile(r"^\s*\|--\s+(?P<ip>\d+\.\d+\.\d+\.\d+)$")
_FIB_LOCAL = re.compile(r"^\s*/32 host LOCAL$")
_LINK = re.compile(r"^# link (?P<iface>\S+) (?P<mac>\S+)$")


def parse_interfaces(text: str) -> dict[str, Any]:
    """The pod's interfaces from ``ip -o addr show`` or, where the image has no iproute2, the fallback
    (``# link <iface> <mac>`` lines from /sys/class/net and /proc/net/fib_trie).

    ``ip -o`` ties each address to its interface. fib_trie only lists the local addresses, so in the
    fallback ``local_ips`` is all that is known: an address can be found in the pod, not on which interface.
    """
    interfaces: dict[str, dict[str, Any]] = {}
    local_ips: list[str] = []
    source = "ip"
    pending: str | None = None
    for line in text.splitlines():
        if line.strip() == "# no ip":
            source = "sysfs"
            continue
        link = _LINK.match(line.strip())
        if link:
            interfaces.setdefault(link["iface"], {"mac": link["mac"], "addrs": []})
            continue
        match = _IP_O.match(line)
        if match:
            entry = interfaces.setdefault(match["iface"], {"mac": None, "addrs": []})
            if match["family"].startswith("link/"):
                entry["mac"] = match["addr"]
            else:
                entry["addrs"].append(match["addr"])
                local_ips.append(match["addr"].split("/")[0])
            continue
        leaf = _FIB_LEAF.match(line)
        if leaf:
            pending = leaf["ip"]
        elif pending and _FIB_LOCAL.match(line):
            if pending not in local_ips:
                local_ips.append(pending)
            pending = None
    if not interfaces and text.strip():
        raise ParseError(f"no interface in {text.strip()[:120]!r}")
    return {"source": source, "interfaces": interfaces, "local_ips": local_ips}


def in_subnet(address: str, cidr: str) -> bool:
    """Whether ``address`` (bare or with a prefix length) lies in ``cidr``."""
    return ipaddress.ip_address(address.split("/")[0]) in ipaddress.ip_network(cidr, strict=False)


_SMI_GPU = re.compile(r"^GPU \d+: ")


def parse_gpu_devices(dev_listing: str, smi_list: str | None) -> dict[str, Any]:
    """GPUs the container sees: ``nvidia-smi -L`` lines when it answered, else ``/dev/nvidiaN`` nodes.

    The NVIDIA container toolkit injects only the allocated GPUs' device nodes, so both count what the
    device plugin handed to this pod; the device nodes need no driver call and never hang.
    """
    nodes = sorted(
        (line.strip() for line in dev_listing.splitlines() if re.fullmatch(r"nvidia\d+", line.strip())),
        key=lambda name: int(name[6:]),
    )
    listed = [line.strip() for line in (smi_list or "").splitlines() if _SMI_GPU.match(line.strip())]
    if smi_list is not None and listed:
        return {"count": len(listed), "source": "nvidia-smi -L", "devices": nodes, "gpus": listed}
    return {"count": len(nodes), "source": "/dev/nvidia*", "devices": nodes, "gpus": listed}


POD_VARIABLE = "diagnose_k8s_pod"
NODE_VARIABLE = "diagnose_k8s_node"
NOT_A_POD = "not a Kubernetes pod"


def pod_of(host_vars: Mapping[str, Any]) -> dict[str, Any] | None:
    """The pod facts of a host the kubectl inventory made from a pod; None for any other host."""
    pod = host_vars.get(POD_VARIABLE)
    if pod is None:
        return None
    facts = parse_pod(pod)
    facts["node"] = host_vars.get(NODE_VARIABLE) or facts["node"]
    return facts


def pod_label(pod: dict[str, Any]) -> str:
    """How messages name a pod: ``pod ns/name on node gpu07``, the two names an operator looks up."""
    return f"pod {pod['namespace']}/{pod['name']} on node {pod['node'] or '(not scheduled)'}"
