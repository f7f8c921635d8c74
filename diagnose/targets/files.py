"""The files around an Ansible inventory: ``group_vars/``, ``host_vars/`` and inventory folders.

Operators rarely keep every variable in the inventory file itself: kubespray, DeepOps and StackHPC's Slurm
appliance all put most of them in ``group_vars/<group>.yml`` or in folders ``group_vars/<group>/*.yml``, and
keep ``ansible_host`` in ``host_vars/<host>``. A run that ignored them would connect to the wrong address or
judge against the wrong profile, so they are read as Ansible reads them:

* beside each inventory source (the source itself when it is a folder, else the folder holding it), in the
  order the sources were given, then beside the playbook file;
* ``<name>`` first, else ``<name>.yml``, ``<name>.yaml``, ``<name>.json`` (the first that exists is the only
  one read); a folder of that name is read file by file in sorted order, descending into sub-folders,
  skipping hidden files and ``~`` backups and files with other extensions.

An inventory folder is every file in it, sorted by name, skipping what Ansible skips by default.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from diagnose.config.yaml_lines import YamlMap, kind_of, parse_yaml, read_text
from diagnose.core.errors import ConfigError

VARS_EXTENSIONS = (".yml", ".yaml", ".json")
# Ansible's defaults: INVENTORY_IGNORE_EXTS (its REJECT_EXTS plus .orig, .cfg, .retry) and the names it
# always skips in an inventory folder. A ``.cfg`` given directly with ``-i`` is still read.
IGNORED_EXTENSIONS = (
    ".pyc",
    ".pyo",
    ".swp",
    ".bak",
    "~",
    ".rpm",
    ".md",
    ".txt",
    ".rst",
    ".orig",
    ".cfg",
    ".retry",
)
IGNORED_NAMES = re.compile(r"^(\.|host_vars$|group_vars$|vars_plugins$)")
_VAULT_HEADER = "$ANSIBLE_VAULT;"

Origin = tuple[Path | None, int | None]


@dataclass(frozen=True)
class VarLayer:
    """One level of variables for a host, with where each value was written (for error messages)."""

    values: Mapping[str, Any]
    origins: Mapping[str, Origin]


def inventory_files(folder: Path) -> Iterator[Path]:
    """The files of an inventory folder that Ansible reads as sources, in its order (sorted, recursive)."""
    try:
        names = sorted(os.listdir(folder))
    except OSError as err:
        raise ConfigError(f"cannot list inventory folder: {err.strerror or err}", folder) from None
    for name in names:
        if IGNORED_NAMES.search(name) or name.endswith(IGNORED_EXTENSIONS):
            continue
        path = folder / name
        if path.is_dir():
            yield from inventory_files(path)
        elif path.is_file():
            yield path


def vars_files(folder: Path, name: str) -> list[Path]:
    """The files that hold the variables of group or host ``name`` under ``folder`` (group_vars/...)."""
    for suffix in ("", *VARS_EXTENSIONS):
        candidate = folder / (name + suffix)
        if candidate.is_dir():
            return list(_folder_vars_files(candidate))
        if candidate.exists():
            return [candidate]
    return []


def _folder_vars_files(folder: Path) -> Iterator[Path]:
    for entry in sorted(os.listdir(folder)):
        if entry.startswith(".") or entry.endswith("~"):
            continue
        path, extension = folder / entry, os.path.splitext(entry)[1]
        if path.is_dir() and not extension:
            yield from _folder_vars_files(path)
        elif path.is_file() and (not extension or extension in VARS_EXTENSIONS):
            yield path


def load_vars_file(path: Path) -> VarLayer | None:
    """One group_vars/host_vars file: a mapping of variables, or None when it is empty (Ansible skips it)."""
    text = read_text(path, "variables")
    if text.lstrip().startswith(_VAULT_HEADER):
        raise ConfigError("the file is encrypted with ansible-vault, which diagnose cannot decrypt", path, 1)
    try:
        data = parse_yaml(text, path)
    except ConfigError as err:
        if "'!vault'" in err.message:
            raise ConfigError(
                "a value encrypted with ansible-vault (!vault): diagnose cannot decrypt it",
                path,
                err.line,
            ) from None
        try:  # Ansible reads JSON first; JSON that YAML refuses (tab indents) is still valid
            data = json.loads(text)
        except ValueError:
            raise err from None
    if data is None:
        return None
    if not isinstance(data, dict):
        raise ConfigError(
            f"a variables file must hold a mapping of variables, got {kind_of(data)}",
            path,
            getattr(data, "line", 1),
        )
    lines = data.key_lines if isinstance(data, YamlMap) else {}
    for key in data:
        if not isinstance(key, str) or not key:
            raise ConfigError(f"variable name must be a non-empty string, got {key!r}", path, lines.get(key))
    return VarLayer(dict(data), {key: (path, lines.get(key)) for key in data})


class VarsFolders:
    """``group_vars/`` and ``host_vars/`` beside the inventory sources and the playbook, read once each.

    ``inventory_dirs`` are in source order (a folder may repeat: Ansible reads it again, so a later source
    in the same folder wins again); ``playbook_dir`` comes last and so wins over all of them.
    """

    def __init__(self, inventory_dirs: Sequence[Path], playbook_dir: Path | None = None) -> None:
        self.folders = list(inventory_dirs) + ([playbook_dir] if playbook_dir is not None else [])
        self._cache: dict[tuple[Path, str, str], list[VarLayer]] = {}

    def group_layers(self, group: str, folder: Path) -> list[VarLayer]:
        return self._layers(folder, "group_vars", group)

    def host_layers(self, host: str, folder: Path) -> list[VarLayer]:
        return self._layers(folder, "host_vars", host)

    def _layers(self, folder: Path, kind: str, name: str) -> list[VarLayer]:
        key = (folder, kind, name)
        if key not in self._cache:
            base = folder / kind
            files = vars_files(base, name) if base.is_dir() else []
            self._cache[key] = [layer for file in files if (layer := load_vars_file(file)) is not None]
        return self._cache[key]
