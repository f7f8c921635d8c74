"""A failed torchrun's stderr: which rank failed first, and that rank's own exception.

torchrun ends a failed job with a banner (``Root Cause (first observed failure):`` then ``rank : 1
(local_rank: 1)``, ``exitcode``, ``error_file`` and ``traceback``). Unless the program wraps its entry point
in torch's ``@record``, ``error_file`` is ``<N/A>`` and ``traceback`` only says where to read about it, so
the banner's last lines name no cause at all. The ranks' own tracebacks come earlier in the same stream
(torchrun passes their stderr through): since torch 2.2 every line of an uncaught exception after
``init_process_group`` carries a ``[rankN]:`` prefix. The cause is the rank whose traceback the stream shows
first: the others' are usually its consequences ("Connection closed by peer"), and the banner's "first
observed failure" is not to be trusted for it (torchrun notices the exits in whatever order it polls them:
on this machine it named the peer that failed second as often as the one that failed first). A traceback
printed before the prefix exists (a rank that fails before joining the group) has none, and is the cause
only when no rank's traceback is tagged.
"""

from __future__ import annotations

import re
from typing import Any

_TAGGED = re.compile(r"^\[rank(?P<rank>\d+)\]:\s?(?P<text>.*)$")
_FIELD = re.compile(r"^\s+(?P<key>time|host|rank|exitcode|error_file|traceback)\s*:\s*(?P<value>.*?)\s*$")
_RANK = re.compile(r"^(?P<rank>\d+)(?: \(local_rank: (?P<local>\d+)\))?")
_EXIT = re.compile(r"^(?P<code>-?\d+)")
#: torchrun's own exception, which wraps the ranks' failures and is never a cause.
_AGENT = "torch.distributed.elastic.multiprocessing.errors.ChildFailedError"


def _exception(lines: list[str]) -> str | None:
    """The exception line of the last traceback in ``lines`` that is not torchrun's own: the first
    unindented line after the frames (a CUDA error goes on over more lines, whose last one is advice)."""
    found = None
    inside = False
    for line in lines:
        if line.startswith("Traceback (most recent call last):"):
            inside = True
        elif inside and line.strip() and not line[:1].isspace():
            inside = False
            if not line.startswith(_AGENT):
                found = line.strip()
    return found


def _banner(lines: list[str]) -> dict[str, Any] | None:
    """The ``Root Cause`` entry of the banner: rank, local_rank, host, exitcode, error_file, traceback."""
    start = next((i for i, line in enumerate(lines) if line.startswith("Root Cause")), None)
    if start is None:
        return None
    fields: dict[str, str] = {}
    for line in lines[start + 1 :]:
        if line.startswith("="):
            break
        match = _FIELD.match(line)
        if match and match["key"] not in fields:
            fields[match["key"]] = match["value"]
    rank = _RANK.match(fields.get("rank", ""))
    code = _EXIT.match(fields.get("exitcode", ""))
    return {
        "rank": int(rank["rank"]) if rank else None,
        "local_rank": int(rank["local"]) if rank and rank["local"] else None,
        "host": fields.get("host"),
        "exitcode": int(code["code"]) if code else None,
        "error_file": None if fields.get("error_file") in (None, "<N/A>") else fields["error_file"],
        "traceback": fields.get("traceback"),
    }


def parse_torchrun_failure(text: str) -> dict[str, Any]:
    """Facts: ``root_cause`` (the banner's entry, None without a banner), ``exceptions`` [{rank, exception}]
    (each rank's exception line, in the order their tracebacks began), ``untagged`` (the exception of a
    traceback without a rank prefix, torchrun's own aside), and ``cause`` {rank, exception}: the first
    rank's, else the untagged one (rank None), else None."""
    lines = text.splitlines()
    per_rank: dict[int, list[str]] = {}
    plain: list[str] = []
    for line in lines:
        tagged = _TAGGED.match(line)
        if tagged:
            per_rank.setdefault(int(tagged["rank"]), []).append(tagged["text"])
        else:
            plain.append(line)
    exceptions = [
        {"rank": rank, "exception": found} for rank, body in per_rank.items() if (found := _exception(body))
    ]
    untagged = _exception(plain)
    cause = exceptions[0] if exceptions else {"rank": None, "exception": untagged} if untagged else None
    return {"root_cause": _banner(lines), "exceptions": exceptions, "untagged": untagged, "cause": cause}


def rank_failure(text: str) -> str:
    """``rank 1: RuntimeError: ... (then rank 0 failed too)`` from a failed torchrun's stderr; its last
    lines where no rank's exception can be found."""
    facts = parse_torchrun_failure(text)
    cause = facts["cause"]
    if cause is None:
        lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith(("W", "*"))]
        return " | ".join(lines[-3:])[-400:]
    if cause["rank"] is None:
        return cause["exception"][:400]
    others = [str(e["rank"]) for e in facts["exceptions"][1:]]
    after = f" (then rank{'s' if len(others) > 1 else ''} {', '.join(others)} failed too)" if others else ""
    return f"rank {cause['rank']}: {cause['exception'][:400]}{after}"
