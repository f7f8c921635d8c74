"""host.time_sync — the clock is synchronised, and close to NTP time.

Logs, traces and NCCL timeouts of several hosts can only be joined on a common clock; Kerberos, TLS and
Slurm's munge refuse peers whose clocks drift apart. Whichever daemon the host runs is asked: chrony
(synchronised unless its Leap status is "Not synchronised"; the offset is its System time), ntpd (a ``*``
system peer and that peer's offset) or systemd (``NTPSynchronized``; it reports no offset). An
unsynchronised clock FAILs; one farther than ``time_max_offset_ms`` (default 50 ms) from NTP time WARNs,
as chrony slews it back without stepping.

A host where no time tool is installed is not judged (the package that brings one is named). A daemon that
is installed but does not answer means nothing keeps the clock: FAIL.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from diagnose.core.check import Check, Command, Facts
from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.vars import Vars
from diagnose.parsers.time_sync import PACKAGES, TIME_SYNC_SCRIPT, parse_time_sync

DEFAULT_MAX_OFFSET_MS = 50.0
#: Tools whose answer names a running daemon; timedatectl without systemd says nothing about the clock.
DAEMON_TOOLS = ("chronyc", "ntpq")

REMEDIATION = (
    "Run one NTP client on every host against the same servers: `apt-get install chrony` and "
    "`systemctl enable --now chrony` (or systemd-timesyncd: `timedatectl set-ntp true`), then check "
    "`chronyc tracking` shows Leap status Normal; `chronyc makestep` steps a clock that is far off."
)


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    return parse_time_sync(outputs["time_sync"].stdout)


def _offset(ms: float | None) -> str:
    if ms is None:
        return "offset not reported"
    if abs(ms) < 1:
        return f"offset {ms * 1000:+.0f} µs"
    return f"offset {ms:+.1f} ms"


def _describe(tool: str, facts: dict[str, Any]) -> str:
    state = "synchronised" if facts["synchronised"] else "NOT synchronised"
    ref = f" to {facts['reference']}" if facts.get("reference") else ""
    return f"{tool}: {state}{ref}, {_offset(facts.get('offset_ms'))}"


def judge(facts: Facts, host_vars: Vars) -> Outcome:
    host = host_vars.host or "this host"
    limit = host_vars.float("time_max_offset_ms", DEFAULT_MAX_OFFSET_MS) or DEFAULT_MAX_OFFSET_MS
    wanted = f"synchronised, |offset| <= {limit:g} ms"
    sources: dict[str, dict[str, Any]] = facts["sources"]
    if not sources:
        tools = ", ".join(f"{tool} (Debian package {pkg})" for tool, pkg in PACKAGES.items())
        return Outcome(
            "SKIP",
            f"no time tool on {host}: none of {tools} is installed, so synchronisation cannot be read",
            None,
            wanted,
            remediation=REMEDIATION,
        )
    answered = {tool: f for tool, f in sources.items() if f["answered"]}
    silent = "; ".join(f"{tool}: {f['error']}" for tool, f in sources.items() if not f["answered"])
    if not answered:
        if not any(tool in sources for tool in DAEMON_TOOLS):
            return Outcome(
                "SKIP",
                f"no time daemon answers on {host} ({silent}); the clock is kept outside this system",
                silent,
                wanted,
            )
        return Outcome(
            "FAIL",
            f"no time daemon answers on {host}: {silent}",
            silent,
            wanted,
            remediation=REMEDIATION,
        )
    tool, best = next(iter(answered.items()))
    observed = _describe(tool, best)
    if not best["synchronised"]:
        return Outcome(
            "FAIL",
            f"clock of {host} is not synchronised ({observed})",
            observed,
            wanted,
            remediation=REMEDIATION,
        )
    offset = best.get("offset_ms")
    if offset is not None and abs(offset) > limit:
        return Outcome(
            "WARN",
            f"clock of {host} is {abs(offset):.1f} ms {'ahead of' if offset > 0 else 'behind'} NTP time "
            f"(more than time_max_offset_ms {limit:g}; {observed})",
            observed,
            wanted,
            remediation=REMEDIATION,
        )
    return Outcome("PASS", f"clock of {host}: {observed}", observed, wanted)


CHECK = Check(
    id="host.time_sync",
    checklist="H",
    summary="clock synchronised (chrony, ntpd or systemd) and |offset| <= time_max_offset_ms",
    commands=(Command("time_sync", TIME_SYNC_SCRIPT, timeout=10),),
    parse=parse,
    judge=judge,
    remediation=REMEDIATION,
    action="check_config",
)
