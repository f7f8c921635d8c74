"""``/etc/os-release`` and ``uname -r``: which distribution and kernel a host runs."""

from __future__ import annotations

import shlex
from typing import Any


def parse_os_release(text: str) -> dict[str, Any]:
    """Facts: ``pretty_name``, ``id``, ``version_id`` (None where the file does not say)."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        name, sep, raw = line.strip().partition("=")
        if not sep or not name or name.startswith("#"):
            continue
        try:
            words = shlex.split(raw)
        except ValueError:
            words = [raw.strip("\"'")]
        values[name] = words[0] if words else ""
    pretty = values.get("PRETTY_NAME") or " ".join(
        v for v in (values.get("NAME"), values.get("VERSION")) if v
    )
    return {"pretty_name": pretty or None, "id": values.get("ID"), "version_id": values.get("VERSION_ID")}
