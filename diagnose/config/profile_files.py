"""Hardware profile files: the expected values a host is judged against, read and checked.

A profile is chosen per host (``diagnose_profile`` at any inventory level, else the playbook's
``profile``); its keys must be the known expected-value variables of :mod:`diagnose.config.profiles`.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from diagnose.config.packaged import looks_like_path, packaged, yaml_names
from diagnose.config.schema import Section, check_profile_variables
from diagnose.config.yaml_lines import YamlMap, parse_yaml, read_text
from diagnose.core.errors import ConfigError

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable


@dataclass(frozen=True)
class Profile:
    """A hardware profile: the expected values that rules judge against."""

    name: str
    description: str
    vars: Mapping[str, Any]
    path: Path


def _profile_dirs(search_dirs: Sequence[Path | Traversable] | None) -> list[Path | Traversable]:
    return list(search_dirs) if search_dirs is not None else [packaged("profiles")]


def available_profiles(search_dirs: Sequence[Path | Traversable] | None = None) -> list[str]:
    """Profile names found in the search folders (the packaged ``playbooks/profiles/`` by default)."""
    return sorted({name for folder in _profile_dirs(search_dirs) for name in yaml_names(folder)})


def load_profile(name: str, search_dirs: Sequence[Path | Traversable] | None = None) -> Profile:
    """A hardware profile by name (first match in ``search_dirs``), or by path to a ``.yaml`` file."""
    if looks_like_path(name):
        path = Path(name).expanduser()
        return parse_profile(read_text(path, "profile"), path, path.stem)
    for folder in _profile_dirs(search_dirs):
        resource = folder / f"{name}.yaml"
        if resource.is_file():
            return parse_profile(resource.read_text(encoding="utf-8"), Path(str(resource)), name)
    available = available_profiles(search_dirs)
    close = difflib.get_close_matches(name, available, n=1, cutoff=0.6)
    guess = f" (did you mean {close[0]}?)" if close else ""
    raise ConfigError(
        f"unknown profile {name!r}{guess}; available: {', '.join(available) or 'none'} "
        "(or give a path to a .yaml file)"
    )


def parse_profile(text: str, path: Path, name: str) -> Profile:
    """Parse and validate profile text: ``description`` and ``vars`` of known expected-value variables."""
    data = parse_yaml(text, path)
    if not isinstance(data, YamlMap):
        raise ConfigError(
            "a profile must be a YAML mapping (description:, vars:)", path, getattr(data, "line", 1)
        )
    section = Section(data, path, "", ("description", "vars"))
    return Profile(
        name=name,
        description=section.string("description", ""),
        vars=check_profile_variables(
            section.mapping("vars") or YamlMap(), path, "vars", unknown_allowed=False
        ),
        path=path,
    )
