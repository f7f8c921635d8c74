"""Typed reads from the YAML of playbooks and profiles: unknown keys rejected, each error at its line.

A misspelt threshold that is silently ignored would let a bad cluster pass, so every section is read
through :class:`Section` and every expected-value variable through :func:`check_profile_variables`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from diagnose.config.profiles import PROFILE_VARIABLES, REPLACED, replaced_note
from diagnose.config.yaml_lines import YamlMap
from diagnose.core.errors import ConfigError


class Section:
    """Typed reads from one YAML mapping, each error naming the key's line; rejects unknown keys."""

    def __init__(self, data: YamlMap, path: Path, where: str, allowed: Sequence[str]) -> None:
        self.data, self.path, self.where = data, path, where
        inside = f" in {where.rstrip('.')}" if where else ""
        for key in data:
            if key not in allowed:
                raise ConfigError(
                    f"unknown key {key!r}{inside} (allowed: {', '.join(allowed)})",
                    path,
                    data.key_lines[key],
                )

    def line(self, key: str) -> int | None:
        return self.data.value_lines.get(key, self.data.line)

    def error(self, key: str, message: str) -> ConfigError:
        return ConfigError(f"{self.where}{key}: {message}", self.path, self.line(key))

    def get(
        self, key: str, check: Callable[[Any], bool], kind: str, default: Any = None, nullable: bool = False
    ) -> Any:
        """The value of ``key``; ``default`` when absent, and when null unless ``nullable`` (null = None)."""
        if key not in self.data or (self.data[key] is None and not nullable):
            return default
        if self.data[key] is None:
            return None
        value = self.data[key]
        if not check(value):
            raise self.error(key, f"must be {kind}, got {value!r}")
        return value

    def string(self, key: str, default: str | None = None) -> str | None:
        return self.get(key, lambda v: isinstance(v, str), "a string", default)

    def boolean(self, key: str, default: bool) -> bool:
        return self.get(key, lambda v: isinstance(v, bool), "true or false", default)

    def integer(self, key: str, default: int | None, minimum: int, nullable: bool = False) -> int | None:
        value = self.get(key, is_int, "an integer", default, nullable)
        if value is not None and value < minimum:
            raise self.error(key, f"must be at least {minimum}, got {value}")
        return value

    def number(
        self, key: str, default: float | None, above: float = 0.0, nullable: bool = False
    ) -> float | None:
        value = self.get(key, is_number, "a number", default, nullable)
        if value is not None and value <= above:
            raise self.error(key, f"must be more than {above:g}, got {value}")
        return None if value is None else float(value)

    def strings(self, key: str, default: tuple[str, ...]) -> tuple[str, ...]:
        value = self.get(key, lambda v: isinstance(v, list), "a list of strings", None)
        if value is None:
            return default
        for item, line in zip(value, value.item_lines, strict=True):
            if not isinstance(item, str) or not item:
                raise ConfigError(
                    f"{self.where}{key}: items must be non-empty strings, got {item!r}", self.path, line
                )
        return tuple(value)

    def mapping(self, key: str) -> YamlMap | None:
        return self.get(key, lambda v: isinstance(v, YamlMap), "a mapping", None)


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_KIND_CHECKS: dict[type, tuple[Callable[[Any], bool], str]] = {
    int: (is_int, "an integer"),
    float: (is_number, "a number"),
    bool: (lambda v: isinstance(v, bool), "true or false"),
    str: (lambda v: isinstance(v, str), "a string"),
    list: (lambda v: isinstance(v, list), "a list"),
}


def check_profile_variables(values: YamlMap, path: Path, where: str, unknown_allowed: bool) -> dict[str, Any]:
    """Type-check the expected-value variables of a profile (or a playbook's ``vars``).

    Null is allowed everywhere: it means "this value is not judged" (a profile that cannot know it).
    """
    for key, value in values.items():
        line = values.key_lines[key]
        if not isinstance(key, str) or not key:
            raise ConfigError(f"{where}: variable names must be strings, got {key!r}", path, line)
        variable = PROFILE_VARIABLES.get(key)
        if variable is None and key in REPLACED and not unknown_allowed:
            raise ConfigError(f"{where}: {replaced_note(key)}", path, line)
        if variable is None:
            if unknown_allowed:
                continue
            raise ConfigError(
                f"{where}: unknown variable {key!r} (known: {', '.join(sorted(PROFILE_VARIABLES))})",
                path,
                line,
            )
        check, kind = _KIND_CHECKS[variable.kind]
        if value is not None and not check(value):
            raise ConfigError(f"{where}: {key} must be {kind}, got {value!r}", path, values.value_lines[key])
    return dict(values)
