"""Running kubectl: one argv with a timeout, and the one error the callers share.

Reading pods before a run (:mod:`diagnose.targets.k8s_pods`), cordoning and tainting nodes
(:mod:`diagnose.k8s.nodes`) and the quarantine stage all run kubectl the same way, so a missing kubectl reads
the same everywhere and a test hands its own :data:`Runner` to any of them.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence

from diagnose.core.process import MISSING, TIMEOUT, ProgramError, run_program

KUBECTL_TIMEOUT_S = 30.0


class K8sError(Exception):
    """kubectl could not give what was asked; the message is one line for the operator."""


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
