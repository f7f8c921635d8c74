"""``-e`` extra variables, read as ``ansible-playbook -e`` reads them: the highest level of all.

They win over every inventory level and the playbook (:mod:`diagnose.targets.resolve`); a message that
quotes an argument never shows a secret in it.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from diagnose.config.yaml_lines import kind_of, parse_yaml, read_text
from diagnose.core.errors import ConfigError
from diagnose.core.redact import redact_extra_vars

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def parse_extra_vars(args: Iterable[str]) -> dict[str, Any]:
    """Merge ``-e`` arguments, later ones winning, as ``ansible-playbook -e`` does.

    Each argument is ``key=value`` pairs (shell-style quoting; values stay strings, as on Ansible's
    command line), ``@file.yaml`` (a YAML or JSON mapping), or an inline ``{"a": 1}`` mapping.
    """
    merged: dict[str, Any] = {}
    for arg in args:
        try:
            merged.update(_one_extra_var(arg))
        except ConfigError as err:  # the message quotes the argument: never with a secret in it
            shown = repr(redact_extra_vars(arg))
            raise ConfigError(err.message.replace(repr(arg), shown), err.path, err.line) from None
    return merged


def _one_extra_var(arg: str) -> dict[str, Any]:
    text = arg.strip()
    if text.startswith("@"):
        file = Path(text[1:]).expanduser()
        data = parse_yaml(read_text(file, "-e variables"), file)
        if not isinstance(data, dict):
            raise ConfigError(
                f"-e {arg!r}: the file must hold a mapping of variables, got {kind_of(data)}", file
            )
        return _checked_keys(data, arg)
    if text.startswith("{"):
        try:
            data = parse_yaml(text, None)
        except ConfigError as err:
            raise ConfigError(f"-e {arg!r}: {err.message}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"-e {arg!r} must be a mapping")
        return _checked_keys(data, arg)
    try:
        tokens = shlex.split(text)
    except ValueError as err:
        raise ConfigError(f"-e {arg!r}: {str(err).lower()}") from None
    if not tokens:
        raise ConfigError(f"-e {arg!r} sets nothing; expected key=value")
    values = {}
    for token in tokens:
        key, sep, value = token.partition("=")
        if not sep:
            raise ConfigError(f"-e {arg!r}: expected key=value, got {token!r}")
        values[key] = value
    return _checked_keys(values, arg)


def _checked_keys(values: dict[Any, Any], arg: str) -> dict[str, Any]:
    for key in values:
        if not isinstance(key, str) or not _IDENTIFIER.match(key):
            raise ConfigError(f"-e {arg!r}: {key!r} is not a valid variable name")
    return dict(values)
