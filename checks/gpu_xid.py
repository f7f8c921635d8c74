"""gpu.xid — the GPU driver logged no hardware Xid in the window (since boot, or since the last run).

An Xid is the driver's own verdict on a GPU fault, written to the kernel log as
``NVRM: Xid (PCI:0000:3b:00): 79, … GPU has fallen off the bus``. The log names the GPU by PCI address, so
the check maps it to the nvidia-smi index and bus id the operator acts on (``0000:3b:00`` is
``00000000:3B:00.0``). What each number means, and whether it is the job's fault (WARN) or the hardware's
(FAIL), is data in :mod:`diagnose.catalog.xid`.

The window is ``xid_since`` (an ISO-8601 UTC time; the nightly playbook sets it to the previous run, so a
fault is reported once, not every night until the next reboot), else ``xid_window``: ``boot`` (default:
everything since boot) or a span such as ``24h``. Events before the window are listed as "outside the
window" and decide nothing. An unreadable kernel log is an ERROR that says what refused it: a check that
cannot see the log must never pass for one that saw a clean log.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from diagnose.catalog.xid import REMEDIATION, lookup, occurrences, severity
from diagnose.catalog.xid import action as xid_action
from diagnose.config.profiles import no_gpu_reason, no_gpu_required
from diagnose.core.check import Check, Facts
from diagnose.core.model import CommandOutput, Outcome, strongest
from diagnose.core.units import counted
from diagnose.core.vars import Vars
from diagnose.parsers.gpu_query import GPU_QUERY, parse_gpu_query
from diagnose.parsers.kernel_log import KERNEL_LOG, parse_kernel_log, pci_key

_SPAN = re.compile(r"^(?P<n>\d+)\s*(?P<unit>[smhd])$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}

GRANT_ACCESS = (
    "Let the login read the kernel log: add it to the systemd-journal (or adm) group so `journalctl -k` "
    "shows kernel messages, or set `sysctl kernel.dmesg_restrict=0` (persist it in /etc/sysctl.d/) so "
    "`dmesg` works unprivileged, or run diagnose as root."
)


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    facts = parse_kernel_log(outputs["kernel_log"].stdout)
    query = outputs.get("gpu_query")
    gpus: list[dict[str, Any]] = []
    facts["gpu_map_error"] = None
    if query is not None and query.ok:
        try:
            gpus = [
                {"index": row.get("index"), "bus_id": row.get("pci.bus_id")}
                for row in query.parsed(parse_gpu_query)
            ]
        except ValueError as exc:
            facts["gpu_map_error"] = str(exc)
    else:
        facts["gpu_map_error"] = "nvidia-smi did not answer, so events are named by PCI address only"
    by_pci = {pci_key(g["bus_id"]): g for g in gpus if g["bus_id"]}
    for event in facts["events"] + facts["fallen_off_bus"]:
        gpu = by_pci.get(event["pci"])
        event["gpu"] = gpu["index"] if gpu else None
        event["bus_id"] = gpu["bus_id"] if gpu else None
    facts["gpus"] = gpus
    return facts


def window_start(facts: Facts, host_vars: Vars) -> tuple[float | None, str]:
    """The Unix time events count from (None: since boot) and how the message names the window."""
    since = host_vars.str("xid_since")
    if since:
        moment = datetime.fromisoformat(since.strip().replace("Z", "+00:00"))
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        return moment.timestamp(), f"since {moment.astimezone(timezone.utc):%Y-%m-%dT%H:%M:%SZ}"
    window = (host_vars.str("xid_window") or "boot").strip().lower()
    if window == "boot":
        return None, "since boot"
    span = _SPAN.match(window)
    if not span:
        raise ValueError(f"xid_window must be 'boot' or a span like 24h, got {window!r}")
    clock = facts.get("clock")
    if not clock:
        raise ValueError("xid_window needs the host's clock, which the kernel-log command did not print")
    seconds = int(span.group("n")) * _SECONDS[span.group("unit")]
    return clock["now"] - seconds, f"in the last {window}"


def _gpu_name(event: dict[str, Any]) -> str:
    if event.get("gpu") is not None:
        return f"GPU {event['gpu']} ({event['bus_id']})"
    return f"the GPU at PCI {event['pci']} (not listed by nvidia-smi)"


def _summaries(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per (GPU, Xid): count, last time, worst severity, last detail, and the action (the Xid's
    second one when it came back on that GPU: ``occurrences`` counts bursts, not lines)."""
    grouped: dict[tuple[str, int], dict[str, Any]] = {}
    moments: dict[tuple[str, int], list[float]] = {}
    for event in events:
        key = (event["pci"], event["xid"])
        row = lookup(event["xid"])
        level = severity(event["xid"], event.get("detail", ""))
        entry = grouped.get(key)
        if entry is None:
            entry = grouped[key] = {
                "gpu": event.get("gpu"),
                "bus_id": event.get("bus_id"),
                "pci": event["pci"],
                "xid": event["xid"],
                "name": row.name,
                "category": row.category,
                "severity": level,
                "count": 0,
            }
        entry["count"] += 1
        if event.get("epoch") is not None:
            moments.setdefault(key, []).append(event["epoch"])
        entry["last"] = event.get("time")
        entry["detail"] = event.get("detail", "")
        if level == "FAIL":
            entry["severity"] = "FAIL"
    for key, entry in grouped.items():
        entry["occurrences"] = occurrences(moments.get(key, []))
        entry["action"] = xid_action(entry["xid"], entry["detail"], entry["occurrences"])
    return sorted(grouped.values(), key=lambda e: (e["severity"] != "FAIL", str(e["gpu"]), e["xid"]))


def _in_window(event: dict[str, Any], start: float | None) -> bool:
    """An event without a usable time counts: it cannot be shown to be old."""
    return start is None or event.get("epoch") is None or event["epoch"] >= start


def unreadable_log(facts: Facts, host: str, what: str) -> Outcome | None:
    """The ERROR of a check that reads the shared kernel log when no source could be read: a check that
    cannot see the log must never pass for one that saw a clean log. None when the log was read."""
    if facts["source"] is not None:
        return None
    tried = [f"{r['source']}: {r['reason']}" for r in facts["refused"]]
    tried += [f"{tool} is not installed" for tool in facts["missing"]]
    return Outcome(
        "ERROR",
        f"the kernel log of {host} could not be read, so {what} cannot be judged "
        f"({'; '.join(tried) or 'no source answered'})",
        {"refused": facts["refused"], "missing": facts["missing"]},
        "a readable kernel log",
        remediation=GRANT_ACCESS,
    )


def judge(facts: Facts, host_vars: Vars) -> Outcome:
    host = host_vars.host or "this host"
    reason = no_gpu_reason(host_vars)
    if reason:
        return Outcome("SKIP", f"Xids not judged on {host}: {reason}", facts["source"], "no GPU")
    unreadable = unreadable_log(facts, host, "Xids")
    if unreadable:
        return unreadable
    try:
        start, window = window_start(facts, host_vars)
    except ValueError as exc:
        return Outcome("ERROR", f"Xid window on {host}: {exc}", None, "xid_window boot|<n>[smhd]")
    xid_pcis = {e["pci"] for e in facts["events"] if e["xid"] == 79}
    pseudo = [
        {**e, "xid": 79, "detail": "fallen off the bus (no Xid line)"}
        for e in facts["fallen_off_bus"]
        if e["pci"] not in xid_pcis
    ]
    events = facts["events"] + pseudo
    inside = [e for e in events if _in_window(e, start)]
    outside = [e for e in events if not _in_window(e, start)]
    summaries = _summaries(inside)
    observed: dict[str, Any] = {
        "source": facts["source"],
        "window": window,
        "events": summaries,
        "outside_window": _summaries(outside),
    }
    wanted = f"no hardware Xid {window}"
    old = f"; {counted(len(outside), 'older event')} outside the window" if outside else ""
    if not summaries:
        return Outcome(
            "PASS",
            f"no Xid in the kernel log of {host} {window} ({facts['source']}, {facts['nvrm_lines']} NVRM lines){old}",
            observed,
            wanted,
        )
    parts = [
        f"Xid {s['xid']} ({s['name']}) on {_gpu_name(s)}"
        + (f" x{s['count']}" if s["count"] > 1 else "")
        + (f", last {s['last']}" if s["last"] else "")
        for s in summaries
    ]
    worst = "FAIL" if any(s["severity"] == "FAIL" for s in summaries) else "WARN"
    categories = list(dict.fromkeys(s["category"] for s in summaries if s["severity"] == worst))
    remediation = " ".join(
        f"Xid {', '.join(str(s['xid']) for s in summaries if s['category'] == c)}: {REMEDIATION[c]}"
        for c in categories
    )
    note = (
        ""
        if worst == "FAIL"
        else " (errors a job can cause by itself; the GPU is suspect only if they repeat across jobs)"
    )
    return Outcome(
        worst,
        f"{host} {window}: " + "; ".join(parts) + note + old,
        observed,
        wanted,
        remediation=remediation,
        action=strongest([s["action"] for s in summaries if s["severity"] == worst]),
    )


CHECK = Check(
    id="gpu.xid",
    checklist="H",
    summary="no hardware Xid in the kernel log (journalctl -k, else dmesg) since boot or since the last run",
    commands=(
        KERNEL_LOG,
        replace(GPU_QUERY, required=False, auxiliary=True),
    ),
    parse=parse,
    judge=judge,
    remediation="Act on the Xid's category: application Xids point at the job, hardware Xids at the GPU.",
    no_hardware=no_gpu_required,
    action="reset_gpu",
)
