"""What ``scontrol show node -o NAME`` prints about one node: its state and the reason it is out of service.

``diagnose node-check --drain`` reads this before it touches a node, because the reason decides who owns a
drain: one that starts with ``diagnose:`` was set by node-check and may be lifted by it; any other is an
admin's (or Slurm's own, such as "Not responding" or "Prolog error") and is never lifted by us.

The one-line form is ``Key=value`` pairs separated by spaces. Values hold no spaces except ``OS=`` (the
kernel's version string) and ``Reason=``, which Slurm prints as ``Reason=<text> [<user>@<time>]``, where
the text is whatever the admin typed, spaces, ``=`` and brackets included. Fields may follow it in newer
Slurm (``Comment=``, ``Extra=``), so the reason ends at its ``[user@time]`` stamp, not at the line's end.
"""

from __future__ import annotations

import re
from typing import Any

from diagnose.core.check import ParseError

_PAIR = re.compile(r"(?:^|\s)([A-Za-z_][A-Za-z0-9_]*)=")
# The stamp Slurm appends to a reason: [user@2026-11-22T18:51:41]; the user may be a name or a uid.
_STAMP = re.compile(r"\s\[([^\]\s@]+)@(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\]")


def _pairs(text: str) -> dict[str, str]:
    """``Key=value`` pairs where a value runs to the next `` Key=`` (so ``OS=Linux 6.1 #1 SMP`` stays
    whole)."""
    starts = list(_PAIR.finditer(text))
    fields = {}
    for match, following in zip(starts, [*starts[1:], None], strict=True):
        end = following.start() if following else len(text)
        fields[match.group(1)] = text[match.end() : end].strip()
    return fields


def parse_scontrol_node(text: str) -> dict[str, Any]:
    """The first node of ``scontrol show node -o`` output → ``name``, ``state`` (as printed,
    ``IDLE+DRAIN``), ``base_state`` (``IDLE``), ``flags`` (``["DRAIN"]``), ``drain`` (the DRAIN flag is
    set: draining or drained), ``reason`` (None when the node has none), ``reason_user``, ``reason_time``
    and every other field as printed, under ``fields``."""
    line = next((line for line in text.splitlines() if line.startswith("NodeName=")), None)
    if line is None:
        found = text.strip().splitlines()[0][:120] if text.strip() else "nothing"
        raise ParseError(f"scontrol show node printed no NodeName= line (got {found!r})")
    reason: str | None = None
    user = time = None
    at = line.find(" Reason=")
    if at >= 0:
        rest = line[at + len(" Reason=") :]
        stamp = _STAMP.search(rest)
        if stamp:
            reason, user, time = rest[: stamp.start()], stamp.group(1), stamp.group(2)
            line = line[:at] + " " + rest[stamp.end() :]
        else:
            reason, line = rest, line[:at]
    fields = _pairs(line)
    state = fields.get("State")
    if not state:
        raise ParseError(f"scontrol show node: no State= for node {fields.get('NodeName')!r}")
    base, *flags = state.split("+")
    return {
        "name": fields["NodeName"],
        "state": state,
        "base_state": base,
        "flags": flags,
        "drain": "DRAIN" in flags or base in ("DRAIN", "DRAINED", "DRAINING"),
        "reason": reason.strip() if reason is not None and reason.strip() not in ("", "(null)") else None,
        "reason_user": user,
        "reason_time": time,
        "fields": fields,
    }
