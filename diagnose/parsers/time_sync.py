"""Clock synchronisation as chrony, ntpd or systemd report it.

One script asks every time tool the host has, each under a ``## <command>`` header, so the evidence shows
all of them: ``chronyc -n tracking`` (``Leap status`` says whether chronyd is synchronised, ``System time``
how far the clock is from NTP time right now), ``ntpq -pn`` (the peer marked ``*`` is ntpd's system peer;
its offset column is in milliseconds) and ``timedatectl show`` (``NTPSynchronized=yes``: the kernel's clock
is marked synchronised by whichever daemon runs; no offset). A tool that is installed but whose daemon does
not answer (``506 Cannot talk to daemon``, ``Connection refused``, no systemd as PID 1) is recorded as not
answering, with its words.
"""

from __future__ import annotations

import re
from typing import Any

from diagnose.core.check import ParseError

TIME_SYNC_SCRIPT = (
    "for c in 'chronyc -n tracking' 'ntpq -pn' 'timedatectl show'; do "
    'command -v "${c%% *}" >/dev/null 2>&1 || continue; echo "## $c"; $c 2>&1; done; true'
)

#: The Debian package that brings each tool, for the message when none is installed.
PACKAGES = {"chronyc": "chrony", "ntpq": "ntpsec-ntpq", "timedatectl": "systemd"}

_SECTION = re.compile(r"^## (?P<command>.+)$")
_CHRONY_FIELD = re.compile(r"^(?P<key>[A-Za-z][A-Za-z ()]*?)\s*:\s*(?P<value>.*)$")
_SYSTEM_TIME = re.compile(r"(?P<seconds>[0-9.]+) seconds (?P<side>fast|slow) of NTP time")
#: How timedatectl names "an NTP client is enabled" across systemd versions (show, 239+ status, 219, 237).
_SERVICE_KEYS = ("NTP", "NTP service", "NTP enabled", "systemd-timesyncd.service active", "Network time on")
_NTPQ_PEER = re.compile(r"^(?P<tally>[ *+#ox.-])(?P<remote>\S+)\s+(?P<rest>.+)$")


def split_sections(text: str) -> dict[str, str]:
    """{program name: its output} of TIME_SYNC_SCRIPT, in the order the script ran them."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        header = _SECTION.match(line)
        if header:
            current = sections.setdefault(header.group("command").split()[0], [])
        elif current is not None:
            current.append(line)
    return {name: "\n".join(lines) for name, lines in sections.items()}


def parse_chronyc_tracking(text: str) -> dict[str, Any]:
    """Facts: ``answered``, ``synchronised`` (Leap status other than "Not synchronised"), ``offset_ms``
    (System time, positive when the clock is fast), ``reference`` and ``leap_status``; ``error`` holds the
    words of a chronyc that reached no daemon."""
    fields = {}
    for line in text.splitlines():
        match = _CHRONY_FIELD.match(line.strip())
        if match:
            fields[match.group("key")] = match.group("value").strip()
    leap = fields.get("Leap status")
    if leap is None:
        return {"answered": False, "error": text.strip()[:200] or "no output"}
    offset = _SYSTEM_TIME.search(fields.get("System time", ""))
    offset_ms = None
    if offset:
        sign = 1 if offset.group("side") == "fast" else -1
        offset_ms = round(sign * float(offset.group("seconds")) * 1000, 6)
    return {
        "answered": True,
        "synchronised": leap.lower() != "not synchronised",
        "leap_status": leap,
        "offset_ms": offset_ms,
        "reference": fields.get("Reference ID"),
    }


def parse_ntpq_peers(text: str) -> dict[str, Any]:
    """Facts: ``answered`` (a peer table came back), ``synchronised`` (a ``*`` system peer),
    ``offset_ms`` (that peer's offset) and ``reference`` (its address)."""
    lines = text.splitlines()
    header = next((i for i, line in enumerate(lines) if line.split()[:1] == ["remote"]), None)
    if header is None:
        return {"answered": False, "error": text.strip()[:200] or "no output"}
    for line in lines[header + 1 :]:
        match = _NTPQ_PEER.match(line)
        if not match or match.group("tally") != "*":
            continue
        columns = match.group("rest").split()
        if len(columns) < 8:
            raise ParseError(f"ntpq peer line has {len(columns)} columns after the address: {line!r}")
        return {
            "answered": True,
            "synchronised": True,
            "offset_ms": float(columns[-2]),
            "reference": match.group("remote"),
        }
    return {"answered": True, "synchronised": False, "offset_ms": None, "reference": None}


def parse_timedatectl(text: str) -> dict[str, Any]:
    """Facts: ``answered``, ``synchronised`` (``NTPSynchronized=yes``, or ``System clock synchronized: yes``
    / ``NTP synchronized: yes`` from ``timedatectl status``) and ``ntp_service`` (whether an NTP client is
    enabled, in that version's words)."""
    values = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if not sep:
            key, sep, value = line.strip().partition(":")
        if sep:
            values[key.strip()] = value.strip()
    synced = values.get(
        "NTPSynchronized", values.get("System clock synchronized", values.get("NTP synchronized"))
    )
    if synced is None:
        return {"answered": False, "error": text.strip()[:200] or "no output"}
    service = next(
        (values[k] for k in _SERVICE_KEYS if k in values),
        None,
    )
    return {"answered": True, "synchronised": synced == "yes", "ntp_service": service}


_PARSERS = {"chronyc": parse_chronyc_tracking, "ntpq": parse_ntpq_peers, "timedatectl": parse_timedatectl}


def parse_time_sync(text: str) -> dict[str, Any]:
    """{"sources": {tool: facts}} for every tool TIME_SYNC_SCRIPT found, in the order it asked them."""
    return {
        "sources": {
            name: _PARSERS[name](body) for name, body in split_sections(text).items() if name in _PARSERS
        }
    }
