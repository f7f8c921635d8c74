"""Ansible host ranges in inventory host names: ``node[01:64]``, ``[1:10:2]``, ``rack[a:f]``, ``name:2222``.

Pure text to names; the parsers (:mod:`diagnose.targets.yaml_source`, :mod:`diagnose.targets.ini_source`)
call :func:`host_names`, which words a bad range as a ConfigError at the file and line that wrote it.
"""

from __future__ import annotations

import re
import string
from pathlib import Path

from diagnose.core.errors import ConfigError

_RANGE = re.compile(r"\[([^\[\]]*)\]")


def expand_host_pattern(pattern: str) -> list[str]:
    """Expand Ansible host ranges: ``node[01:64]`` (padding kept), ``[1:10:2]`` (step), ``rack[a:f]``.

    Several ranges in one name multiply out left to right (``r[1:2]n[1:3]`` gives r1n1, r1n2, ...).
    Raises ValueError with the reason; the caller adds file and line.
    """
    match = _RANGE.search(pattern)
    if match is None:
        if "[" in pattern or "]" in pattern:
            raise ValueError(f"unbalanced bracket in host name {pattern!r}")
        return [pattern]
    head, tail = pattern[: match.start()], pattern[match.end() :]
    if "[" in head or "]" in head:
        raise ValueError(f"unbalanced bracket in host name {pattern!r}")
    names = []
    for item in _range_items(match.group(1), pattern):
        names.extend(expand_host_pattern(head + item + tail))
    return names


def _range_items(spec: str, pattern: str) -> list[str]:
    parts = spec.split(":")
    if len(parts) not in (2, 3):
        raise ValueError(f"host range {pattern!r} must be [begin:end] or [begin:end:step]")
    begin, end = parts[0].strip() or "0", parts[1].strip()  # [:5] starts at 0, as in Ansible
    if not end:
        raise ValueError(f"host range {pattern!r} must give its end value")
    step_text = parts[2].strip() if len(parts) == 3 else "1"
    if not step_text.isdigit() or int(step_text) < 1:
        raise ValueError(f"host range {pattern!r} has step {step_text!r}; it must be a positive integer")
    step = int(step_text)
    if begin.isdigit() and end.isdigit():
        if int(begin) > int(end):
            raise ValueError(f"host range {pattern!r} must count upwards (begin <= end)")
        width = len(begin) if begin.startswith("0") and len(begin) > 1 else 0
        if width and len(end) != width:
            raise ValueError(f"host range {pattern!r} pads begin to {width} digits; end must have as many")
        return [str(n).zfill(width) for n in range(int(begin), int(end) + 1, step)]
    letters = string.ascii_letters
    if len(begin) == 1 and len(end) == 1 and begin in letters and end in letters:
        if letters.index(begin) > letters.index(end):
            raise ValueError(f"host range {pattern!r} must count upwards (begin <= end)")
        return list(letters[letters.index(begin) : letters.index(end) + 1 : step])
    raise ValueError(f"host range {pattern!r} must span two numbers or two single letters")


_PORT_SUFFIX = re.compile(r"^(?P<name>.+):(?P<port>\d+)$")


def _split_port(pattern: str) -> tuple[str, int | None]:
    """``name:2222`` names the SSH port inline, as Ansible allows; IPv6 addresses (several colons) do not."""
    outside_ranges = _RANGE.sub("", pattern)
    match = _PORT_SUFFIX.match(pattern)
    if match and outside_ranges.count(":") == 1:
        return match.group("name"), int(match.group("port"))
    return pattern, None


def host_names(pattern: str, path: Path | None, line: int | None) -> tuple[list[str], int | None]:
    """The host names a written pattern stands for, and the SSH port it names inline (None: none)."""
    name, port = _split_port(pattern.strip())
    if not name:
        raise ConfigError(f"empty host name in {pattern!r}", path, line)
    try:
        return expand_host_pattern(name), port
    except ValueError as err:
        raise ConfigError(str(err), path, line) from None
