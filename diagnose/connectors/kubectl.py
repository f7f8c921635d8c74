"""The ``kubectl`` connector: a pod through ``kubectl exec`` (``ansible_connection: kubectl``).

The transport is a local program like ``local``'s shell, so it shares that connector's streaming loop
(:func:`~diagnose.connectors.local.stream_process`); batches, caps, the frozen-host watchdog, stopping by
session (another exec into the same pod runs the kill script) and files written through the exec stream
come from the base class unchanged. The command line is built in :mod:`diagnose.k8s.target`.
"""

from __future__ import annotations

from collections.abc import Callable

from diagnose.connectors.base import DEFAULT_CONNECT_TIMEOUT_S, ConnectError, Connection, Exec, Sink
from diagnose.connectors.local import stream_process
from diagnose.core.hosts import Host
from diagnose.k8s.target import POD_ERROR_VAR, KubectlTarget, error_reason, pod_phase
from diagnose.parsers.pod import POD_VARIABLE


class KubectlConnection(Connection):
    """One pod (``ansible_kubectl_pod``, default the host name), entered with ``kubectl exec -i``."""

    def __init__(self, host: Host) -> None:
        super().__init__(host)
        self.target = KubectlTarget.of(host.vars, host.name)
        self.connect_timeout = host.vars.float("diagnose_connect_timeout", None) or DEFAULT_CONNECT_TIMEOUT_S

    def open(self) -> None:
        """Check that the pod can be entered now: read during prepare(), Running, and a quick ``true``."""
        problem = self.host.vars.get(POD_ERROR_VAR)
        if problem:
            raise ConnectError(str(problem))
        pod = self.host.vars.get(POD_VARIABLE)
        phase = pod_phase(pod) if isinstance(pod, dict) else None
        if phase is not None and phase != "Running":
            raise ConnectError(f"{self.target.where} is {phase}, not Running")
        result = self.run("true", timeout=max(self.connect_timeout, 15.0))
        if result.error:
            raise ConnectError(result.error)
        if result.timed_out:
            raise ConnectError(f"kubectl exec into {self.target.where} gave no answer in time")
        if result.exit_code != 0:
            raise ConnectError(error_reason(result.stderr, self.target))

    def _execute(
        self, script: str, stdin: bytes | None, out: Sink, err: Sink, deadline: Callable[[], float]
    ) -> Exec:
        return stream_process(self.target.exec_argv(script), stdin, out, err, deadline)
