"""Kubernetes pods as targets: the kubectl command lines, the pod each host stands for, group discovery.

A host with ``ansible_connection: kubectl`` is a pod, reached with ``kubectl exec`` (the
``kubernetes.core.kubectl`` plugin's variables: ``ansible_kubectl_namespace``, ``_pod``, ``_container``,
``_context``, ``_kubeconfig``, ``_extra_args``; ``diagnose_kubectl`` names the binary). Every command line
is an argv list, never a shell line, so no inventory text reaches a local shell.

Before any host is touched, :func:`attach_pods` reads each pod once (``kubectl get pod -o json``) and gives
the host ``diagnose_k8s_pod`` (the object), ``diagnose_k8s_node`` (where it is scheduled) and, unless the
inventory set one, ``ansible_host`` = the pod IP: the address the benchmark's ranks meet at. A group with
``diagnose_k8s_selector`` is expanded into its Running pods by :func:`discover_pods`, which
:func:`diagnose.targets.inventory.resolve_hosts` is handed (the inventory module itself stays free of I/O).

Parsing (error text, pod lists) is pure; the I/O is ``subprocess.run`` with a timeout, injectable.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from diagnose.core.errors import ConfigError
from diagnose.core.hosts import Host
from diagnose.core.process import MISSING, TIMEOUT, ProgramError, run_program
from diagnose.core.vars import Vars
from diagnose.parsers.pod import parse_pod

KUBECTL_TIMEOUT_S = 30.0
POD_VAR = "diagnose_k8s_pod"
NODE_VAR = "diagnose_k8s_node"
#: Why the pod could not be read during prepare(); the connector reports it as host.reachable FAIL.
POD_ERROR_VAR = "diagnose_k8s_pod_error"
SELECTOR_VAR = "diagnose_k8s_selector"
GROUP_NAMESPACE_VAR = "diagnose_k8s_namespace"
GROUP_CONTAINER_VAR = "diagnose_k8s_container"
EXTRA_ARGS_VAR = "ansible_kubectl_extra_args"

#: Global kubectl options that only say how to reach and authenticate to the API server, so the exec
#: still enters the pod the inventory names. True: the option takes a value.
ACCEPTED_OPTIONS: dict[str, bool] = {
    "--request-timeout": True,
    "--server": True,
    "-s": True,
    "--cluster": True,
    "--user": True,
    "--as": True,
    "--as-group": True,
    "--as-uid": True,
    "--certificate-authority": True,
    "--client-certificate": True,
    "--client-key": True,
    "--tls-server-name": True,
    "--cache-dir": True,
    "--insecure-skip-tls-verify": False,
}
#: Options refused with the reason: each would change what diagnose reads or leak a secret.
REFUSED_OPTIONS: dict[str, str] = {
    "--token": "puts a credential on the command line (visible in ps); use ansible_kubectl_kubeconfig",
    "--username": "puts a credential on the command line; use ansible_kubectl_kubeconfig",
    "--password": "puts a credential on the command line; use ansible_kubectl_kubeconfig",
    "--namespace": "use ansible_kubectl_namespace",
    "-n": "use ansible_kubectl_namespace",
    "--context": "use ansible_kubectl_context",
    "--kubeconfig": "use ansible_kubectl_kubeconfig",
    "--container": "use ansible_kubectl_container",
    "-c": "use ansible_kubectl_container",
}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class K8sError(Exception):
    """kubectl could not give what was asked; the message is one line for the operator."""


class KubectlArgsError(ValueError):
    """An ``ansible_kubectl_extra_args`` option diagnose will not pass; the message names it."""


def parse_extra_args(text: str | None) -> list[str]:
    """``ansible_kubectl_extra_args`` as argv words, each option accepted or refused (KubectlArgsError).

    Only options from :data:`ACCEPTED_OPTIONS` pass: they change how kubectl reaches the API server, not
    which pod or what the command prints. Everything else (``-v`` adds log lines to the checks' stderr,
    ``--tty`` mangles output, ``--token`` leaks) is refused rather than dropped without a word.
    """
    if text is None or not str(text).strip():
        return []
    try:
        words = shlex.split(str(text))
    except ValueError as exc:
        raise KubectlArgsError(f"cannot be split as shell words: {exc}") from None
    argv: list[str] = []
    index = 0
    while index < len(words):
        word = words[index]
        name, equals, value = word.partition("=")
        if name in REFUSED_OPTIONS:
            raise KubectlArgsError(f"option {name} is refused: {REFUSED_OPTIONS[name]}")
        if name not in ACCEPTED_OPTIONS:
            what = "option" if word.startswith("-") else "word"
            raise KubectlArgsError(
                f"{what} {word!r} is not supported (accepted: {', '.join(ACCEPTED_OPTIONS)})"
            )
        if ACCEPTED_OPTIONS[name]:
            if not equals:
                if index + 1 >= len(words):
                    raise KubectlArgsError(f"{name} needs a value")
                index += 1
                value = words[index]
            if not value.strip() or _CONTROL.search(value) or '"' in value:
                raise KubectlArgsError(f"{name} has an invalid value {value!r}")
            argv.append(f"{name}={value}")
        elif equals and value.lower() not in ("true", "false"):
            raise KubectlArgsError(f"{name} takes true or false, got {value!r}")
        else:
            argv.append(word)
        index += 1
    return argv


@dataclass(frozen=True)
class KubectlTarget:
    """How to reach one pod: the argv prefix every kubectl call for it shares, and the pod itself."""

    kubectl: str = "kubectl"
    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None
    pod: str = ""
    container: str | None = None
    extra_args: tuple[str, ...] = ()

    @classmethod
    def of(cls, values: Mapping[str, Any], pod: str) -> KubectlTarget:
        """From host (or group) variables; ``pod`` is the default for ``ansible_kubectl_pod``."""

        def text(name: str) -> str | None:
            value = values.get(name)
            return None if value is None or str(value) == "" else str(value)

        return cls(
            kubectl=text("diagnose_kubectl") or "kubectl",
            kubeconfig=text("ansible_kubectl_kubeconfig"),
            context=text("ansible_kubectl_context"),
            namespace=text("ansible_kubectl_namespace"),
            pod=text("ansible_kubectl_pod") or pod,
            container=text("ansible_kubectl_container"),
            extra_args=tuple(parse_extra_args(text(EXTRA_ARGS_VAR))),
        )

    def base(self) -> list[str]:
        """``kubectl [extra args] [--kubeconfig K] [--context C] [-n NS]``: Ansible's plugin order."""
        argv = [self.kubectl, *self.extra_args]
        if self.kubeconfig:
            argv.append(f"--kubeconfig={self.kubeconfig}")
        if self.context:
            argv.append(f"--context={self.context}")
        if self.namespace:
            argv += ["-n", self.namespace]
        return argv

    def exec_argv(self, script: str) -> list[str]:
        """The pod running ``script`` under ``/bin/sh -c``, stdin passed through (``-i``), no tty."""
        container = ["-c", self.container] if self.container else []
        return [*self.base(), "exec", "-i", self.pod, *container, "--", "/bin/sh", "-c", script]

    def get_pod_argv(self) -> list[str]:
        return [*self.base(), "get", "pod", self.pod, "-o", "json"]

    def list_pods_argv(self, selector: str) -> list[str]:
        return [*self.base(), "get", "pods", "-l", selector, "-o", "json"]

    @property
    def where(self) -> str:
        """``pod web-0 in namespace ml`` for messages."""
        return f"pod {self.pod}" + (f" in namespace {self.namespace}" if self.namespace else "")


# ---------------------------------------------------------------------------------------- kubectl's words

_FIRST_ERROR = re.compile(r"^(?:error: |Error from server \([A-Za-z]+\): |Error: )?(.*)$")


def error_reason(stderr: str, target: KubectlTarget) -> str:
    """kubectl's stderr as one line saying what is wrong (pure; the cases kubectl prints, else its line)."""
    text = " ".join(stderr.split())
    lowered = text.lower()
    if "forbidden" in lowered:
        return f"kubectl is forbidden to reach {target.where}: {_first_line(stderr)}"
    if "context was not found" in lowered or ("context" in lowered and "does not exist" in lowered):
        return f"kubectl context {target.context!r} does not exist: {_first_line(stderr)}"
    if "container not found" in lowered or ("container" in lowered and "is not valid for pod" in lowered):
        container = f"container {target.container!r}" if target.container else "its container"
        return f"{target.where}: {container} not found or not running: {_first_line(stderr)}"
    if "completed pod" in lowered or "does not have a host assigned" in lowered:
        return f"{target.where} is not Running: {_first_line(stderr)}"
    if "(notfound)" in lowered or re.search(r'pods? "[^"]*" not found', text):
        return f"{target.where} not found"
    if "unable to connect to the server" in lowered or "connection refused" in lowered:
        return f"kubectl cannot reach the API server: {_first_line(stderr)}"
    return f"kubectl failed for {target.where}: {_first_line(stderr) or 'no error text'}"


def _first_line(stderr: str) -> str:
    for line in stderr.splitlines():
        if line.strip():
            match = _FIRST_ERROR.match(line.strip())
            return (match.group(1) if match else line.strip())[:300]
    return ""


def is_configuration_problem(stderr: str) -> bool:
    """An unknown context or missing RBAC: every pod of the run would fail the same way, so the run stops
    (exit 2) instead of reporting each pod unreachable."""
    lowered = stderr.lower()
    return "forbidden" in lowered or "context was not found" in lowered or "does not exist" in lowered


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


def pod_phase(pod: Mapping[str, Any]) -> str | None:
    status = pod.get("status")
    return str(status.get("phase")) if isinstance(status, Mapping) and status.get("phase") else None


# ----------------------------------------------------------------------------------------------- the I/O

Runner = Callable[[Sequence[str], float], "subprocess.CompletedProcess[str]"]


def run_kubectl(argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """kubectl with its outputs captured; a kubectl that cannot start raises K8sError."""
    try:
        return run_program(argv, timeout)
    except ProgramError as exc:
        if exc.reason == TIMEOUT:
            return subprocess.CompletedProcess(list(argv), 124, "", str(exc))
        hint = " (install kubectl or set diagnose_kubectl)" if exc.reason == MISSING else ""
        raise K8sError(f"{exc}{hint}") from None


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
    selector = str(group_vars.get(SELECTOR_VAR) or "").strip()
    if not selector or _CONTROL.search(selector):
        raise K8sError(f"{SELECTOR_VAR} must be a one-line label selector, got {selector!r}")
    namespace = group_vars.get(GROUP_NAMESPACE_VAR) or group_vars.get("ansible_kubectl_namespace")
    try:
        target = KubectlTarget.of({**group_vars, "ansible_kubectl_namespace": namespace}, "")
    except KubectlArgsError as exc:
        raise K8sError(f"{EXTRA_ARGS_VAR}: {exc}") from None
    done = run(target.list_pods_argv(selector), KUBECTL_TIMEOUT_S)
    where = f"selector {selector!r}" + (f" in namespace {namespace}" if namespace else "")
    if done.returncode != 0:
        raise K8sError(
            f"kubectl get pods -l {selector!r} failed: {_first_line(done.stderr) or 'no error text'}"
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
    values: dict[str, Any] = {POD_VAR: pod}
    spec = pod.get("spec") if isinstance(pod.get("spec"), Mapping) else {}
    status = pod.get("status") if isinstance(pod.get("status"), Mapping) else {}
    if spec.get("nodeName"):
        values[NODE_VAR] = str(spec["nodeName"])
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
