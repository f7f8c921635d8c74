"""Typed access to a host's merged variables (profile < inventory levels < ``-e``).

INI inventories and ``-e`` give strings; YAML gives typed values. Checks ask for the type they need and a
wrong value becomes a :class:`ConfigError` naming the variable, not a crash deep inside a rule.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from diagnose.core.errors import ConfigError

_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


class Vars(Mapping[str, Any]):
    def __init__(self, values: Mapping[str, Any] | None = None, host: str = "") -> None:
        self._values = dict(values or {})
        self.host = host

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def _bad(self, name: str, kind: str) -> ConfigError:
        where = f" for host {self.host}" if self.host else ""
        return ConfigError(f"variable {name}{where} must be {kind}, got {self._values[name]!r}")

    def str(self, name: str, default: str | None = None) -> str | None:
        value = self._values.get(name)
        return default if value is None else str(value)

    def int(self, name: str, default: int | None = None) -> int | None:
        value = self._values.get(name)
        if value is None or value == "":
            return default
        if isinstance(value, bool):
            raise self._bad(name, "an integer")
        try:
            return int(value)
        except (TypeError, ValueError):
            raise self._bad(name, "an integer") from None

    def float(self, name: str, default: float | None = None) -> float | None:
        value = self._values.get(name)
        if value is None or value == "":
            return default
        if isinstance(value, bool):
            raise self._bad(name, "a number")
        try:
            return float(value)
        except (TypeError, ValueError):
            raise self._bad(name, "a number") from None

    def bool(self, name: str, default: bool | None = None) -> bool | None:
        value = self._values.get(name)
        if value is None or value == "":
            return default
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise self._bad(name, "true or false")

    def list(self, name: str, default: list[str] | None = None) -> list[str] | None:
        """A list given as YAML list or as a comma-separated string (INI, ``-e``)."""
        value = self._values.get(name)
        if value is None or value == "":
            return default
        if isinstance(value, (list, tuple)):
            return [str(v) for v in value]
        return [part.strip() for part in str(value).split(",") if part.strip()]

    def with_values(self, **values: Any) -> Vars:
        """A copy with ``values`` added: a default the run computes (the nightly Xid window, say)."""
        return Vars({**self._values, **values}, host=self.host)

    def to_dict(self) -> dict[str, Any]:
        return dict(self._values)


#: The variable in which a campaign names where the expected values it set came from (variable -> words).
SOURCES_VARIABLE = "expectation_sources"


def source_of(host_vars: Mapping[str, Any], variable: str) -> str | None:
    """The words naming where ``variable``'s value came from when a campaign set it (None: the operator
    set it, or nobody did): a judge's message then names the campaign, run and date instead."""
    sources = host_vars.get(SOURCES_VARIABLE)
    return str(sources[variable]) if isinstance(sources, Mapping) and variable in sources else None
