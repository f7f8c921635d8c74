"""Values of results.json as one line of text, shared by the report's chapters and the JUnit file.

results.json comes from runs of any age and may hold anything where a string is expected (a structure, a
number, a hostile string); every chapter shows such values the same way and cuts them to a readable length.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from diagnose.core.units import MISSING, counted, is_number
from diagnose.render.checklist import CLUSTER

# A message is a sentence or two; anything longer is a dumped log that belongs in the evidence.
MESSAGE_CHARS = 2000


def show(value: Any, limit: int = 400) -> str:
    """A results value as one line of text: strings as they are, structures as compact JSON."""
    if value is None:
        return MISSING
    text = (
        value
        if isinstance(value, str)
        else json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    )
    return text if len(text) <= limit else f"{text[:limit]}… [+{len(text) - limit} characters]"


def format_time(stamp: Any) -> str:
    """An ISO timestamp as a reader writes it (seconds, offset kept); anything else as given."""
    if not isinstance(stamp, str) or not stamp:
        return MISSING
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return stamp
    offset = moment.strftime("%z")
    zone = "UTC" if offset in ("+0000", "") else f"UTC{offset[:3]}:{offset[3:]}"
    return f"{moment:%Y-%m-%d %H:%M:%S} {zone}" if offset else f"{moment:%Y-%m-%d %H:%M:%S}"


def host_label(host: Any) -> str:
    """The host of a result as the report names it; a cluster-wide result (host null) says so."""
    return CLUSTER if host is None else str(host)


def count_of(value: Any, noun: str, plural: str | None = None) -> str:
    """A count recorded in results.json with its noun in the right number (``1 node``, ``4 nodes``); a count
    the results lack shows as MISSING before the plural, never ``None nodes``."""
    return counted(int(value), noun, plural) if is_number(value) else f"{MISSING} {plural or noun + 's'}"
