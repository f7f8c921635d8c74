"""The NVRM lines of the kernel log, as printed by gpu.xid's command, turned into Xid events.

The command (see ``KERNEL_LOG_SCRIPT``) tries ``journalctl -k -b`` (everything since boot, kept even when
the ring buffer has wrapped), then ``dmesg --time-format iso``, then plain ``dmesg`` (busybox and old
util-linux know no ``--time-format``). A source that cannot be read is never silent: an unprivileged
``journalctl`` either says "No journal files were opened due to insufficient permissions" or shows the
user's own journal with no kernel line at all, and ``dmesg`` under ``kernel.dmesg_restrict=1`` says
"read kernel buffer failed: Operation not permitted". Every line a source prints that is not a log line
(log lines start with a date, ``[`` or ``<``) is that source's complaint, and a source with no log line
at all is reported as refused, so an unreadable log can never pass for a clean one. Only the lines some
check reads leave the host (``KEPT``: the GPU driver's NVRM lines for gpu.xid, the NVSwitch driver's SXid
lines for gpu.sxid, mlx5_core's link down/up and port module events and the IB core's port state lines for
ib.flaps), which keeps the evidence small on a busy machine; the three checks share the one command, so the
log is read once per host.

Header lines, all starting with ``# `` and printed before the log lines:
``# clock <epoch> <uptime s>`` (to place ``[secs]`` stamps in time), ``# missing <tool>``,
``# refused <source>: <what it said>``, and ``# source <journalctl|dmesg-iso|dmesg>``.

The parser also reads kernel log lines pasted in other shapes (``dmesg -T``, ``dmesg --decode``, syslog),
so real outputs from tickets can be used as cases.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any

from diagnose.core.check import Command

#: The log lines the checks read (an awk ERE): everything else stays on the host.
KEPT = "NVRM|SXid|mlx5_core.*(Link (down|up)|Port module event)|: Port: [0-9]+ Link [A-Z]"

# awk keeps the log lines' count and the kept lines; anything else a tool printed is its complaint.
_AWK = (
    "/^([0-9]|\\[|<)/{n++;if(/" + KEPT + '/)l[++m]=$0;next}{e=e (e?"; ":"") $0}'
    'END{if(n){print "# source " s;for(i=1;i<=m;i++)print l[i];exit 0}'
    'print "# refused " s ": " (e?e:"no kernel messages visible");exit 3}'
)

KERNEL_LOG_SCRIPT = (
    'read -r up _ </proc/uptime; echo "# clock $(date +%s) $up"; '
    f"a='{_AWK}'; "
    "if command -v journalctl >/dev/null 2>&1; then "
    'journalctl -k -b -q -o short-iso --no-pager 2>&1 | awk -v s=journalctl "$a" && exit 0; '
    'else echo "# missing journalctl"; fi; '
    "if command -v dmesg >/dev/null 2>&1; then "
    'dmesg --time-format iso 2>&1 | awk -v s=dmesg-iso "$a" && exit 0; '
    'dmesg 2>&1 | awk -v s=dmesg "$a" && exit 0; '
    'else echo "# missing dmesg"; fi; exit 0'
)

#: The one kernel-log command of the host batch: gpu.xid, gpu.sxid and ib.flaps name it by this key.
KERNEL_LOG = Command("kernel_log", KERNEL_LOG_SCRIPT, timeout=20)

_XID = re.compile(
    r"NVRM: Xid \(PCI:(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-9A-Fa-f])?[^)]*\):"
    r"\s*(?P<xid>\d+),\s*(?P<rest>.*)$"
)
_PID = re.compile(r"^pid=(?P<pid>'<unknown>'|<unknown>|<n/a>|\d+),\s*(?:name=(?P<name>[^,]*),\s*)?")
_FALLEN = re.compile(
    r"NVRM: (?:GPU |The NVIDIA GPU )(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-9A-Fa-f])?"
)
_ISO = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:[.,](?P<frac>\d+))?(?P<tz>Z|[+-]\d{2}:?\d{2})?"
)
_SECS = re.compile(r"\[\s*(?P<secs>\d+\.\d+)\]")
_CTIME = re.compile(r"\[(?P<ctime>\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]")
_SYSLOG = re.compile(r"^(?P<stamp>\w{3} +\d+ \d\d:\d\d:\d\d) ")


def pci_key(address: str) -> str:
    """``0000:3b:00`` for both spellings: Xid lines print ``0000:3b:00``, nvidia-smi ``00000000:3B:00.0``."""
    parts = address.strip().lower().split(":")
    if len(parts) < 3:
        return address.strip().lower()
    domain, bus, device = parts[-3], parts[-2], parts[-1].split(".")[0]
    return f"{domain[-4:].zfill(4)}:{bus}:{device}"


def event_time(prefix: str, clock: dict[str, float] | None) -> tuple[str | None, float | None]:
    """The event's time as printed, and as a Unix time where the prefix (or the clock line) allows it."""
    iso = _ISO.search(prefix)
    if iso:
        text = iso.group(0)
        tz = iso.group("tz")
        if not tz:
            return text, None
        offset = "+00:00" if tz == "Z" else (tz if ":" in tz else f"{tz[:3]}:{tz[3:]}")
        frac = (iso.group("frac") or "0")[:6].ljust(6, "0")
        moment = datetime.fromisoformat(f"{iso.group('date')}.{frac}{offset}")
        return text, moment.timestamp()
    ctime = _CTIME.search(prefix)
    if ctime:
        return ctime.group("ctime"), None  # dmesg -T: local time, zone unknown
    secs = _SECS.search(prefix)
    syslog = _SYSLOG.search(prefix)
    if secs:
        since_boot = float(secs.group("secs"))
        if clock:
            epoch = clock["now"] - clock["uptime"] + since_boot
            return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), epoch
        return (syslog.group("stamp") if syslog else f"{since_boot:.0f} s after boot"), None
    return (syslog.group("stamp") if syslog else None), None


def read_header(text: str) -> dict[str, Any]:
    """The command's ``# `` header lines: ``source`` (None when no source could be read, or for a pasted
    log without header), ``refused`` [{source, reason}], ``missing`` [tool], ``clock`` {now, uptime} | None."""
    facts: dict[str, Any] = {"source": None, "refused": [], "missing": [], "clock": None}
    for line in text.splitlines():
        if line.startswith("# "):
            _header(line, facts)
    return facts


def _header(line: str, facts: dict[str, Any]) -> None:
    body = line[2:].strip()
    word, _, rest = body.partition(" ")
    if word == "clock":
        now, _, uptime = rest.partition(" ")
        try:
            facts["clock"] = {"now": float(now), "uptime": float(uptime)}
        except ValueError:
            facts["clock"] = None
    elif word == "missing":
        facts["missing"].append(rest.strip())
    elif word == "refused":
        source, _, reason = rest.partition(": ")
        facts["refused"].append({"source": source.strip(), "reason": reason.strip()})
    elif word == "source":
        facts["source"] = rest.strip()


def _process(pid: re.Match[str] | None) -> str | None:
    name = (pid.group("name") or "").strip() if pid else ""
    return name.strip("'") or None


def parse_kernel_log(text: str) -> dict[str, Any]:
    """Facts: ``source`` (None when no source could be read, or for a pasted log without header),
    ``refused`` [{source, reason}], ``missing`` [tool], ``clock`` {now, uptime} | None, ``nvrm_lines``,
    ``events`` [{xid, pci, time, epoch, pid, process, detail}], ``fallen_off_bus`` [{pci, time, epoch}]
    (the "fallen off the bus" messages some drivers print without an Xid line)."""
    facts: dict[str, Any] = {**read_header(text), "nvrm_lines": 0, "events": [], "fallen_off_bus": []}
    lines = text.splitlines()
    clock = facts["clock"]
    for line in lines:
        at = line.find("NVRM:")
        if at < 0 or line.startswith("# "):
            continue
        facts["nvrm_lines"] += 1
        when, epoch = event_time(line[:at], clock)
        xid = _XID.search(line)
        if xid:
            rest = xid.group("rest").strip()
            pid = _PID.match(rest)
            detail = rest[pid.end() :] if pid else rest
            facts["events"].append(
                {
                    "xid": int(xid.group("xid")),
                    "pci": pci_key(xid.group("pci")),
                    "time": when,
                    "epoch": epoch,
                    "pid": pid.group("pid").strip("'") if pid else None,
                    "process": _process(pid),
                    "detail": detail.strip(),
                }
            )
            continue
        fallen = _FALLEN.search(line)
        if fallen and ("fallen off the bus" in line or line.rstrip().endswith(fallen.group(0))):
            facts["fallen_off_bus"].append(
                {"pci": pci_key(fallen.group("pci")), "time": when, "epoch": epoch}
            )
    facts["fallen_off_bus"] = _confirmed_fallen(facts["fallen_off_bus"], lines)
    return facts


def _confirmed_fallen(candidates: list[dict[str, Any]], lines: list[str]) -> list[dict[str, Any]]:
    """Keep one entry per GPU that the log says fell off the bus.

    Newer drivers split the message over lines ("NVRM: The NVIDIA GPU 0000:b3:00.0" … "NVRM: fallen off
    the bus and is not responding to commands."), so a bare "The NVIDIA GPU <addr>" line counts only when
    the log says "fallen off the bus" somewhere.
    """
    said = any("fallen off the bus" in line for line in lines)
    seen: dict[str, dict[str, Any]] = {}
    for entry in candidates:
        if said and entry["pci"] not in seen:
            seen[entry["pci"]] = entry
    return list(seen.values())
