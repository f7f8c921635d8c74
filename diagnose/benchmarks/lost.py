"""A host lost during the collective sweep: one cause for what it no longer answers, and left out after it.

When a host stops answering mid-sweep (its sshd or network gone, the machine down), every extra after the sweep
(fleet probes, training probe, KV transfer, GPU stress) used to try it in turn and fail on it, each an ERROR
of its own with "fix the configuration": a dozen lines for one fault (two test hosts with their own network,
one host's sshd killed during the all_reduce). The host's ``host.reachable`` result turns into the ERROR that
says so, which results.json ``causes`` makes the root of that host's other results, and the extras run on the
hosts still answering, saying who was left out.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence

from diagnose.benchmarks.setup import BenchContext, Setup
from diagnose.core.model import CheckResult
from diagnose.launchers.remote import LEASE_S

#: host.reachable's checklist mark (no checklist item: the precondition of all of them).
CHECKLIST = "\u2013"


def lost_host_result(name: str, why: str) -> CheckResult:
    """``host.reachable`` for a host that answered at the start and stopped answering during the sweep."""
    return CheckResult(
        "host.reachable",
        name,
        CHECKLIST,
        "ERROR",
        message=(
            f"{name} answered at the start, then stopped answering during the collective sweep ({why}); the "
            f"measurements after it leave {name} out; what the sweep started there stops itself once "
            f"{LEASE_S} s pass without word from this run"
        ),
        remediation=(
            f"Check that {name} is up and its sshd runs (console, BMC); a host that drops its connections under "
            "load may have a failing NIC or kernel: read its kernel log"
        ),
    )


def note_lost(ctx: BenchContext, lost: MutableMapping[str, str], hosts: Sequence[str], why: str) -> None:
    """Remember the hosts a launch lost and turn each one's host.reachable into the ERROR that says so."""
    for name in hosts:
        lost[name] = why
        if ctx.replace_check is not None:
            ctx.replace_check(lost_host_result(name, why))


def without_lost(setup: Setup, lost: Mapping[str, str]) -> Setup:
    """The setup the extras run with: the hosts still answering, a note naming the ones left out."""
    if not lost:
        return setup
    kept = [h for h in setup.hosts if h.name not in lost]
    note = f"left out: {', '.join(sorted(lost))} (stopped answering during the sweep)"
    return Setup(setup.backend, setup.nproc, kept, [*setup.notes, note])
