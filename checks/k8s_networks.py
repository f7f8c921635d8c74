"""k8s.networks — the pod's Multus networks are attached, and each VF has its IP inside the pod.

RDMA traffic of a pod on an SR-IOV or macvlan/ipvlan RDMA network leaves through the secondary interface
Multus attached (``net1``...), not through the cluster network's ``eth0``. Multus records what each CNI
returned in the ``k8s.v1.cni.cncf.io/network-status`` annotation (``networks-status`` before 2020); an entry
without IPs is a VF whose IPAM gave nothing (NCCL then finds no usable address on the RDMA interface), and
an entry whose interface is absent from the pod is a CNI that reported more than it did. Both the
annotation and ``ip -o addr`` inside the pod are read, and addresses are checked against
``expected_k8s_subnet`` where set. Images without iproute2 fall back to /sys/class/net and fib_trie.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from diagnose.core.check import Check, Command, Facts
from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.vars import Vars
from diagnose.parsers.pod import NOT_A_POD, POD_VARIABLE, in_subnet, parse_interfaces, pod_label, pod_of

IP_SCRIPT = (
    "if command -v ip >/dev/null 2>&1; then ip -o addr show; else echo '# no ip'; "
    'for d in /sys/class/net/*; do echo "# link ${d##*/} $(cat "$d/address")"; done; '
    "cat /proc/net/fib_trie; fi"
)
REMEDIATION = (
    "Attach the network in the pod's k8s.v1.cni.cncf.io/networks annotation (namespace/name of the "
    "NetworkAttachmentDefinition, with its device-plugin resource requested), and give the "
    "NetworkAttachmentDefinition an IPAM (whereabouts or host-local) with free addresses in the RDMA subnet; "
    "`kubectl describe pod` shows the CNI's errors in its events."
)


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    pod = pod_of(host_vars)
    if pod is None:
        return {"pod": None}
    return {"pod": pod, **parse_interfaces(outputs["ip_addr"].stdout)}


def _same_network(wanted: str, entry: str, namespace: str) -> bool:
    """``ns/name`` and bare ``name`` name one network when the bare one is in the pod's namespace."""

    def full(name: str) -> str:
        return name if "/" in name else f"{namespace}/{name}"

    return wanted == entry or full(wanted) == full(entry)


def _problem(entry: dict[str, Any], facts: Facts, subnet: str | None) -> str | None:
    name, iface = entry["name"], entry["interface"] or "(no interface)"
    if not entry["ips"]:
        return f"CNI assigned no IP to {iface} (network {name})"
    if facts["source"] == "ip":
        inside = facts["interfaces"].get(entry["interface"])
        if inside is None:
            return f"interface {iface} of network {name} does not exist inside the pod"
        held = {a.split("/")[0] for a in inside["addrs"]}
        lost = [ip for ip in entry["ips"] if ip not in held]
        if lost:
            return f"{iface} (network {name}) does not hold {', '.join(lost)} inside the pod"
    else:
        if entry["interface"] not in facts["interfaces"]:
            return f"interface {iface} of network {name} does not exist inside the pod"
        lost = [ip for ip in entry["ips"] if ":" not in ip and ip not in facts["local_ips"]]
        if lost:
            return f"{', '.join(lost)} (network {name}) is not a local address of the pod"
    if subnet:
        outside = [ip for ip in entry["ips"] if not in_subnet(ip, subnet)]
        if outside and len(outside) == len(entry["ips"]):
            return f"{iface} (network {name}) has {', '.join(outside)}, outside {subnet}"
    return None


def judge(facts: Facts, host_vars: Vars) -> Outcome:
    pod = facts["pod"]
    if pod is None:
        return Outcome("SKIP", f"{host_vars.host or 'this host'} is {NOT_A_POD}")
    where = pod_label(pod)
    expected = host_vars.list("expected_k8s_networks") or pod["requested_networks"]
    subnet = host_vars.str("expected_k8s_subnet")
    entries = pod["networks"]
    observed = [
        {"name": e["name"], "interface": e["interface"], "ips": e["ips"]} for e in entries if not e["default"]
    ]
    wanted = ", ".join(expected) + (f" in {subnet}" if subnet else "")
    if not expected:
        return Outcome("SKIP", f"{where} asks for no Multus network and none is expected", observed, None)
    problems = []
    for name in expected:
        entry = next((e for e in entries if _same_network(name, e["name"], pod["namespace"])), None)
        if entry is None:
            attached = ", ".join(e["name"] or "(default)" for e in entries) or "no network-status annotation"
            problems.append(f"network {name} is not attached (attached: {attached})")
            continue
        problem = _problem(entry, facts, subnet)
        if problem:
            problems.append(problem)
    if problems:
        return Outcome("FAIL", f"{where}: {'; '.join(problems)}", observed, wanted, remediation=REMEDIATION)
    shown = "; ".join(f"{e['name']} on {e['interface']} {', '.join(e['ips'])}" for e in observed)
    return Outcome("PASS", f"{where}: {shown}", observed, wanted)


POD_COMMANDS = (Command("ip_addr", IP_SCRIPT, timeout=10),)


def commands_for(host_vars: Vars) -> tuple[Command, ...]:
    """In a pod only: an SSH host has no pod to judge, and pays nothing for this check."""
    return POD_COMMANDS if host_vars.get(POD_VARIABLE) is not None else ()


CHECK = Check(
    id="k8s.networks",
    checklist="2",
    summary="the pod's Multus networks are attached and each VF interface holds its IP inside the pod",
    commands=POD_COMMANDS,
    commands_for=commands_for,
    parse=parse,
    judge=judge,
    remediation=REMEDIATION,
    action="check_config",
)
