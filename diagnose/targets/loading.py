"""Ansible inventory files and folders read into one :class:`~diagnose.targets.model.Inventory`.

Sources are read as ``ansible -i A -i B`` reads them: a folder source is every file in it (sorted,
recursively, skipping what Ansible skips: hidden files, ``*.orig``, ``*.retry``, ``*.cfg``, ``~`` backups,
..., and the group_vars/host_vars folders); sources merge in the order given, hosts and groups are the
union and a later source's variable at the same level wins. What cannot be honoured (a dynamic inventory
script, an inventory plugin) is refused with the file and line. Every error is found before any host is
touched.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from diagnose.config.yaml_lines import YamlMap, kind_of, parse_yaml, read_text, try_parse_yaml
from diagnose.core.errors import ConfigError
from diagnose.targets.files import inventory_files
from diagnose.targets.ini_source import parse_ini_inventory
from diagnose.targets.model import Inventory
from diagnose.targets.sources import HostContext, HostSource
from diagnose.targets.yaml_source import parse_yaml_inventory

_YAML_SUFFIXES = {".yaml", ".yml", ".json"}
_INI_SUFFIXES = {".ini", ".cfg"}


@dataclass
class InventoryFiles(HostSource):
    """The hosts of Ansible inventory files or folders (one, or several as ``-i`` repeated), with the
    group_vars/ and host_vars/ beside each."""

    paths: Path | str | Sequence[Path | str]

    def __post_init__(self) -> None:
        given = [self.paths] if isinstance(self.paths, (str, os.PathLike)) else self.paths
        self.paths = [Path(p) for p in given]

    def add_hosts(self, inventory: Inventory, context: HostContext) -> None:
        read_sources(self.paths, inventory)


def read_sources(paths: Sequence[Path], inventory: Inventory) -> None:
    """Parse every inventory file of ``paths`` (files or folders, in order) into ``inventory``."""
    if not paths:
        raise ConfigError("no inventory given")
    for source in paths:
        inventory.add_source(source)
        if source.is_dir():
            for file in inventory_files(source):
                _parse_source(file, inventory, in_folder=True)
        else:
            _parse_source(source, inventory, in_folder=False)
    inventory.source = inventory.path


def load_inventory(path: Path, playbook_dir: Path | None = None) -> Inventory:
    """Read one Ansible inventory source (a file or a folder) with its group_vars/ and host_vars/."""
    return load_inventories([path], playbook_dir)


def load_inventories(paths: Sequence[Path], playbook_dir: Path | None = None) -> Inventory:
    """Read inventory sources, whole (:meth:`~diagnose.targets.model.Inventory.settle`), with the
    group_vars/ and host_vars/ beside them and, given ``playbook_dir``, beside the playbook above those."""
    inventory = Inventory(playbook_dir)
    read_sources([Path(p) for p in paths], inventory)
    inventory.settle()
    return inventory


def _parse_source(path: Path, inventory: Inventory, in_folder: bool) -> None:
    """One inventory file, YAML or INI.

    ``.yaml``/``.yml``/``.json`` are YAML and ``.ini``/``.cfg`` are INI; for any other name (Ansible's
    classic ``hosts`` file has none) the content decides: a YAML mapping of groups is YAML, anything
    else is read as INI. In a folder an empty file adds nothing (Ansible reads it as an empty INI file).
    """
    text = read_text(path, "inventory")
    inventory.source = path
    if text.startswith("#!") and os.access(path, os.X_OK):
        raise ConfigError(
            "dynamic inventory scripts are not supported; list hosts in a file instead", path, 1
        )
    suffix = path.suffix.lower()
    if suffix in _INI_SUFFIXES:
        parse_ini_inventory(text.splitlines(), inventory)
    elif suffix in _YAML_SUFFIXES:
        data = parse_yaml(text, path)
        if data is None:
            if in_folder:
                return
            raise ConfigError("inventory has no hosts", path)
        if not isinstance(data, YamlMap):
            raise ConfigError(
                f"a YAML inventory must be a mapping of groups (all:, ...), got {kind_of(data)}",
                path,
                getattr(data, "line", 1),
            )
        parse_yaml_inventory(data, inventory)
    else:
        data = try_parse_yaml(text)
        if isinstance(data, YamlMap):
            parse_yaml_inventory(data, inventory)
        else:
            parse_ini_inventory(text.splitlines(), inventory)
