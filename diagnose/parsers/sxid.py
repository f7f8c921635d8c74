"""The NVSwitch driver's SXid lines of the kernel log (printed by the shared ``KERNEL_LOG`` command).

One fault is usually several lines with the same switch and number: the event itself, which says whether it
was fatal and which link (``nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault
Up``), then the engine it came from (``…: 20034, Severity 1 Engine instance 60 Sub-engine instance 00``) and
raw register words (``…: 20034, Data {0x10000000, …}``). The last two are kept as ``continuation`` lines:
they belong to an event and are not events of their own. Some drivers print only those (a host-side
``10002, Severity 5 …``): an SXid seen only in continuation lines still counts once.
"""

from __future__ import annotations

import re
from typing import Any

from diagnose.parsers.kernel_log import event_time, pci_key, read_header

_SXID = re.compile(
    r"(?P<switch>nvidia-nvswitch\d*): SXid \(PCI:(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})"
    r"(?:\.[0-9A-Fa-f])?\):\s*(?P<sxid>\d+),\s*(?P<rest>.*?)\s*$"
)
_LINK = re.compile(r"\bLink (\d+)\b")
_CONTINUATION = re.compile(r"^(?:Severity \d+|Data \{)")


def _said(rest: str) -> str | None:
    """``fatal`` / ``non_fatal`` when the line says it first thing, else None."""
    word = rest.split(",", 1)[0].strip().lower().replace("-", "").replace(" ", "")
    return {"fatal": "fatal", "nonfatal": "non_fatal"}.get(word)


def parse_sxid(text: str) -> dict[str, Any]:
    """Facts: the command header (``source``, ``refused``, ``missing``, ``clock``), ``sxid_lines`` and
    ``events`` [{switch, pci, sxid, said, link, detail, continuation, time, epoch}] in log order."""
    facts: dict[str, Any] = {**read_header(text), "sxid_lines": 0, "events": []}
    for line in text.splitlines():
        if line.startswith("# "):
            continue
        match = _SXID.search(line)
        if not match:
            continue
        facts["sxid_lines"] += 1
        rest = match.group("rest")
        said = _said(rest)
        link = _LINK.search(rest)
        when, epoch = event_time(line[: match.start()], facts["clock"])
        facts["events"].append(
            {
                "switch": match.group("switch"),
                "pci": pci_key(match.group("pci")),
                "sxid": int(match.group("sxid")),
                "said": said,
                "link": int(link.group(1)) if link else None,
                "detail": rest.split(",", 1)[1].strip() if said and "," in rest else rest,
                "continuation": said is None and bool(_CONTINUATION.match(rest)),
                "time": when,
                "epoch": epoch,
            }
        )
    return facts
