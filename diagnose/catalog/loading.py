"""The check catalog: every module of ``diagnose.checks`` (the repo's ``checks/``) that defines CHECK."""

from __future__ import annotations

import fnmatch
import importlib
import pkgutil

from diagnose import checks as checks_package
from diagnose.core.check import Check, ClusterCheck

Entry = Check | ClusterCheck


def load_catalog() -> list[Entry]:
    """Import the catalog; each file is one check, so adding a check is adding a file."""
    entries: dict[str, Entry] = {}
    for module_info in pkgutil.iter_modules(checks_package.__path__):
        if module_info.ispkg:
            continue  # checks/custom/ holds site testinfra modules, not catalog entries
        module = importlib.import_module(f"{checks_package.__name__}.{module_info.name}")
        entry = getattr(module, "CHECK", None)
        if entry is None:
            continue
        if entry.id in entries:
            raise RuntimeError(f"check id {entry.id} is defined twice (checks/{module_info.name}.py)")
        entries[entry.id] = entry
    return [entries[key] for key in sorted(entries)]


def select(catalog: list[Entry], patterns: list[str]) -> list[Entry]:
    """The entries a playbook's ``checks:`` list asks for: ids or globs, ``!glob`` to exclude.

    ``host.reachable`` always stays: every other result depends on it.
    """
    includes = [p for p in patterns if not p.startswith("!")] or ["*"]
    excludes = [p[1:] for p in patterns if p.startswith("!")]
    chosen = []
    for entry in catalog:
        wanted = any(fnmatch.fnmatchcase(entry.id, p) for p in includes)
        dropped = any(fnmatch.fnmatchcase(entry.id, p) for p in excludes)
        if entry.id == "host.reachable" or (wanted and not dropped):
            chosen.append(entry)
    return chosen
