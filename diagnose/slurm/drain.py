"""Taking a node out of Slurm's service when node-check finds it unhealthy, and back when it is healthy again.

The rule is ownership by reason text. node-check drains with a reason that starts with ``diagnose:`` and
names the failed checks (``diagnose: ib.port_state mlx5_3 port 1 Down``); a later healthy run lifts a drain
only when the node's current reason still starts with ``diagnose:``. A drain anyone else set — an admin's
``scontrol update ... State=DRAIN Reason="fan"``, or Slurm's own "Prolog error" or "Not responding" — is
left exactly as it is, healthy or not: its reason is never overwritten and the node is never resumed.

:func:`decide` is the pure policy (the node's parsed ``scontrol show node`` in, an :class:`Action` out);
:func:`read_node` and :func:`apply` are the only I/O, through ``scontrol`` as an argv list (no shell), so
a reason holding quotes or ``;`` reaches Slurm as one argument.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from diagnose.core.check import ParseError
from diagnose.core.process import MISSING, ProgramError, run_program
from diagnose.parsers.scontrol_node import parse_scontrol_node

REASON_PREFIX = "diagnose:"
#: Long enough for two or three findings; ``sinfo -R`` shows 20 characters by default and ``scontrol
#: show node`` the whole reason, which admins read on a terminal line.
REASON_LIMIT = 160
SCONTROL_TIMEOUT_S = 15.0


class SlurmError(RuntimeError):
    """scontrol could not be run, failed, or printed something unreadable; the message says which."""


@dataclass(frozen=True)
class Action:
    """What to do to the node: ``drain`` (with ``reason``), ``resume``, or ``none``; ``note`` is what the
    one-line summary says about it (empty when there is nothing to say)."""

    verb: str
    reason: str | None = None
    note: str = ""


def drain_reason(findings: list[tuple[str, str]], limit: int = REASON_LIMIT) -> str:
    """``diagnose: <check> <detail>; <check> <detail>`` from (check id, short detail) pairs, on one line,
    cut to ``limit`` characters (the cut marked with ``...``)."""
    parts = [f"{check} {detail}".strip() for check, detail in findings]
    text = re.sub(r"\s+", " ", f"{REASON_PREFIX} {'; '.join(parts)}").strip()
    if len(text) <= limit:
        return text
    return text[: limit - 3].rstrip(" ;,") + "..."


def ours(reason: str | None) -> bool:
    """A reason node-check set (and so may lift)."""
    return reason is not None and reason.startswith(REASON_PREFIX)


def out_of_service(node: dict[str, Any]) -> bool:
    """Drained, draining, down or failed: the node takes no new jobs."""
    return bool(node["drain"]) or node["base_state"] in ("DOWN", "FAIL") or "FAIL" in node["flags"]


def decide(healthy: bool, node: dict[str, Any], reason: str) -> Action:
    """The policy of the module docstring. ``node`` is :func:`parse_scontrol_node`'s answer; ``reason``
    the drain reason this run would set (unused when healthy)."""
    current = node["reason"]
    if healthy:
        if node["drain"] and ours(current):
            return Action("resume", note="resumed")
        if out_of_service(node) and current:
            return Action("none", note=f"left out of service: {current}")
        return Action("none")
    if out_of_service(node) and current and not ours(current):
        return Action("none", note=f"already out of service: {current}")
    if node["drain"] and current == reason:
        return Action("none", note="still drained")
    return Action("drain", reason=reason, note="drained" if not node["drain"] else "drain reason updated")


def _scontrol(args: list[str]) -> str:
    try:
        done = run_program(["scontrol", *args], SCONTROL_TIMEOUT_S)
    except ProgramError as exc:
        hint = " (set PATH in the health check wrapper)" if exc.reason == MISSING else ""
        raise SlurmError(f"{exc}{hint}") from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise SlurmError(f"scontrol {args[0]} exited {done.returncode}: {said[-1] if said else 'no message'}")
    return done.stdout


def read_node(name: str) -> dict[str, Any]:
    """The node as slurmctld sees it now."""
    text = _scontrol(["show", "node", "-o", name])
    try:
        node = parse_scontrol_node(text)
    except ParseError as exc:
        raise SlurmError(str(exc)) from None
    if node["name"] != name:
        raise SlurmError(f"scontrol show node {name} answered for node {node['name']}")
    return node


def read_nodes() -> list[dict[str, Any]]:
    """Every node slurmctld knows, as :func:`read_node` reads one: what the quarantine cap counts."""
    text = _scontrol(["show", "node", "-o"])
    try:
        return [parse_scontrol_node(line) for line in text.splitlines() if line.startswith("NodeName=")]
    except ParseError as exc:
        raise SlurmError(str(exc)) from None


def held(nodes: list[dict[str, Any]]) -> list[str]:
    """The nodes drained by diagnose, oldest drain first (then by name): the order the quarantine cap keeps
    them in, so nodes that drain at the same moment agree on which of them stay drained."""
    ordered = sorted(
        (n for n in nodes if n["drain"] and ours(n["reason"])),
        key=lambda n: (n["reason_time"] or "", n["name"]),
    )
    return [n["name"] for n in ordered]


def apply(name: str, action: Action) -> None:
    """Carry out ``action`` on node ``name`` (nothing for ``none``)."""
    if action.verb == "drain":
        _scontrol(["update", f"NodeName={name}", "State=DRAIN", f"Reason={action.reason}"])
    elif action.verb == "resume":
        _scontrol(["update", f"NodeName={name}", "State=RESUME"])
