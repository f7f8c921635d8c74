"""Ansible's YAML inventory format: groups with ``hosts``, ``vars`` and ``children``, nested to any depth.

An unknown key in a group is an error (Ansible only warns): a misspelt ``chilren:`` would silently drop
a rack from the acceptance run. Errors name the file and line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from diagnose.config.yaml_lines import YamlMap, kind_of
from diagnose.core.errors import ConfigError
from diagnose.targets.model import Inventory
from diagnose.targets.ranges import host_names

_GROUP_KEYS = ("hosts", "vars", "children")


def parse_yaml_inventory(data: YamlMap, inventory: Inventory) -> None:
    """One YAML inventory (a mapping of top-level groups) into ``inventory``."""
    if "plugin" in data:
        raise ConfigError(
            "inventory plugin configurations are not supported; list hosts and groups instead",
            inventory.source,
            data.key_lines["plugin"],
        )
    for name, body in data.items():
        _yaml_group(str(name), body, inventory, data.value_lines[name])


def _yaml_group(name: str, body: Any, inventory: Inventory, line: int) -> None:
    path = inventory.source
    inventory.add_group(name)
    inventory.declared.add(name)
    if body is None:
        return
    if not isinstance(body, YamlMap):
        raise ConfigError(
            f"group {name!r} must be a mapping of hosts/vars/children, got {kind_of(body)}", path, line
        )
    for key in body:
        if key not in _GROUP_KEYS:
            raise ConfigError(
                f"group {name!r} has unknown key {key!r} (allowed: hosts, vars, children)",
                path,
                body.key_lines[key],
            )
    for key in body:  # in written order, so hosts keep the order the file gives them
        value, value_line = body[key], body.value_lines[key]
        if value is None:
            continue
        if not isinstance(value, YamlMap):
            raise ConfigError(
                f"'{key}' of group {name!r} must be a mapping, got {kind_of(value)}", path, value_line
            )
        if key == "vars":
            for var, var_value in value.items():
                inventory.set_group_var(
                    name, _var_name(var, path, value.key_lines[var]), var_value, value.key_lines[var]
                )
        elif key == "hosts":
            for pattern in value:
                _yaml_hosts(name, pattern, value, inventory)
        else:
            for child, child_body in value.items():
                inventory.add_child(name, str(child), value.key_lines[child])
                _yaml_group(str(child), child_body, inventory, value.value_lines[child])


def _yaml_hosts(group: str, key: Any, hosts: YamlMap, inventory: Inventory) -> None:
    line, host_vars = hosts.key_lines[key], hosts[key]
    names, port = host_names(str(key), inventory.source, line)
    if host_vars is not None and not isinstance(host_vars, YamlMap):
        raise ConfigError(
            f"vars of host {key!r} must be a mapping, got {kind_of(host_vars)}",
            inventory.source,
            hosts.value_lines[key],
        )
    for host in names:
        inventory.add_host(host, group)
        if port is not None:
            inventory.set_host_var(host, "ansible_port", port, line)
        for var, value in (host_vars or {}).items():
            var_line = host_vars.key_lines[var]
            inventory.set_host_var(host, _var_name(var, inventory.source, var_line), value, var_line)


def _var_name(key: Any, path: Path | None, line: int | None) -> str:
    if not isinstance(key, str) or not key:
        raise ConfigError(f"variable name must be a non-empty string, got {key!r}", path, line)
    return key
