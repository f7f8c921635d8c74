"""gpu.sxid — the NVSwitch driver logged no fatal SXid in the window (since boot, or since the last run).

An SXid is an NVSwitch's own fault report (``nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Fatal, Link 63
LTSSM Fault Up``). On an HGX board every GPU pair talks through the NVSwitches, so a fatal SXid takes NVLink
away from the whole node until the GPUs and switches are reset. What each number means, and whether it is
fatal, is data in :mod:`diagnose.catalog.sxid`; the driver's own "Fatal"/"Non-fatal" word wins. A fatal SXid
is a FAIL, a non-fatal one a WARN.

The kernel log is read once per host by the command gpu.xid and ib.flaps also read (``KERNEL_LOG``), and the
window is gpu.xid's: ``xid_since`` (the nightly sets it to the previous run), else ``xid_window`` (``boot``
or a span such as ``24h``). A host without NVSwitches (PCIe GPUs, a VM with one GPU) simply logs none, so
the check passes there; an unreadable log is an ERROR, as for gpu.xid.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from diagnose.catalog.sxid import REMEDIATION, kind, lookup, severity
from diagnose.catalog.sxid import action as sxid_action
from diagnose.checks.gpu_xid import unreadable_log, window_start
from diagnose.config.profiles import no_gpu_reason, no_gpu_required
from diagnose.core.check import Check, Facts
from diagnose.core.model import CommandOutput, Outcome, strongest
from diagnose.core.units import counted
from diagnose.core.vars import Vars
from diagnose.parsers.kernel_log import KERNEL_LOG
from diagnose.parsers.sxid import parse_sxid


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    return parse_sxid(outputs["kernel_log"].stdout)


def _in_window(event: dict[str, Any], start: float | None) -> bool:
    """An event without a usable time counts: it cannot be shown to be old."""
    return start is None or event.get("epoch") is None or event["epoch"] >= start


def summaries(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per (switch, SXid): links, count of event lines, last time, worst severity, last detail and
    the action (the group's second one when the SXid came back on a link, or more than once without one).

    Continuation lines (engine, register data) belong to an event and are not counted, except for an SXid
    that has nothing else: it counts once.
    """
    grouped: dict[tuple[str, int], dict[str, Any]] = {}
    for event in events:
        key = (event["pci"], event["sxid"])
        entry = grouped.get(key)
        if entry is None:
            row = lookup(event["sxid"])
            entry = grouped[key] = {
                "switch": event["switch"],
                "pci": event["pci"],
                "sxid": event["sxid"],
                "name": row.name,
                "severity": severity(event["sxid"], None),
                "kind": kind(event["sxid"], None),
                "links": [],
                "count": 0,
                "said": None,
            }
        entry["last"] = event.get("time")
        if event["continuation"]:
            continue
        entry["count"] += 1
        entry["detail"] = event["detail"]
        if event["link"] is not None and event["link"] not in entry["links"]:
            entry["links"].append(event["link"])
        if event["said"] and entry["said"] != "fatal":
            entry["said"] = event["said"]
            entry["severity"] = severity(event["sxid"], event["said"])
            entry["kind"] = kind(event["sxid"], event["said"])
    for entry in grouped.values():
        entry["count"] = max(entry["count"], 1)
        entry.setdefault("detail", "")
        # the same link reporting again is the fault coming back; one line per link is one fault's burst
        entry["action"] = sxid_action(entry["kind"], 2 if entry["count"] > max(len(entry["links"]), 1) else 1)
    return sorted(grouped.values(), key=lambda e: (e["severity"] != "FAIL", e["switch"], e["sxid"]))


def _describe(entry: dict[str, Any]) -> str:
    links = f" link{'s' if len(entry['links']) > 1 else ''} {', '.join(map(str, entry['links']))}"
    fatal = {"fatal": "fatal", "non_fatal": "non-fatal"}.get(entry["said"] or "", "")
    return (
        f"SXid {entry['sxid']} ({entry['name']}{', ' + fatal if fatal else ''}) on {entry['switch']} "
        f"(PCI {entry['pci']})"
        + (links if entry["links"] else "")
        + (f" x{entry['count']}" if entry["count"] > 1 else "")
        + (f", last {entry['last']}" if entry["last"] else "")
    )


def judge(facts: Facts, host_vars: Vars) -> Outcome:
    host = host_vars.host or "this host"
    reason = no_gpu_reason(host_vars)
    if reason:
        return Outcome("SKIP", f"SXids not judged on {host}: {reason}", facts["source"], "no GPU")
    unreadable = unreadable_log(facts, host, "SXids")
    if unreadable:
        return unreadable
    try:
        start, window = window_start(facts, host_vars)
    except ValueError as exc:
        return Outcome("ERROR", f"SXid window on {host}: {exc}", None, "xid_window boot|<n>[smhd]")
    inside = summaries([e for e in facts["events"] if _in_window(e, start)])
    outside = summaries([e for e in facts["events"] if not _in_window(e, start)])
    observed: dict[str, Any] = {
        "source": facts["source"],
        "window": window,
        "events": inside,
        "outside_window": outside,
    }
    wanted = f"no fatal NVSwitch SXid {window}"
    old = f"; {counted(len(outside), 'older SXid')} outside the window" if outside else ""
    if not inside:
        return Outcome(
            "PASS",
            f"no NVSwitch SXid in the kernel log of {host} {window} ({facts['source']}){old}",
            observed,
            wanted,
        )
    worst = "FAIL" if any(s["severity"] == "FAIL" for s in inside) else "WARN"
    kinds = list(dict.fromkeys(s["kind"] for s in inside if s["severity"] == worst))
    remediation = " ".join(
        f"SXid {', '.join(str(s['sxid']) for s in inside if s['kind'] == k)}: {REMEDIATION[k]}" for k in kinds
    )
    note = "" if worst == "FAIL" else " (non-fatal: the fabric kept working)"
    return Outcome(
        worst,
        f"{host} {window}: " + "; ".join(_describe(s) for s in inside) + note + old,
        observed,
        wanted,
        remediation=remediation,
        action=strongest([s["action"] for s in inside if s["severity"] == worst]),
    )


CHECK = Check(
    id="gpu.sxid",
    checklist="H",
    summary="no fatal NVSwitch SXid in the kernel log since boot or since the last run (non-fatal: WARN)",
    commands=(KERNEL_LOG,),
    parse=parse,
    judge=judge,
    remediation="Act on the SXid's group: a fatal one needs the node's GPUs and NVSwitches reset (or a reboot), "
    "a non-fatal one only watching.",
    no_hardware=no_gpu_required,
    action="reset_gpu",
    warn_action="none",
)
