"""Ansible inventories (YAML and INI), ``--limit`` host patterns, ``-e`` extra variables, and the targets.

Operators already keep their clusters in Ansible inventories, so those files are read unchanged: groups
nested to any depth, host ranges (``node[01:64]``), variables at every level, and Ansible's precedence
between them. What Ansible merely warns about (an unknown key in a group, a ``--limit`` term that matches
nothing) is an error here: a typo must not quietly shrink the set of hosts an acceptance run judges.
Every error is a :class:`ConfigError` carrying the file and line, found before any host is touched.

:func:`resolve_hosts` applies the precedence of the design notes, lowest first:
profile < playbook ``vars`` < inventory ``all`` < groups < host < ``-e``.
"""

from __future__ import annotations

import ast
import fnmatch
import re
import shlex
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from diagnose.errors import ConfigError
from diagnose.host_settings import first_problem
from diagnose.hosts import Host
from diagnose.playbook import (
    PROFILE_VARIABLE,
    Playbook,
    Profile,
    YamlMap,
    kind_of,
    load_profile,
    parse_yaml,
    read_text,
    try_parse_yaml,
)
from diagnose.redact import redact_extra_vars
from diagnose.variables import PROFILE_VARIABLES
from diagnose.vars import Vars

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

ALL = "all"
UNGROUPED = "ungrouped"


# ------------------------------------------------------------------------------------------------ host ranges

_RANGE = re.compile(r"\[([^\[\]]*)\]")


def expand_host_pattern(pattern: str) -> list[str]:
    """Expand Ansible host ranges: ``node[01:64]`` (padding kept), ``[1:10:2]`` (step), ``rack[a:f]``.

    Several ranges in one name multiply out left to right (``r[1:2]n[1:3]`` gives r1n1, r1n2, ...).
    Raises ValueError with the reason; the caller adds file and line.
    """
    match = _RANGE.search(pattern)
    if match is None:
        if "[" in pattern or "]" in pattern:
            raise ValueError(f"unbalanced bracket in host name {pattern!r}")
        return [pattern]
    head, tail = pattern[: match.start()], pattern[match.end() :]
    if "[" in head or "]" in head:
        raise ValueError(f"unbalanced bracket in host name {pattern!r}")
    names = []
    for item in _range_items(match.group(1), pattern):
        names.extend(expand_host_pattern(head + item + tail))
    return names


def _range_items(spec: str, pattern: str) -> list[str]:
    parts = spec.split(":")
    if len(parts) not in (2, 3):
        raise ValueError(f"host range {pattern!r} must be [begin:end] or [begin:end:step]")
    begin, end = parts[0].strip(), parts[1].strip()
    step_text = parts[2].strip() if len(parts) == 3 else "1"
    if not step_text.isdigit() or int(step_text) < 1:
        raise ValueError(f"host range {pattern!r} has step {step_text!r}; it must be a positive integer")
    step = int(step_text)
    if begin.isdigit() and end.isdigit():
        if int(begin) > int(end):
            raise ValueError(f"host range {pattern!r} must count upwards (begin <= end)")
        width = len(begin) if begin.startswith("0") and len(begin) > 1 else 0
        if width and len(end) != width:
            raise ValueError(f"host range {pattern!r} pads begin to {width} digits; end must have as many")
        return [str(n).zfill(width) for n in range(int(begin), int(end) + 1, step)]
    letters = string.ascii_letters
    if len(begin) == 1 and len(end) == 1 and begin in letters and end in letters:
        if letters.index(begin) > letters.index(end):
            raise ValueError(f"host range {pattern!r} must count upwards (begin <= end)")
        return list(letters[letters.index(begin) : letters.index(end) + 1 : step])
    raise ValueError(f"host range {pattern!r} must span two numbers or two single letters")


_PORT_SUFFIX = re.compile(r"^(?P<name>.+):(?P<port>\d+)$")


def _split_port(pattern: str) -> tuple[str, int | None]:
    """``name:2222`` names the SSH port inline, as Ansible allows; IPv6 addresses (several colons) do not."""
    outside_ranges = _RANGE.sub("", pattern)
    match = _PORT_SUFFIX.match(pattern)
    if match and outside_ranges.count(":") == 1:
        return match.group("name"), int(match.group("port"))
    return pattern, None


# ------------------------------------------------------------------------------------------------- inventory


@dataclass
class Group:
    """An inventory group: its own vars, the hosts listed directly in it, and its child groups."""

    name: str
    vars: dict[str, Any] = field(default_factory=dict)
    hosts: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)


class Inventory:
    """Hosts, groups and variables of one inventory file, with Ansible's precedence between levels."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.groups: dict[str, Group] = {ALL: Group(ALL), UNGROUPED: Group(UNGROUPED)}
        self._host_vars: dict[str, dict[str, Any]] = {}
        self._var_lines: dict[tuple[str, str, str], int | None] = {}
        self._edge_lines: dict[tuple[str, str], int | None] = {}
        self._parents: dict[str, list[str]] = {}
        self._depth: dict[str, int] = {}
        self._direct: dict[str, list[str]] = {}

    # -- building (used by the parsers) ----------------------------------------------------------------

    def add_group(self, name: str) -> Group:
        if name not in self.groups:
            self.groups[name] = Group(name)
        return self.groups[name]

    def add_host(self, name: str, group: str) -> None:
        self._host_vars.setdefault(name, {})
        members = self.add_group(group).hosts
        if name not in members:
            members.append(name)

    def add_child(self, parent: str, child: str, line: int | None) -> None:
        if child == ALL:
            raise ConfigError(
                f"group {parent!r} cannot contain {ALL!r}: every group is already inside it", self.path, line
            )
        self.add_group(child)
        children = self.add_group(parent).children
        if child not in children:
            children.append(child)
            self._edge_lines[(parent, child)] = line

    def set_group_var(self, group: str, key: str, value: Any, line: int | None) -> None:
        self.add_group(group).vars[key] = value
        self._var_lines[("group", group, key)] = line

    def set_host_var(self, host: str, key: str, value: Any, line: int | None) -> None:
        self._host_vars[host][key] = value
        self._var_lines[("host", host, key)] = line

    def finish(self) -> None:
        """Attach orphan groups to ``all``, reject cycles, compute depths and ``ungrouped``.

        Mirrors what Ansible does once a source is read: a group nobody lists as child hangs under ``all``,
        and ``ungrouped`` keeps only hosts that belong to no other group.
        """
        if not self._host_vars:
            raise ConfigError("inventory has no hosts", self.path)
        listed = {child for group in self.groups.values() for child in group.children}
        for name in self.groups:
            if name != ALL and name not in listed:
                self.groups[ALL].children.append(name)
        self._parents = {name: [] for name in self.groups}
        for group in self.groups.values():
            for child in group.children:
                self._parents[child].append(group.name)
        self._reject_cycles()
        for name in self.groups:
            self._depth_of(name)
        grouped = {h for g in self.groups.values() if g.name not in (ALL, UNGROUPED) for h in g.hosts}
        ungrouped = self.groups[UNGROUPED]
        ungrouped.hosts = [h for h in self._host_vars if h not in grouped]
        self.groups[ALL].hosts = []
        self._direct = {h: [] for h in self._host_vars}
        for group in self.groups.values():
            for host in group.hosts:
                self._direct[host].append(group.name)

    def _reject_cycles(self) -> None:
        state: dict[str, int] = {}  # 1: on the current path, 2: done

        def visit(name: str) -> None:
            state[name] = 1
            for child in self.groups[name].children:
                if state.get(child) == 1:
                    raise ConfigError(
                        f"group {child!r} is its own ancestor (listed as a child of {name!r})",
                        self.path,
                        self._edge_lines.get((name, child)),
                    )
                if child not in state:
                    visit(child)
            state[name] = 2

        for name in self.groups:
            if name not in state:
                visit(name)

    def _depth_of(self, name: str) -> int:
        if name not in self._depth:
            parents = self._parents[name]
            self._depth[name] = 1 + max(self._depth_of(p) for p in parents) if parents else 0
        return self._depth[name]

    # -- queries ---------------------------------------------------------------------------------------

    @property
    def hosts(self) -> list[str]:
        """Every host, in the order the inventory first names it."""
        return list(self._host_vars)

    def group_hosts(self, name: str) -> list[str]:
        """Hosts of a group and of all its descendants, in inventory order."""
        if name == ALL:
            return self.hosts
        members: set[str] = set()
        pending = [name]
        seen: set[str] = set()
        while pending:
            group = self.groups[pending.pop()]
            if group.name in seen:
                continue
            seen.add(group.name)
            members.update(group.hosts)
            pending.extend(group.children)
        return [h for h in self._host_vars if h in members]

    def groups_of(self, host: str) -> list[str]:
        """Every group the host belongs to (with ancestors and ``all``), in the order their vars apply.

        Ansible's order: shallower groups first, then by name; a later group's vars win.
        """
        found: set[str] = set()
        pending = list(self._direct[host])
        while pending:
            name = pending.pop()
            if name not in found:
                found.add(name)
                pending.extend(self._parents[name])
        found.add(ALL)
        return sorted(found, key=lambda g: (self._depth[g], g))

    def host_vars(self, host: str) -> dict[str, Any]:
        """Merged variables: ``all`` < parent groups < child groups (same depth: by name) < host."""
        merged: dict[str, Any] = {}
        for group in self.groups_of(host):
            merged.update(self.groups[group].vars)
        merged.update(self._host_vars[host])
        return merged

    def var_line(self, host: str, key: str) -> int | None:
        """The line that set the winning value of ``key`` for ``host`` (for error messages)."""
        if ("host", host, key) in self._var_lines:
            return self._var_lines[("host", host, key)]
        for group in reversed(self.groups_of(host)):
            if key in self.groups[group].vars:
                return self._var_lines.get(("group", group, key))
        return None

    def select(self, pattern: str | None) -> list[str]:
        """Host names matched by an Ansible ``--limit`` pattern, in inventory order.

        Terms are separated by ``,`` (or ``:`` when there is no comma); a term is a group, a host, a
        glob over both (``node0*``) or ``~regex``; ``&term`` intersects and ``!term`` excludes. Each
        term must match some host: a misspelt name would otherwise drop hosts (or keep them) silently.
        """
        if pattern is None:
            return self.hosts
        terms = _split_terms(pattern)
        if not terms:
            raise ConfigError(f"--limit {pattern!r} is empty")
        chosen: set[str] = set()
        plain = [t for t in terms if t[0] not in "&!"]
        for term in plain:
            chosen.update(self._match_term(term, pattern))
        if not plain:
            chosen.update(self.hosts)
        for term in terms:
            if term.startswith("&"):
                chosen.intersection_update(self._match_term(term[1:], pattern))
        for term in terms:
            if term.startswith("!"):
                chosen.difference_update(self._match_term(term[1:], pattern))
        selected = [h for h in self.hosts if h in chosen]
        if not selected:
            raise ConfigError(f"--limit {pattern!r} matched no hosts")
        return selected

    def _match_term(self, term: str, pattern: str) -> set[str]:
        if term in (ALL, "*"):
            return set(self.hosts)
        if term.startswith("~"):
            try:
                regex = re.compile(term[1:])
            except re.error as err:
                raise ConfigError(f"--limit {pattern!r}: bad regular expression {term!r}: {err}") from None
            groups = [g for g in self.groups if regex.search(g)]
            hosts = [h for h in self.hosts if regex.search(h)]
        else:
            groups = [g for g in self.groups if fnmatch.fnmatchcase(g, term)]
            glob = any(c in term for c in "*?[")
            hosts = [h for h in self.hosts if fnmatch.fnmatchcase(h, term)] if glob or not groups else []
        matched = set(hosts)
        for group in groups:
            matched.update(self.group_hosts(group))
        if not matched:
            raise ConfigError(f"--limit {pattern!r}: {term!r} matched no hosts")
        return matched


def _split_terms(pattern: str) -> list[str]:
    """Split on ``,``; without commas on ``:`` outside brackets (Ansible's older separator)."""
    if "," in pattern:
        raw = pattern.split(",")
    else:
        raw, depth, term = [], 0, ""
        for char in pattern:
            depth += {"[": 1, "]": -1}.get(char, 0)
            if char == ":" and depth <= 0:
                raw.append(term)
                term = ""
            else:
                term += char
        raw.append(term)
    return [t.strip() for t in raw if t.strip() and t.strip() not in ("&", "!")]


# ----------------------------------------------------------------------------------------------- YAML format

_GROUP_KEYS = ("hosts", "vars", "children")


def _parse_yaml_inventory(data: YamlMap, inventory: Inventory) -> None:
    if "plugin" in data:
        raise ConfigError(
            "inventory plugin configurations are not supported; list hosts and groups instead",
            inventory.path,
            data.key_lines["plugin"],
        )
    for name, body in data.items():
        _yaml_group(str(name), body, inventory, data.value_lines[name])


def _yaml_group(name: str, body: Any, inventory: Inventory, line: int) -> None:
    path = inventory.path
    inventory.add_group(name)
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
    names, port = _expand(str(key), inventory.path, line)
    if host_vars is not None and not isinstance(host_vars, YamlMap):
        raise ConfigError(
            f"vars of host {key!r} must be a mapping, got {kind_of(host_vars)}",
            inventory.path,
            hosts.value_lines[key],
        )
    for host in names:
        inventory.add_host(host, group)
        if port is not None:
            inventory.set_host_var(host, "ansible_port", port, line)
        for var, value in (host_vars or {}).items():
            var_line = host_vars.key_lines[var]
            inventory.set_host_var(host, _var_name(var, inventory.path, var_line), value, var_line)


def _var_name(key: Any, path: Path | None, line: int | None) -> str:
    if not isinstance(key, str) or not key:
        raise ConfigError(f"variable name must be a non-empty string, got {key!r}", path, line)
    return key


def _expand(pattern: str, path: Path | None, line: int | None) -> tuple[list[str], int | None]:
    name, port = _split_port(pattern.strip())
    if not name:
        raise ConfigError(f"empty host name in {pattern!r}", path, line)
    try:
        return expand_host_pattern(name), port
    except ValueError as err:
        raise ConfigError(str(err), path, line) from None


# ------------------------------------------------------------------------------------------------ INI format

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


def _parse_ini_inventory(lines: list[str], inventory: Inventory) -> None:
    path = inventory.path
    group, state = UNGROUPED, "hosts"
    declared = {ALL, UNGROUPED}
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
    path = inventory.path
    try:
        tokens = shlex.split(line, comments=True)
    except ValueError as err:
        raise ConfigError(f"cannot parse host line ({str(err).lower()}): {line!r}", path, number) from None
    if not tokens:
        return
    names, port = _expand(tokens[0], path, number)
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


# ------------------------------------------------------------------------------------------------ loading

_YAML_SUFFIXES = {".yaml", ".yml", ".json"}
_INI_SUFFIXES = {".ini", ".cfg"}


def load_inventory(path: Path) -> Inventory:
    """Read an Ansible inventory, YAML or INI.

    ``.yaml``/``.yml``/``.json`` are YAML and ``.ini``/``.cfg`` are INI; for any other name (Ansible's
    classic ``hosts`` file has none) the content decides: a YAML mapping of groups is YAML, anything
    else is read as INI.
    """
    path = Path(path)
    text = read_text(path, "inventory")
    inventory = Inventory(path)
    suffix = path.suffix.lower()
    if suffix in _INI_SUFFIXES:
        _parse_ini_inventory(text.splitlines(), inventory)
    elif suffix in _YAML_SUFFIXES:
        data = parse_yaml(text, path)
        if data is None:
            raise ConfigError("inventory has no hosts", path)
        if not isinstance(data, YamlMap):
            raise ConfigError(
                f"a YAML inventory must be a mapping of groups (all:, ...), got {kind_of(data)}",
                path,
                getattr(data, "line", 1),
            )
        _parse_yaml_inventory(data, inventory)
    else:
        data = try_parse_yaml(text)
        if isinstance(data, YamlMap):
            _parse_yaml_inventory(data, inventory)
        else:
            _parse_ini_inventory(text.splitlines(), inventory)
    inventory.finish()
    return inventory


# ------------------------------------------------------------------------------------------------ -e values

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


# ------------------------------------------------------------------------------------------------ the targets

_GETTERS = {int: Vars.int, float: Vars.float, bool: Vars.bool, str: Vars.str, list: Vars.list}


@dataclass(frozen=True)
class _Sources:
    """Where variables come from, to point an error at the line that set the offending value."""

    inventory: Inventory
    playbook: Playbook
    extra_vars: Mapping[str, Any]

    def error(self, message: str, host: str, key: str) -> ConfigError:
        if key in self.extra_vars:
            return ConfigError(f"{message} (set with -e)")
        if key in self.inventory.host_vars(host):
            return ConfigError(message, self.inventory.path, self.inventory.var_line(host, key))
        lines = self.playbook.lines
        return ConfigError(message, self.playbook.path, lines.get(("vars", key), lines.get(("", "profile"))))


def resolve_hosts(
    inventory_path: Path,
    playbook: Playbook,
    limit: str | None,
    extra_vars: Mapping[str, Any],
    profile_dirs: Sequence[Path | Traversable] | None = None,
) -> list[Host]:
    """The selected hosts, in inventory order, each with its variables merged.

    Lowest first: profile < playbook ``vars`` < inventory ``all`` < groups < host < ``-e``. The profile is
    chosen per host (its merged ``diagnose_profile``, else the playbook's ``profile``), so one inventory can
    mix hardware generations; ``diagnose_profile`` in the result names the profile used (None: no profile).
    Expected-value variables are type-checked here, so a bad ``-e expected_gpu_count=eight`` stops the run
    before any host is touched.
    """
    inventory = load_inventory(inventory_path)
    sources = _Sources(inventory, playbook, extra_vars)
    profiles: dict[str, Profile] = {}
    hosts = []
    for name in inventory.select(limit):
        upper = {**playbook.vars, **inventory.host_vars(name), **extra_vars}
        profile_name = upper.get(PROFILE_VARIABLE) or playbook.profile
        if profile_name is not None and not isinstance(profile_name, str):
            raise sources.error(
                f"{PROFILE_VARIABLE} must name a profile, got {profile_name!r}", name, PROFILE_VARIABLE
            )
        if profile_name is not None and profile_name not in profiles:
            try:
                profiles[profile_name] = load_profile(profile_name, profile_dirs)
            except ConfigError as err:
                if err.path is not None:  # the profile file itself is at fault
                    raise
                raise sources.error(f"host {name}: {err.message}", name, PROFILE_VARIABLE) from None
        profile_vars = profiles[profile_name].vars if profile_name is not None else {}
        merged = Vars({**profile_vars, **upper, PROFILE_VARIABLE: profile_name}, host=name)
        for key, variable in PROFILE_VARIABLES.items():
            try:
                _GETTERS[variable.kind](merged, key)
            except ConfigError as err:
                raise sources.error(err.message, name, key) from None
        problem = first_problem(merged)
        if problem is not None:
            raise sources.error(problem[1], name, problem[0])
        hosts.append(Host(name=name, groups=inventory.groups_of(name), vars=merged))
    return hosts
