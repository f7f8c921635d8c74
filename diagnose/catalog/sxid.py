"""What each NVSwitch SXid number means for an acceptance verdict: its name, its kind and a severity.

An SXid is the NVSwitch driver's report of a switch fault (``nvidia-nvswitch3: SXid (PCI:0000:05:00.0):
12028, Non-fatal, Link 32 egress non-posted PRIV error``). The numbers and names follow the SXid appendix of
NVIDIA's Fabric Manager User Guide (DU-09883-001, v1.3), which sorts them into four groups; the severities
are this tool's reading of those groups:

* ``non_fatal``: the switch corrected or contained it (a single-bit ECC error, a replayed packet). WARN: the
  fabric keeps working; a steady stream on one link points at that link.
* ``fatal``: the port stops, and with it every NVLink path through it, until the GPUs and NVSwitches are
  reset. FAIL.
* ``always_fatal``: the whole fabric of the node is lost until the host restarts. FAIL.
* ``notable``: host-side events (a privileged register access that failed or timed out, an interrupt the
  driver could not handle, a thermal event); each has its own severity.

Most driver lines also say "Fatal" or "Non-fatal" themselves; that word wins over the table (see
:func:`severity`). Each group also says what the operator does first (its action, docs/actions.md) and what
when the same SXid comes back on the same switch within the window (:data:`ACTION`): a non-fatal one needs
nothing, a fatal one a reset of the GPUs and switches (a service case when it recurs), an always-fatal one
a reboot. Data, not code: adding an SXid is adding a row.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SXid:
    number: int
    name: str
    kind: str  # a key of REMEDIATION
    severity: str  # "FAIL" or "WARN"


REMEDIATION: dict[str, str] = {
    "non_fatal": "The NVSwitch corrected or contained the error and the fabric kept working: nothing to do for "
    "one event. The same SXid repeating on one link between runs points at that link (GPU or NVSwitch "
    "baseboard): watch it with `nvidia-smi nvlink -e` and the fabric manager log.",
    "fatal": "An NVSwitch port stopped and every NVLink path through it with it: drain the node, stop its jobs, "
    "reset all GPUs and NVSwitches together (`nvidia-smi -r` with the fabric manager stopped, or reboot), "
    "then read the fabric manager log (/var/log/fabricmanager.log). The same SXid again on the same link "
    "is a baseboard service case.",
    "always_fatal": "The node's whole NVSwitch fabric is lost: drain the node and reboot it (a GPU reset is not "
    "enough). If it recurs, collect nvidia-bug-report.sh and the fabric manager log for the vendor.",
    "host": "The NVSwitch driver could not talk to the switch (a privileged access failed or timed out, an "
    "interrupt it could not handle): drain the node, reset all GPUs and NVSwitches or reboot, and check the "
    "driver and fabric manager versions match.",
    "thermal": "The NVSwitch reported a thermal event: check the node's cooling (fans, airflow, inlet "
    "temperature) before it throttles or shuts down the fabric.",
}

#: (first, when it recurs on the same switch) per group, from diagnose.core.model.ACTIONS.
ACTION: dict[str, tuple[str, str]] = {
    "non_fatal": ("none", "none"),
    "fatal": ("reset_gpu", "contact_support"),
    "always_fatal": ("reboot", "contact_support"),
    "host": ("reset_gpu", "reboot"),
    "thermal": ("contact_support", "contact_support"),
}

_NON_FATAL = (
    (11004, "Ingress invalid ACL"),
    (11012, "Single bit ECC error"),
    (11021, "Single bit ECC error"),
    (11022, "Single bit ECC error"),
    (11023, "Single bit ECC error"),
    (12021, "Single bit ECC error"),
    (12023, "Single bit ECC error"),
    (12028, "egress non-posted PRIV error"),
    (15008, "Single bit ECC error"),
    (15011, "Single bit ECC error"),
    (19049, "Single bit ECC error"),
    (19055, "Single bit ECC error"),
    (19057, "Single bit ECC error"),
    (19059, "Single bit ECC error"),
    (19062, "Single bit ECC error"),
    (19065, "Single bit ECC error"),
    (19068, "Single bit ECC error"),
    (19071, "Single bit ECC error"),
    (19084, "AN1 Heartbeat Timeout Error"),
    (20001, "TX Replay Error"),
    (20009, "RX Short Error Rate"),
    (20012, "Broken/inconsistent connection"),
    (22013, "Minion Link DLREQ interrupt"),
    (24001, "Single bit ECC error"),
    (24002, "Single bit ECC error"),
    (24003, "Single bit ECC error"),
)

_FATAL = (
    (11001, "ingress invalid command"),
    (11009, "ingress invalid VCSet"),
    (11013, "ingress header DBE"),
    (11018, "ingress RID DBE"),
    (11019, "ingress RLAN DBE"),
    (11020, "ingress control parity"),
    (12001, "egress crossbar overflow"),
    (12002, "egress packet route"),
    (12022, "egress input ECC DBE error"),
    (12024, "egress output ECC DBE error"),
    (12025, "egress credit overflow"),
    (12026, "egress destination request ID error"),
    (12027, "egress destination response ID error"),
    (12030, "egress control parity error"),
    (12031, "egress credit parity error"),
    (12032, "egress flit type mismatch"),
    (14017, "TS ATO timeout"),
    (15001, "route buffer over/underflow"),
    (15006, "route transdone over/underflow"),
    (15009, "route GLT DBE"),
    (15010, "route parity"),
    (15012, "route incoming DBE"),
    (15013, "route credit parity"),
    (19047, "NCISOC HDR ECC DBE Error"),
    (19048, "NCISOC DAT ECC DBE Error"),
    (19054, "HDR RAM ECC DBE Error"),
    (19056, "DAT0 RAM ECC DBE Error"),
    (19058, "DAT1 RAM ECC DBE Error"),
    (19060, "CREQ RAM HDR ECC DBE Error"),
    (19061, "CREQ RAM DAT ECC DBE Error"),
    (19063, "Response RAM HDR ECC DBE Error"),
    (19064, "Response RAM DAT ECC DBE Error"),
    (19066, "COM RAM HDR ECC DBE Error"),
    (19067, "COM RAM DAT ECC DBE Error"),
    (19069, "RSP1 RAM HDR ECC DBE Error"),
    (19070, "RSP1 RAM DAT ECC DBE Error"),
    (20034, "LTSSM Fault Up"),
    (22012, "Minion Link NA interrupt"),
    (24004, "sourcetrack TCEN0 crumbstore DBE"),
    (24005, "sourcetrack TCEN0 TD crumbstore DBE"),
    (24006, "sourcetrack TCEN1 crumbstore DBE"),
    (24007, "sourcetrack timeout error"),
)

_ALWAYS_FATAL = (
    (12020, "egress sequence ID error"),
    (22003, "Minion Halt"),
    (22011, "Minion exterror"),
    (23001, "ingress SRC-VC buffer overflow"),
    (23002, "ingress SRC-VC buffer underflow"),
    (23003, "egress DST-VC credit overflow"),
    (23004, "egress DST-VC credit underflow"),
    (23005, "ingress packet burst error"),
    (23006, "ingress packet sticky error"),
    (23007, "possible bubbles at ingress"),
    (23008, "ingress packet invalid dst error"),
    (23009, "ingress packet parity error"),
    (23010, "ingress SRC-VC buffer overflow"),
    (23011, "ingress SRC-VC buffer underflow"),
    (23012, "egress DST-VC credit overflow"),
    (23013, "egress DST-VC credit underflow"),
    (23014, "ingress packet burst error"),
    (23015, "ingress packet sticky error"),
    (23016, "possible bubbles at ingress"),
    (23017, "ingress credit parity error"),
)

_NOTABLE = (
    (10001, "Host privileged register access error", "host", "FAIL"),
    (10002, "Host privileged register access timeout", "host", "FAIL"),
    (10003, "Host unhandled interrupt", "always_fatal", "FAIL"),
    (10004, "Host thermal event start", "thermal", "WARN"),
    (10005, "Host thermal event end", "thermal", "WARN"),
)

CATALOG: dict[int, SXid] = {
    **{n: SXid(n, name, "non_fatal", "WARN") for n, name in _NON_FATAL},
    **{n: SXid(n, name, "fatal", "FAIL") for n, name in _FATAL},
    **{n: SXid(n, name, "always_fatal", "FAIL") for n, name in _ALWAYS_FATAL},
    **{n: SXid(n, name, kind, sev) for n, name, kind, sev in _NOTABLE},
}


def lookup(number: int) -> SXid:
    """The catalog row, or a WARN row for an SXid this table does not know (newer switches add numbers)."""
    return CATALOG.get(number) or SXid(number, "not in this tool's SXid table", "non_fatal", "WARN")


def severity(number: int, said: str | None) -> str:
    """The event's severity: what the driver's line says ("Fatal" / "Non-fatal") when it says it, else the
    catalog's. A fatal event of a number the table calls non-fatal is still fatal: the driver saw it."""
    if said == "fatal":
        return "FAIL"
    if said == "non_fatal":
        return "WARN"
    return lookup(number).severity


def kind(number: int, said: str | None) -> str:
    """The remediation key: the catalog's group, moved to ``fatal`` when the line says fatal and the table
    does not know it as such."""
    row = lookup(number)
    if said == "fatal" and row.severity != "FAIL":
        return "fatal"
    if said == "non_fatal" and row.severity == "FAIL":
        return "non_fatal"
    return row.kind


def action(group: str, count: int = 1) -> str:
    """What the operator does first about ``count`` events of one SXid group on one switch."""
    first, again = ACTION[group]
    return again if count > 1 else first
