"""How one pod is reached with kubectl: the command lines, the options passed on, kubectl's error words.

A host with ``ansible_connection: kubectl`` is a pod, reached with ``kubectl exec`` (the
``kubernetes.core.kubectl`` plugin's variables: ``ansible_kubectl_namespace``, ``_pod``, ``_container``,
``_context``, ``_kubeconfig``, ``_extra_args``; ``diagnose_kubectl`` names the binary). Every command line
is an argv list, never a shell line, so no inventory text reaches a local shell. This is what the
``kubectl`` connector (:mod:`diagnose.connectors.kubectl`) needs; finding and reading pods before a run is
:mod:`diagnose.targets.k8s_pods`. Everything here is pure.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

POD_VAR = "diagnose_k8s_pod"
NODE_VAR = "diagnose_k8s_node"
#: Why the pod could not be read during prepare(); the connector reports it as host.reachable FAIL.
POD_ERROR_VAR = "diagnose_k8s_pod_error"
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
#: A control character in a value would smuggle a second line or a terminal escape into an argv word.
CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")


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
            if not value.strip() or CONTROL_CHARS.search(value) or '"' in value:
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
        return f"kubectl is forbidden to reach {target.where}: {first_error_line(stderr)}"
    if "context was not found" in lowered or ("context" in lowered and "does not exist" in lowered):
        return f"kubectl context {target.context!r} does not exist: {first_error_line(stderr)}"
    if "container not found" in lowered or ("container" in lowered and "is not valid for pod" in lowered):
        container = f"container {target.container!r}" if target.container else "its container"
        return f"{target.where}: {container} not found or not running: {first_error_line(stderr)}"
    if "completed pod" in lowered or "does not have a host assigned" in lowered:
        return f"{target.where} is not Running: {first_error_line(stderr)}"
    if "(notfound)" in lowered or re.search(r'pods? "[^"]*" not found', text):
        return f"{target.where} not found"
    if "unable to connect to the server" in lowered or "connection refused" in lowered:
        return f"kubectl cannot reach the API server: {first_error_line(stderr)}"
    return f"kubectl failed for {target.where}: {first_error_line(stderr) or 'no error text'}"


def first_error_line(stderr: str) -> str:
    """kubectl's first error line without its ``error:`` prefix, at most 300 characters; empty if none."""
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


def pod_phase(pod: Mapping[str, Any]) -> str | None:
    status = pod.get("status")
    return str(status.get("phase")) if isinstance(status, Mapping) and status.get("phase") else None
