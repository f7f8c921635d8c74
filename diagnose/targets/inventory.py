"""Ansible inventories (YAML and INI), ``--limit`` host patterns, ``-e`` extra variables, and the targets.

Operators already keep their clusters in Ansible inventories, so those files are read unchanged: groups
nested to any depth, host ranges (``node[01:64]``), variables at every level, and Ansible's precedence
between them. What Ansible merely warns about (an unknown key in a group, a ``--limit`` term that matches
nothing) is an error here: a typo must not quietly shrink the set of hosts an acceptance run judges.
Every error is a :class:`ConfigError` carrying the file and line, found before any host is touched.

Sources may be several files or folders (``-i`` repeated, an inventory folder), with ``group_vars/`` and
``host_vars/`` beside them and beside the playbook (:mod:`diagnose.targets.files`).
:func:`resolve_hosts` applies the precedence of the design notes, lowest first: profile < playbook ``vars``
< the inventory's levels in Ansible's own order (:meth:`Inventory.layers`) < ``-e``.
"""

from __future__ import annotations

import ast
import fnmatch
import os
import re
import shlex
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from diagnose.config.extra_vars import parse_extra_vars as parse_extra_vars
from diagnose.config.host_settings import first_problem
from diagnose.config.playbook import PROFILE_VARIABLE, Playbook
from diagnose.config.profile_files import Profile, load_profile
from diagnose.config.profiles import PROFILE_VARIABLES
from diagnose.config.yaml_lines import YamlMap, kind_of, parse_yaml, read_text, try_parse_yaml
from diagnose.core.errors import ConfigError
from diagnose.core.hosts import Host
from diagnose.core.vars import Vars
from diagnose.targets.files import Origin, VarLayer, VarsFolders, inventory_files
from diagnose.targets.view import list_hosts as list_hosts
from diagnose.targets.view import relevant_vars as relevant_vars

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

    from diagnose.slurm.hosts import SlurmNodes

ALL = "all"
UNGROUPED = "ungrouped"
PRIORITY_VARIABLE = "ansible_group_priority"
#: A group holding this variable lists pods by label selector; see :meth:`Inventory.expand_pod_groups`.
SELECTOR_VARIABLE = "diagnose_k8s_selector"
#: The group's variables (with ``-e``) -> its Running pods in order, or an exception whose text says
#: why; diagnose.k8s.pods.discover_pods runs kubectl, tests hand in a list.
PodDiscovery = Callable[[Mapping[str, Any]], list[str]]
#: The variables a discovered pod gets from its group's (diagnose.k8s.pods.discovered_host_vars).
PodHostVars = Callable[[Mapping[str, Any], str], dict[str, Any]]


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
    begin, end = parts[0].strip() or "0", parts[1].strip()  # [:5] starts at 0, as in Ansible
    if not end:
        raise ValueError(f"host range {pattern!r} must give its end value")
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
    """Hosts, groups and variables of one or more inventory sources, with Ansible's precedence.

    Sources are parsed into the same object in the order given, as Ansible does: hosts and groups are the
    union, and a variable set again at the same level by a later source replaces the earlier value.
    ``path`` is the first source; ``source`` the file being parsed, which parse errors name.
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.source = path
        self.sources: list[Path] = [path] if path is not None else []
        self.vars_folders = VarsFolders([])
        self.groups: dict[str, Group] = {ALL: Group(ALL), UNGROUPED: Group(UNGROUPED)}
        self._host_vars: dict[str, dict[str, Any]] = {}
        self._var_lines: dict[tuple[str, str, str], Origin] = {}
        self._edge_lines: dict[tuple[str, str], Origin] = {}
        self._priority: dict[str, int] = {}
        # Groups that a source defined ([name], [name:children], YAML): what later INI sections may name.
        self.declared: set[str] = {ALL, UNGROUPED}
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
                f"group {parent!r} cannot contain {ALL!r}: every group is already inside it",
                self.source,
                line,
            )
        self.add_group(child)
        children = self.add_group(parent).children
        if child not in children:
            children.append(child)
            self._edge_lines[(parent, child)] = (self.source, line)

    def set_group_var(self, group: str, key: str, value: Any, line: int | None) -> None:
        """A group variable of the source; ``ansible_group_priority`` orders groups and is not a variable.

        As in Ansible, the priority only counts where the inventory source sets it: group_vars/ files are
        read after groups are ordered, so a priority there would be an ordinary variable.
        """
        self.add_group(group)
        if key == PRIORITY_VARIABLE:
            if isinstance(value, bool) or not isinstance(value, (int, str)):
                raise ConfigError(f"{key} must be an integer, got {value!r}", self.source, line)
            try:
                self._priority[group] = int(value)
            except ValueError:
                raise ConfigError(f"{key} must be an integer, got {value!r}", self.source, line) from None
            return
        self.groups[group].vars[key] = value
        self._var_lines[("group", group, key)] = (self.source, line)

    def set_host_var(self, host: str, key: str, value: Any, line: int | None) -> None:
        self._host_vars[host][key] = value
        self._var_lines[("host", host, key)] = (self.source, line)

    def finish(self) -> None:
        """Attach orphan groups to ``all``, reject cycles, compute depths and ``ungrouped``.

        Mirrors what Ansible does once a source is read: a group nobody lists as child hangs under ``all``,
        and ``ungrouped`` keeps only hosts that belong to no other group.
        """
        if not self._host_vars and not self._selector_groups():
            if len(self.sources) == 1:
                raise ConfigError("inventory has no hosts", self.path)
            raise ConfigError(f"inventories {', '.join(map(str, self.sources))} have no hosts")
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

    def _selector_groups(self) -> list[str]:
        return [g.name for g in self.groups.values() if SELECTOR_VARIABLE in g.vars]

    def group_scope_vars(self, name: str) -> dict[str, Any]:
        """The variables a host of only this group would get from the groups (the group, its ancestors and
        ``all``, inventory text then group_vars/ files, in :meth:`layers` order); no host variables."""
        found, pending = set(), [name]
        while pending:
            group = pending.pop()
            if group not in found:
                found.add(group)
                pending.extend(self._parents.get(group, []))
        found.add(ALL)
        groups = sorted(found, key=lambda g: (self._depth[g], self._priority.get(g, 1), g))
        merged: dict[str, Any] = {}
        for group in groups:
            merged.update(self.groups[group].vars)
        for folder in self.vars_folders.folders:
            for layer in self.vars_folders.group_layers(ALL, folder):
                merged.update(layer.values)
        for folder in self.vars_folders.folders:
            for group in groups:
                if group != ALL:
                    for layer in self.vars_folders.group_layers(group, folder):
                        merged.update(layer.values)
        return merged

    def _group_var_origin(self, name: str, key: str) -> Origin:
        for folder in reversed(self.vars_folders.folders):
            for layer in reversed(self.vars_folders.group_layers(name, folder)):
                if key in layer.values:
                    return layer.origins.get(key, (None, None))
        return self._var_lines.get(("group", name, key), (self.path, None))

    def expand_pod_groups(
        self, discover: PodDiscovery, host_vars: PodHostVars, extra_vars: Mapping[str, Any]
    ) -> None:
        """Add the Running pods of every group that sets ``diagnose_k8s_selector``, as hosts of that group
        (named after the pod, in the order ``discover`` gives), before ``--limit`` applies.

        Each pod gets ``host_vars(group vars, pod)`` as host variables and the group's others as a member.
        A selector that matches no Running pod, or that kubectl refuses, is a ConfigError naming the group
        and the file that set the selector: a group that silently shrank would shrink the acceptance run.
        """
        groups = [
            g for g in self.groups if SELECTOR_VARIABLE in self.groups[g].vars or self._own_file_selector(g)
        ]
        listed = set(self._host_vars)
        for group in groups:
            scope = {**self.group_scope_vars(group), **extra_vars}
            path, line = self._group_var_origin(group, SELECTOR_VARIABLE)
            try:
                pods = discover(scope)
            except Exception as exc:  # the discoverer's own words are the message
                raise ConfigError(f"group {group}: {exc}", path, line) from None
            self.source = path
            for pod in pods:
                if pod in listed:
                    raise ConfigError(f"group {group}: pod {pod} is also an inventory host", path, line)
                self.add_host(pod, group)
                for key, value in host_vars(scope, pod).items():
                    self.set_host_var(pod, key, value, line)
        self.source = self.path
        if groups:
            self.finish()

    def _own_file_selector(self, group: str) -> bool:
        return any(
            SELECTOR_VARIABLE in layer.values
            for folder in self.vars_folders.folders
            for layer in self.vars_folders.group_layers(group, folder)
        )

    def _reject_cycles(self) -> None:
        state: dict[str, int] = {}  # 1: on the current path, 2: done

        def visit(name: str) -> None:
            state[name] = 1
            for child in self.groups[name].children:
                if state.get(child) == 1:
                    path, line = self._edge_lines.get((name, child), (self.path, None))
                    raise ConfigError(
                        f"group {child!r} is its own ancestor (listed as a child of {name!r})", path, line
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
        members = set(self.group_members(name))
        return [h for h in self._host_vars if h in members]

    def group_members(self, name: str) -> list[str]:
        """Hosts of a group in Ansible's order, the one ``--limit gpu[0]`` indexes: the group's own hosts
        as listed, then those of its children, grandchildren, ... level by level, each host once."""
        if name == ALL:
            return self.hosts
        order, seen, level = [name], {name}, [name]
        while level:
            level = [c for g in level for c in self.groups[g].children if c not in seen and not seen.add(c)]
            order.extend(level)
        members: dict[str, None] = {}
        for group in order:
            members.update(dict.fromkeys(self.groups[group].hosts))
        return list(members)

    def groups_of(self, host: str) -> list[str]:
        """Every group the host belongs to (with ancestors and ``all``), in the order their vars apply.

        Ansible's order: shallower groups first, then by ``ansible_group_priority`` (default 1), then by
        name; a later group's vars win.
        """
        found: set[str] = set()
        pending = list(self._direct[host])
        while pending:
            name = pending.pop()
            if name not in found:
                found.add(name)
                pending.extend(self._parents[name])
        found.add(ALL)
        return sorted(found, key=lambda g: (self._depth[g], self._priority.get(g, 1), g))

    def layers(self, host: str) -> list[VarLayer]:
        """The host's variable levels, lowest first, in the order Ansible merges them (hostvars):

        1. the inventory sources' group vars (``all``, then the other groups in :meth:`groups_of` order);
        2. ``group_vars/all`` beside each source in turn, then beside the playbook;
        3. ``group_vars/<group>`` beside each source (groups in :meth:`groups_of` order), then the playbook's;
        4. the sources' host vars; 5. ``host_vars/<host>`` beside each source, then beside the playbook.

        So any group_vars/ file beats any group variable written in the inventory file itself, and
        playbook-side files beat inventory-side ones, as in Ansible's variable precedence table.
        """
        groups = self.groups_of(host)
        layers = [self._own_layer("group", g, self.groups[g].vars) for g in groups]
        folders = self.vars_folders.folders
        layers += [layer for f in folders for layer in self.vars_folders.group_layers(ALL, f)]
        others = [g for g in groups if g != ALL]
        layers += [layer for f in folders for g in others for layer in self.vars_folders.group_layers(g, f)]
        layers.append(self._own_layer("host", host, self._host_vars[host]))
        layers += [layer for f in folders for layer in self.vars_folders.host_layers(host, f)]
        return layers

    def _own_layer(self, kind: str, name: str, values: dict[str, Any]) -> VarLayer:
        return VarLayer(values, {k: self._var_lines.get((kind, name, k), (None, None)) for k in values})

    def host_vars(self, host: str) -> dict[str, Any]:
        """Merged variables of one host (Ansible's ``hostvars``): see :meth:`layers` for the order."""
        merged: dict[str, Any] = {}
        for layer in self.layers(host):
            merged.update(layer.values)
        return merged

    def var_origin(self, host: str, key: str) -> Origin:
        """The file and line that set the winning value of ``key`` for ``host`` (for error messages)."""
        for layer in reversed(self.layers(host)):
            if key in layer.values:
                return layer.origins.get(key, (None, None))
        return (None, None)

    def var_line(self, host: str, key: str) -> int | None:
        """The line that set the winning value of ``key`` for ``host``; :meth:`var_origin` names the file."""
        return self.var_origin(host, key)[1]

    def select(self, pattern: str | None) -> list[str]:
        """Host names matched by an Ansible ``--limit`` pattern, in inventory order.

        Terms are separated by ``,`` (or ``:`` when there is no comma); a term is a group, a host, a
        glob over both (``node0*``) or ``~regex``, optionally subscripted (``gpu[0]``, ``gpu[-1]``,
        ``rack2[1:3]`` with the end included, ``rack2[2:]``); ``&term`` intersects and ``!term`` excludes.
        A term to include or intersect must match some host: a misspelt name would otherwise drop hosts (or
        keep them) silently. An exclusion that matches nothing is ignored as Ansible does: the hosts to run
        on are the same whether or not the excluded host exists.
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
                chosen.difference_update(self._match_term(term[1:], pattern, required=False))
        selected = [h for h in self.hosts if h in chosen]
        if not selected:
            raise ConfigError(f"--limit {pattern!r} matched no hosts")
        return selected

    def _match_term(self, term: str, pattern: str, required: bool = True) -> list[str]:
        expression, subscript = _split_subscript(term)
        if expression in (ALL, "*"):
            matched = self.hosts
        elif expression.startswith("~"):
            try:
                regex = re.compile(expression[1:])
            except re.error as err:
                raise ConfigError(f"--limit {pattern!r}: bad regular expression {term!r}: {err}") from None
            matched = self._matches([g for g in self.groups if regex.search(g)], regex.search, True)
        else:
            groups = [g for g in self.groups if fnmatch.fnmatchcase(g, expression)]
            glob = any(c in expression for c in ".*?[")
            matched = self._matches(groups, lambda h: fnmatch.fnmatchcase(h, expression), glob or not groups)
        if subscript is not None and matched:
            matched = _apply_subscript(matched, subscript)
            if not matched:  # Ansible refuses an index past the end, in exclusions too
                raise ConfigError(f"--limit {pattern!r}: {term!r} is past the last of its hosts")
        if not matched and required:
            raise ConfigError(f"--limit {pattern!r}: {term!r} matched no hosts")
        return matched

    def _matches(self, groups: list[str], host_matches: Any, hosts_too: bool) -> list[str]:
        """Hosts of the matching groups (each group in :meth:`group_members` order), then matching hosts."""
        found: dict[str, None] = {}
        for group in groups:
            found.update(dict.fromkeys(self.group_members(group)))
        if hosts_too:
            found.update(dict.fromkeys(h for h in self.hosts if host_matches(h)))
        return list(found)


_SUBSCRIPT = re.compile(r"^(?P<expr>.+)\[(?:(?P<index>-?\d+)|(?P<start>\d+):(?P<end>\d*))\]$")


def _split_subscript(term: str) -> tuple[str, tuple[int, int | None] | None]:
    """``gpu[1:3]`` → ("gpu", (1, 3)); ``gpu[2:]`` → (2, -1); ``gpu[-1]`` → (-1, None). Regexes have none.

    Host names never hold brackets once ranges are expanded, so a trailing ``[...]`` in the shapes Ansible
    accepts is always a subscript (any other bracket stays a glob character class).
    """
    match = None if term.startswith("~") else _SUBSCRIPT.match(term)
    if match is None:
        return term, None
    if match["index"] is not None:
        return match["expr"], (int(match["index"]), None)
    return match["expr"], (int(match["start"]), int(match["end"]) if match["end"] else -1)


def _apply_subscript(hosts: list[str], subscript: tuple[int, int | None]) -> list[str]:
    """Ansible's slice: the end is included, ``-1`` as end means the last host; an index past the end
    selects nothing (the caller reports the term). An end of 0 selects the start host alone, as there."""
    start, end = subscript
    if end:
        return hosts[start : (len(hosts) - 1 if end == -1 else end) + 1]
    try:
        return [hosts[start]]
    except IndexError:
        return []


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
    names, port = _expand(str(key), inventory.source, line)
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
    path = inventory.source
    group, state = UNGROUPED, "hosts"
    declared = inventory.declared  # groups of earlier sources count, as in Ansible
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
    path = inventory.source
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


def load_inventory(path: Path, playbook_dir: Path | None = None) -> Inventory:
    """Read one Ansible inventory source (a file or a folder) with its group_vars/ and host_vars/."""
    return load_inventories([path], playbook_dir)


def load_inventories(
    paths: Sequence[Path],
    playbook_dir: Path | None = None,
    seed: Callable[[Inventory], None] | None = None,
) -> Inventory:
    """Read inventory sources as ``ansible -i A -i B`` does, with the group_vars/ and host_vars/ beside them.

    A folder source is every file in it (sorted, recursively, skipping what Ansible skips: hidden files,
    ``*.orig``, ``*.retry``, ``*.cfg``, ``~`` backups, ..., and the group_vars/host_vars folders). Sources
    merge in the order given: hosts and groups are the union, a later source's variable at the same level
    wins. ``playbook_dir`` adds the group_vars/ and host_vars/ beside the playbook, above the inventory's.
    Every variables file of every known group and host is read here, so its errors (with its own file and
    line) come before any host is touched. ``seed`` adds hosts from elsewhere (Slurm's nodes) once the
    files are read; with a seed the files may hold variables only, or be none at all.
    """
    sources = [Path(p) for p in paths]
    if not sources and seed is None:
        raise ConfigError("no inventory given")
    inventory = Inventory(sources[0] if sources else None)
    inventory.sources = sources
    for source in sources:
        if source.is_dir():
            for file in inventory_files(source):
                _parse_source(file, inventory, in_folder=True)
        else:
            _parse_source(source, inventory, in_folder=False)
    inventory.source = sources[0] if sources else None
    if seed is not None:
        seed(inventory)
    inventory.finish()
    folders = [s if s.is_dir() else s.parent for s in sources]
    inventory.vars_folders = VarsFolders(folders, playbook_dir)
    for folder in inventory.vars_folders.folders:
        for group in inventory.groups:
            inventory.vars_folders.group_layers(group, folder)
        for host in inventory.hosts:
            inventory.vars_folders.host_layers(host, folder)
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
        _parse_ini_inventory(text.splitlines(), inventory)
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
        _parse_yaml_inventory(data, inventory)
    else:
        data = try_parse_yaml(text)
        if isinstance(data, YamlMap):
            _parse_yaml_inventory(data, inventory)
        else:
            _parse_ini_inventory(text.splitlines(), inventory)


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
            return ConfigError(message, *self.inventory.var_origin(host, key))
        lines = self.playbook.lines
        return ConfigError(message, self.playbook.path, lines.get(("vars", key), lines.get(("", "profile"))))


def playbook_folder(playbook: Playbook) -> Path | None:
    """Where a user's playbook file lies (its group_vars/ and host_vars/ count); None for packaged ones,
    whose folder holds diagnose's own files, not the operator's variables."""
    package = Path(__file__).resolve().parents[1]
    folder = Path(playbook.path).expanduser().resolve().parent
    return None if folder == package or package in folder.parents else folder


def resolve_hosts(
    inventory_path: Path | str | Sequence[Path | str],
    playbook: Playbook,
    limit: str | None,
    extra_vars: Mapping[str, Any],
    profile_dirs: Sequence[Path | Traversable] | None = None,
    discover: tuple[PodDiscovery, PodHostVars] | None = None,
    slurm: SlurmNodes | None = None,
) -> list[Host]:
    """The selected hosts, in inventory order, each with its variables merged.

    ``inventory_path`` is one source or several (``-i`` repeated), merged as :func:`load_inventories` says.
    Lowest first: profile < playbook ``vars`` < inventory (its files and group_vars/host_vars beside it and
    beside a playbook file, in Ansible's order: :meth:`Inventory.layers`) < ``-e``. The profile is
    chosen per host (its merged ``diagnose_profile``, else the playbook's ``profile``), so one inventory can
    mix hardware generations; ``diagnose_profile`` in the result names the profile used (None: no profile).
    Expected-value variables are type-checked here, so a bad ``-e expected_gpu_count=eight`` stops the run
    before any host is touched. ``discover`` expands groups of pods chosen by label selector
    (:meth:`Inventory.expand_pod_groups`; diagnose.engine.run hands in diagnose.k8s.pods's kubectl calls).
    ``slurm`` makes Slurm's nodes the targets (:mod:`diagnose.slurm.hosts`): the inventory sources then
    only lend their variables, and the nodes' defaults (srun inside an allocation) sit just above the profile.
    """
    paths = [inventory_path] if isinstance(inventory_path, (str, os.PathLike)) else list(inventory_path)
    seed = slurm.add_to if slurm is not None else None
    inventory = load_inventories([Path(p) for p in paths], playbook_folder(playbook), seed)
    if discover is not None:
        inventory.expand_pod_groups(*discover, extra_vars)
    if not inventory.hosts:
        raise ConfigError("inventory has no hosts (its pod groups need kubectl discovery)", inventory.path)
    sources = _Sources(inventory, playbook, extra_vars)
    profiles: dict[str, Profile] = {}
    hosts = []
    selected = inventory.select(limit)
    if slurm is not None:
        selected = slurm.order(selected)
        if not selected:
            raise ConfigError(f"--limit {limit!r} matched no Slurm node")
    for name in selected:
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
        below = slurm.host_defaults(name) if slurm is not None else {}
        merged = Vars({**profile_vars, **below, **upper, PROFILE_VARIABLE: profile_name}, host=name)
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
