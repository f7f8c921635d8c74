"""Kubernetes pods as hosts: groups chosen by label selector, and every pod read once before the run.

A group with ``diagnose_k8s_selector`` is expanded into its Running pods by :func:`discover_pods`, before
``--limit`` applies. Before any host is touched, :func:`attach_pods` reads each pod once
(``kubectl get pod -o json``) and gives the host ``diagnose_k8s_pod`` (the object), ``diagnose_k8s_node``
(where it is scheduled) and, unless the inventory set one, ``ansible_host`` = the pod IP: the address the
benchmark's ranks meet at. :class:`PodSource` does both for a run, as a
:class:`~diagnose.targets.sources.HostSource`. How one pod is entered is :mod:`diagnose.k8s.target`.

Parsing (pod lists) is pure; kubectl runs through :mod:`diagnose.k8s.kubectl`, injectable.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from diagnose.core.errors import ConfigError
from diagnose.core.hosts import Host
from diagnose.core.vars import Vars
from diagnose.k8s.kubectl import KUBECTL_TIMEOUT_S, K8sError, Runner, run_kubectl
from diagnose.k8s.target import (
    CONTROL_CHARS,
    EXTRA_ARGS_VAR,
    POD_ERROR_VAR,
    KubectlArgsError,
    KubectlTarget,
    error_reason,
    first_error_line,
    is_configuration_problem,
)
from diagnose.parsers.pod import NODE_VARIABLE, POD_VARIABLE, parse_pod
from diagnose.targets.model import SELECTOR_VARIABLE, Inventory
from diagnose.targets.sources import HostContext, HostSource

GROUP_NAMESPACE_VAR = "diagnose_k8s_namespace"
GROUP_CONTAINER_VAR = "diagnose_k8s_container"


def running_pod_names(listing: Mapping[str, Any]) -> list[str]:
    """Names of the Running pods of a ``kubectl get pods -o json`` list, in name order (pure)."""
    names = []
    for item in listing.get("items") or []:
        if not isinstance(item, Mapping):
            continue
        status = item.get("status") if isinstance(item.get("status"), Mapping) else {}
        metadata = item.get("metadata") if isinstance(item.get("metadata"), Mapping) else {}
        if (
            status.get("phase") == "Running"
            and not metadata.get("deletionTimestamp")
            and metadata.get("name")
        ):
            names.append(str(metadata["name"]))
    return sorted(names)


def _json_of(done: subprocess.CompletedProcess[str], what: str) -> dict[str, Any]:
    try:
        value = json.loads(done.stdout)
    except ValueError:
        raise K8sError(f"kubectl printed no JSON for {what}") from None
    if not isinstance(value, dict):
        raise K8sError(f"kubectl printed no object for {what}")
    return value


def discover_pods(group_vars: Mapping[str, Any], run: Runner = run_kubectl) -> list[str]:
    """The Running pods a group's ``diagnose_k8s_selector`` selects, in name order; K8sError otherwise."""
    selector = str(group_vars.get(SELECTOR_VARIABLE) or "").strip()
    if not selector or CONTROL_CHARS.search(selector):
        raise K8sError(f"{SELECTOR_VARIABLE} must be a one-line label selector, got {selector!r}")
    namespace = group_vars.get(GROUP_NAMESPACE_VAR) or group_vars.get("ansible_kubectl_namespace")
    try:
        target = KubectlTarget.of({**group_vars, "ansible_kubectl_namespace": namespace}, "")
    except KubectlArgsError as exc:
        raise K8sError(f"{EXTRA_ARGS_VAR}: {exc}") from None
    done = run(target.list_pods_argv(selector), KUBECTL_TIMEOUT_S)
    where = f"selector {selector!r}" + (f" in namespace {namespace}" if namespace else "")
    if done.returncode != 0:
        raise K8sError(
            f"kubectl get pods -l {selector!r} failed: {first_error_line(done.stderr) or 'no error text'}"
        )
    names = running_pod_names(_json_of(done, where))
    if not names:
        raise K8sError(f"no Running pod matches {where}")
    return names


def discovered_host_vars(group_vars: Mapping[str, Any], pod: str) -> dict[str, Any]:
    """The host variables a discovered pod gets; the group's other variables it inherits as a member."""
    values: dict[str, Any] = {"ansible_connection": "kubectl", "ansible_kubectl_pod": pod}
    namespace = group_vars.get(GROUP_NAMESPACE_VAR)
    if namespace:
        values["ansible_kubectl_namespace"] = namespace
    container = group_vars.get(GROUP_CONTAINER_VAR)
    if container:
        values["ansible_kubectl_container"] = container
    return values


#: Host variable naming the Multus network whose address the benchmark's rendezvous uses.
BENCH_NETWORK_VAR = "bench_network"


def attach_pods(hosts: list[Host], run: Runner = run_kubectl) -> list[Host]:
    """Each kubectl host with its pod object, node and pod IP; other hosts unchanged.

    Reads every pod once, in parallel. A pod that cannot be read keeps its host in the run with the
    reason in :data:`POD_ERROR_VAR` (the connector reports it as host.reachable FAIL); kubectl missing, an
    unknown context or RBAC that forbids reading pods is a ConfigError (exit 2) before any host is touched.
    """
    pods = [h for h in hosts if h.connection == "kubectl"]
    if not pods:
        return hosts
    with ThreadPoolExecutor(max_workers=min(16, len(pods))) as pool:
        read = dict(zip([h.name for h in pods], pool.map(lambda h: _read_pod(h, run), pods), strict=True))
    return [
        Host(h.name, h.groups, Vars({**h.vars, **read[h.name]}, host=h.name)) if h.name in read else h
        for h in hosts
    ]


def _read_pod(host: Host, run: Runner) -> dict[str, Any]:
    target = KubectlTarget.of(host.vars, host.name)
    try:
        done = run(target.get_pod_argv(), KUBECTL_TIMEOUT_S)
    except K8sError as exc:
        raise ConfigError(f"host {host.name}: {exc}") from None
    if done.returncode != 0:
        if is_configuration_problem(done.stderr):
            raise ConfigError(f"host {host.name}: {error_reason(done.stderr, target)}")
        return {POD_ERROR_VAR: error_reason(done.stderr, target)}
    try:
        pod = _json_of(done, target.where)
    except K8sError as exc:
        return {POD_ERROR_VAR: str(exc)}
    values: dict[str, Any] = {POD_VARIABLE: pod}
    spec = pod.get("spec") if isinstance(pod.get("spec"), Mapping) else {}
    status = pod.get("status") if isinstance(pod.get("status"), Mapping) else {}
    if spec.get("nodeName"):
        values[NODE_VARIABLE] = str(spec["nodeName"])
    if not host.vars.get("ansible_host"):
        address = _network_address(pod, host.vars.str(BENCH_NETWORK_VAR)) or status.get("podIP")
        if address:
            values["ansible_host"] = str(address)
    return values


def _network_address(pod: Mapping[str, Any], network: str | None) -> str | None:
    """The pod's first IP on the Multus network ``network`` (``ns/name``, or a bare name in the pod's
    namespace), from its network-status annotation: where the benchmark's ranks should meet, when the pod
    network is not the fabric the collectives are meant to cross. None when not named or not attached."""
    if not network:
        return None
    facts = parse_pod(pod)

    def full(name: str) -> str:
        return name if "/" in name else f"{facts['namespace']}/{name}"

    for entry in facts["networks"]:
        if full(entry["name"] or "") == full(network) and entry["ips"]:
            return str(entry["ips"][0])
    return None


#: The Running pods a group's variables (with ``-e``) select, in order; raises with the reason.
PodDiscovery = Callable[[Mapping[str, Any]], list[str]]


@dataclass
class PodSource(HostSource):
    """Pods as hosts: groups chosen by label selector expanded into their Running pods, and every kubectl
    host (discovered or listed) read once. kubectl answers both unless a test hands in ``discover``/``run``."""

    discover: PodDiscovery | None = None
    run: Runner = run_kubectl

    def add_hosts(self, inventory: Inventory, context: HostContext) -> None:
        """Add the Running pods of every group that sets ``diagnose_k8s_selector``, as hosts of that group
        (named after the pod, in the order discovery gives), before ``--limit`` applies.

        Each pod gets :func:`discovered_host_vars` as host variables and the group's others as a member.
        A selector that matches no Running pod, or that kubectl refuses, is a ConfigError naming the group
        and the file that set the selector: a group that silently shrank would shrink the acceptance run.
        """
        inventory.settle()
        groups = inventory.groups_setting(SELECTOR_VARIABLE)
        listed = set(inventory.hosts)
        for group in groups:
            scope = {**inventory.group_scope_vars(group), **context.extra_vars}
            path, line = inventory.group_var_origin(group, SELECTOR_VARIABLE)
            try:
                pods = self.discover(scope) if self.discover else discover_pods(scope, self.run)
            except Exception as exc:  # the discoverer's own words are the message
                raise ConfigError(f"group {group}: {exc}", path, line) from None
            inventory.source = path
            for pod in pods:
                if pod in listed:
                    raise ConfigError(f"group {group}: pod {pod} is also an inventory host", path, line)
                inventory.add_host(pod, group)
                for key, value in discovered_host_vars(scope, pod).items():
                    inventory.set_host_var(pod, key, value, line)
        inventory.source = inventory.path
        if groups:
            inventory.settle()

    def complete(self, hosts: list[Host]) -> list[Host]:
        """Every kubectl host with its pod object, node and pod IP, read before any host is touched."""
        return attach_pods(hosts, self.run)
