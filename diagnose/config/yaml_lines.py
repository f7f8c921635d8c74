"""YAML that keeps its lines: what every configuration reader (playbook, profile, inventory, variables
files, ``-e @file``) parses with, so a schema error found after loading still names the file and line.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from diagnose.core.errors import ConfigError


class YamlMap(dict):
    """A YAML mapping that remembers the line of itself, of each key and of each value (1-based).

    Schema errors found after loading (an unknown key, a value of the wrong type) must still name the
    line, so the loader keeps the positions the parser knew.
    """

    line: int | None = None

    def __init__(self) -> None:
        super().__init__()
        self.key_lines: dict[Any, int] = {}
        self.value_lines: dict[Any, int] = {}


class YamlList(list):
    """A YAML sequence that remembers its own line and the line of each item (1-based)."""

    line: int | None = None

    def __init__(self) -> None:
        super().__init__()
        self.item_lines: list[int] = []


class _LineLoader(yaml.SafeLoader):
    """SafeLoader whose mappings and sequences carry their source lines."""


def _construct_map(loader: _LineLoader, node: yaml.MappingNode) -> Iterator[YamlMap]:
    data = YamlMap()
    data.line = node.start_mark.line + 1
    yield data
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
            continue
        key = loader.construct_object(key_node)
        line = key_node.start_mark.line + 1
        if key in seen:
            raise ConfigError(f"duplicate key {key!r} (first at line {seen[key]})", None, line)
        seen[key] = line
    loader.flatten_mapping(node)
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError:
            raise ConfigError(
                "a mapping key must be a plain value", None, key_node.start_mark.line + 1
            ) from None
        data[key] = loader.construct_object(value_node, deep=True)
        data.key_lines[key] = key_node.start_mark.line + 1
        data.value_lines[key] = value_node.start_mark.line + 1


def _construct_seq(loader: _LineLoader, node: yaml.SequenceNode) -> Iterator[YamlList]:
    data = YamlList()
    data.line = node.start_mark.line + 1
    yield data
    for item in node.value:
        data.append(loader.construct_object(item, deep=True))
        data.item_lines.append(item.start_mark.line + 1)


def _construct_unsafe(loader: _LineLoader, node: yaml.Node) -> Any:
    # Ansible's ``!unsafe`` only stops templating; we never template, so the value is the plain scalar.
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    raise ConfigError("!unsafe is only supported on plain values", None, node.start_mark.line + 1)


_LineLoader.add_constructor("tag:yaml.org,2002:map", _construct_map)
_LineLoader.add_constructor("tag:yaml.org,2002:seq", _construct_seq)
_LineLoader.add_constructor("!unsafe", _construct_unsafe)


def parse_yaml(text: str, path: str | Path | None) -> Any:
    """Parse YAML text into plain values, with :class:`YamlMap`/:class:`YamlList` for collections.

    Any YAML error becomes a one-line :class:`ConfigError` at the line the parser stopped on.
    """
    try:
        return yaml.load(text, Loader=_LineLoader)
    except ConfigError as err:
        raise ConfigError(err.message, path, err.line) from None
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        context = err.context
        if (
            context
            and err.context_mark
            and err.problem_mark
            and err.context_mark.line != err.problem_mark.line
        ):
            context += f" started at line {err.context_mark.line + 1}"
        detail = " ".join(", ".join(p for p in (context, err.problem) if p).split())
        raise ConfigError(f"invalid YAML: {detail}", path, mark.line + 1 if mark else None) from None
    except yaml.YAMLError as err:
        raise ConfigError(f"invalid YAML: {' '.join(str(err).split())}", path) from None


def try_parse_yaml(text: str) -> Any:
    """The parsed YAML, or None if the text is not YAML at all (deciding whether a file is INI)."""
    try:
        return yaml.load(text, Loader=_LineLoader)
    except (yaml.YAMLError, ConfigError):
        return None


def read_text(path: Path, what: str) -> str:
    """A config file's text, or a ConfigError saying why it cannot be read (missing, a folder, binary)."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{what} file not found", path) from None
    except IsADirectoryError:
        raise ConfigError(f"{what} path is a folder, not a file", path) from None
    except UnicodeDecodeError as err:
        raise ConfigError(f"{what} file is not UTF-8 text ({err.reason} at byte {err.start})", path) from None
    except OSError as err:
        raise ConfigError(f"cannot read {what} file: {err.strerror or err}", path) from None


def kind_of(value: Any) -> str:
    """How an error message names the type of a value someone wrote."""
    return {
        YamlMap: "a mapping",
        YamlList: "a list",
        str: "a string",
        bool: "true/false",
        int: "a number",
        float: "a number",
    }.get(type(value), type(value).__name__)
