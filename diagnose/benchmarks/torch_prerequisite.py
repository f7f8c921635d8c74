"""Whether the benchmarks' Python imports torch on each host, from what the host checks already saw.

nccl.version probed the same Python the launches use (``bench_python``, else the host's interpreter). A host
where it could not import torch would end every launch in a wall of tracebacks; instead each launch that
needs it is told why it cannot start, and the host gets one ``host.torch`` ERROR with the one fix: the cause
every benchmark, probe and stress run it kept from starting is listed under (diagnose.render.cause_links).

Where torch would only have shown function that nothing judges (a lone CPU host's memory copy and stress
programs), its absence costs no verdict: ``host.torch`` is a SKIP with the same fix, told once the stage
ends, so that a fresh machine without torch still ends PASS.
"""

from __future__ import annotations

import threading

from diagnose.benchmarks.setup import CHECKLIST, BenchContext
from diagnose.catalog.stage_ids import HOST_TORCH
from diagnose.core.hosts import Host
from diagnose.core.install_hint import torch_hint
from diagnose.core.model import CheckResult


class TorchPrerequisite:
    """The stage's one view of torch on its hosts; safe to ask from the probes' parallel launches."""

    def __init__(self, ctx: BenchContext) -> None:
        self.ctx = ctx
        self._reported: set[str] = set()  # hosts whose host.torch was emitted, once each
        self._unjudged: dict[str, tuple[str, str, str]] = {}  # hosts where torch kept only unjudged work
        self._lock = threading.Lock()

    def missing(self, hosts: list[Host], judged: bool = True) -> str | None:
        """Why torchrun cannot start, when the host checks already saw torch fail to import there.

        Launching anyway would end in a wall of tracebacks per host; this names the hosts and the fix.
        nccl.version probed the same Python the launch uses (``bench_python``, else the host's interpreter).
        ``judged``: whether what the launch measures would have been judged (the ERROR), or only shown.
        """
        missing, hints = {}, {}
        for host in hosts:
            facts = self.ctx.facts.get(host.name, {}).get("nccl.version") or {}
            if facts.get("torch") is None and facts.get("torch_error"):
                interpreter = str(facts.get("python") or host.python)
                missing[host.name] = f"{interpreter}: {facts['torch_error']}"
                hint = torch_hint(
                    interpreter,
                    host.connection == "local",
                    nvidia_gpu=facts.get("nvidia_gpu"),
                    machine=facts.get("machine"),
                )
                hints.setdefault(hint, None)
                if judged:
                    self.report_torch(host.name, interpreter, str(facts["torch_error"]), hint)
                else:
                    with self._lock:
                        self._unjudged.setdefault(host.name, (interpreter, str(facts["torch_error"]), hint))
        if not missing:
            return None
        where = "; ".join(f"{name} ({why})" for name, why in missing.items())
        return f"torch cannot be imported on {where}. " + ". ".join(hints)

    def report_torch(self, host: str, interpreter: str, error: str, hint: str) -> None:
        """One ``host.torch`` ERROR per host whose benchmark Python cannot import torch, the first time a
        launch needs it: the one cause, with the one fix, that every benchmark it prevented is listed under
        (diagnose.render.cause_links), instead of each saying it again."""
        with self._lock:
            if host in self._reported:
                return
            self._reported.add(host)
        self.ctx.emit_check(
            CheckResult(
                HOST_TORCH,
                host,
                CHECKLIST,
                "ERROR",
                observed=error,
                expected="torch imports",
                message=f"torch cannot be imported by {interpreter} on {host}: {error}. {hint}",
                remediation=hint,
            )
        )

    def report_unjudged(self) -> None:
        """A ``host.torch`` SKIP for each host where torch's absence kept only unjudged work from running."""
        with self._lock:
            left = {h: why for h, why in self._unjudged.items() if h not in self._reported}
            self._reported.update(left)
        for host, (interpreter, error, hint) in left.items():
            self.ctx.emit_check(
                CheckResult(
                    HOST_TORCH,
                    host,
                    CHECKLIST,
                    "SKIP",
                    observed=error,
                    expected="torch imports",
                    message=(
                        f"torch cannot be imported by {interpreter} on {host}: {error}; what it would have run "
                        f"here is shown, not judged, so no verdict is lost. {hint}"
                    ),
                    remediation=hint,
                )
            )
