"""Ansible's INI inventory format: ``[group]``, ``[group:children]``, ``[group:vars]``, ``key=value`` hosts.

Values are read as Ansible reads them (:func:`ini_value`); a section or child naming a group no source
declared is an error naming the file and line.
"""

from __future__ import annotations

import ast
import re
import shlex
from typing import Any

from diagnose.core.errors import ConfigError
from diagnose.targets.model import UNGROUPED, Inventory
from diagnose.targets.ranges import host_names

_SECTION = re.compile(r"^\[([^:\]\s]+)(?::(\w+))?\]\s*(?:[#;].*)?$")
_GROUP_NAME = re.compile(r"^([^:\]\s]+)\s*(?:[#;].*)?$")


def ini_value(text: str) -> Any:
    """An INI value as Ansible reads it: a Python literal if it is one (``2222``, ``True``, ``'a b'``,
    ``[1, 2]``), else the text itself (``h100-8x-ndr400``, ``~/.ssh/key``, ``true``)."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text
    return _plain(value, text)


def _plain(value: Any, text: str) -> Any:
    if isinstance(value, (tuple, set, frozenset)):
        return [_plain(v, str(v)) for v in value]
    if isinstance(value, list):
        return [_plain(v, str(v)) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v, str(v)) for k, v in value.items()}
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return text  # complex, bytes, Ellipsis: not variable types, keep what was written


def parse_ini_inventory(lines: list[str], inventory: Inventory) -> None:
    """The lines of one INI inventory into ``inventory``; groups of earlier sources may be named."""
    path = inventory.source
    group, state = UNGROUPED, "hosts"
    declared = inventory.declared  # groups of earlier sources count, as in Ansible
    references: list[tuple[str, str, int]] = []  # (group, how it was referenced, line) checked at the end
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            match = _SECTION.match(line)
            if match is None:
                raise ConfigError(
                    f"invalid section header {line!r} (group names have no spaces or ':')", path, number
                )
            group, state = match.group(1), match.group(2) or "hosts"
            if state not in ("hosts", "children", "vars"):
                raise ConfigError(
                    f"section [{group}:{state}] has unknown type {state!r} "
                    "(allowed: [group], [group:children], [group:vars])",
                    path,
                    number,
                )
            inventory.add_group(group)
            if state == "vars":
                references.append((group, f"section [{group}:vars] is for", number))
            else:
                declared.add(group)
        elif state == "hosts":
            _ini_host_line(line, group, number, inventory)
        elif state == "vars":
            key, sep, value = line.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"expected key=value in [{group}:vars], got {line!r}", path, number)
            inventory.set_group_var(group, key.strip(), ini_value(value.strip()), number)
        else:
            match = _GROUP_NAME.match(line)
            if match is None:
                raise ConfigError(f"expected a group name in [{group}:children], got {line!r}", path, number)
            inventory.add_child(group, match.group(1), number)
            references.append((match.group(1), f"[{group}:children] lists", number))
    for name, how, number in references:
        if name not in declared:
            raise ConfigError(
                f"{how} undefined group {name!r} (declare it with [{name}] or [{name}:children])",
                path,
                number,
            )


def _ini_host_line(line: str, group: str, number: int, inventory: Inventory) -> None:
    path = inventory.source
    try:
        tokens = shlex.split(line, comments=True)
    except ValueError as err:
        raise ConfigError(f"cannot parse host line ({str(err).lower()}): {line!r}", path, number) from None
    if not tokens:
        return
    names, port = host_names(tokens[0], path, number)
    assignments = []
    for token in tokens[1:]:
        key, sep, value = token.partition("=")
        if not sep or not key:
            raise ConfigError(
                f"expected key=value host variable after {tokens[0]!r}, got {token!r}", path, number
            )
        assignments.append((key, ini_value(value)))
    for host in names:
        inventory.add_host(host, group)
        if port is not None:
            inventory.set_host_var(host, "ansible_port", port, number)
        for key, value in assignments:
            inventory.set_host_var(host, key, value, number)
