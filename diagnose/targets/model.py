"""An Ansible inventory in memory: groups nested to any depth, hosts, variables, Ansible's precedence.

The parsers (:mod:`diagnose.targets.yaml_source`, :mod:`diagnose.targets.ini_source`) and the host
sources (:mod:`diagnose.targets.sources`) build it; :meth:`Inventory.settle` makes it whole (orphan groups
under ``all``, no cycles, every variables file read); then it answers which groups a host is in, its merged
variables and where each was written, and which hosts a ``--limit`` pattern selects. What Ansible merely
warns about (a ``--limit`` term that matches nothing) is an error here: a typo must not quietly shrink the
set of hosts an acceptance run judges.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from diagnose.core.errors import ConfigError
from diagnose.targets.files import Origin, VarLayer, VarsFolders
from diagnose.targets.limit import apply_subscript, split_subscript, split_terms
from diagnose.targets.limit_files import LimitLine, read_limit_file, term_error

ALL = "all"
UNGROUPED = "ungrouped"
PRIORITY_VARIABLE = "ansible_group_priority"
#: A group holding this variable lists pods by label selector (:mod:`diagnose.targets.k8s_pods` finds them), so an
#: inventory whose hosts are all such pods is not empty.
SELECTOR_VARIABLE = "diagnose_k8s_selector"


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
    ``path`` is the first inventory file or folder (:meth:`add_source`); ``source`` the file being parsed,
    which parse errors name. ``playbook_dir`` adds the group_vars/ and host_vars/ beside the playbook,
    above the inventory's.
    """

    def __init__(self, playbook_dir: Path | None = None) -> None:
        self.path: Path | None = None
        self.source: Path | None = None
        self.sources: list[Path] = []
        self.playbook_dir = playbook_dir
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

    # -- building (used by the parsers and the host sources) -------------------------------------------

    def add_source(self, path: Path) -> None:
        """An inventory file or folder about to be parsed: its group_vars/ and host_vars/ count too."""
        self.sources.append(path)
        if self.path is None:
            self.path = path
        self.source = path

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

    def settle(self) -> None:
        """Make the inventory whole once hosts were added; again after more are (pods found by selector).

        Mirrors what Ansible does once a source is read: a group nobody lists as child hangs under ``all``,
        cycles are refused, and ``ungrouped`` keeps only hosts that belong to no other group. Every
        variables file of every known group and host is read here, so its errors (with its own file and
        line) come before any host is touched.
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
        self._read_vars_files()

    def _read_vars_files(self) -> None:
        folders = [s if s.is_dir() else s.parent for s in self.sources]
        wanted = VarsFolders(folders, self.playbook_dir)
        if wanted.folders != self.vars_folders.folders:
            self.vars_folders = wanted
        for folder in self.vars_folders.folders:
            for group in self.groups:
                self.vars_folders.group_layers(group, folder)
            for host in self.hosts:
                self.vars_folders.host_layers(host, folder)

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

    def group_var_origin(self, name: str, key: str) -> Origin:
        """The file and line that set a group's own ``key``: its last group_vars/ file, else the inventory."""
        for folder in reversed(self.vars_folders.folders):
            for layer in reversed(self.vars_folders.group_layers(name, folder)):
                if key in layer.values:
                    return layer.origins.get(key, (None, None))
        return self._var_lines.get(("group", name, key), (self.path, None))

    def groups_setting(self, key: str) -> list[str]:
        """The groups that set ``key`` themselves: in the inventory text or in their own group_vars/ files."""
        return [
            g
            for g in self.groups
            if key in self.groups[g].vars
            or any(
                key in layer.values
                for folder in self.vars_folders.folders
                for layer in self.vars_folders.group_layers(g, folder)
            )
        ]

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
        ``@FILE`` (Ansible's retry form; ``&@FILE``, ``!@FILE`` too) stands for the union of the file's
        lines, each a term without ``&`` or ``!`` (:func:`~diagnose.targets.limit_files.read_limit_file`).
        A term to include or intersect must match some host: a misspelt name would otherwise drop hosts (or
        keep them) silently. An exclusion that matches nothing is ignored as Ansible does: the hosts to run
        on are the same whether or not the excluded host exists.
        """
        if pattern is None:
            return self.hosts
        terms = split_terms(pattern)
        if not terms:
            raise ConfigError(f"--limit {pattern!r} is empty")
        chosen: set[str] = set()
        plain = [t for t in terms if t[0] not in "&!"]
        for term in plain:
            chosen.update(self._match_terms(term, pattern))
        if not plain:
            chosen.update(self.hosts)
        for term in terms:
            if term.startswith("&"):
                chosen.intersection_update(self._match_terms(term[1:], pattern))
        for term in terms:
            if term.startswith("!"):
                chosen.difference_update(self._match_terms(term[1:], pattern, required=False))
        selected = [h for h in self.hosts if h in chosen]
        if not selected:
            raise ConfigError(f"--limit {pattern!r} matched no hosts")
        return selected

    def _match_terms(self, term: str, pattern: str, required: bool = True) -> set[str]:
        """One term's hosts, or with ``@FILE`` those of every line of the file.

        A line naming a host that is no group is that host alone, as :meth:`_match_term` would find it,
        but by a set lookup: a retry file of every host of a large inventory would otherwise cost a glob
        scan of all hosts per line.
        """
        if not term.startswith("@"):
            return set(self._match_term(term, pattern, required))
        found: set[str] = set()
        for line in read_limit_file(term[1:]):
            if line.text in self._host_vars and line.text not in self.groups:
                found.add(line.text)
            else:
                found.update(self._match_term(line.text, pattern, required, line))
        return found

    def _match_term(
        self, term: str, pattern: str, required: bool = True, origin: LimitLine | None = None
    ) -> list[str]:
        expression, subscript = split_subscript(term)
        if expression in (ALL, "*"):
            matched = self.hosts
        elif expression.startswith("~"):
            try:
                regex = re.compile(expression[1:])
            except re.error as err:
                raise term_error(f"bad regular expression {term!r}: {err}", pattern, origin) from None
            matched = self._matches([g for g in self.groups if regex.search(g)], regex.search, True)
        else:
            groups = [g for g in self.groups if fnmatch.fnmatchcase(g, expression)]
            glob = any(c in expression for c in ".*?[")
            matched = self._matches(groups, lambda h: fnmatch.fnmatchcase(h, expression), glob or not groups)
        if subscript is not None and matched:
            matched = apply_subscript(matched, subscript)
            if not matched:  # Ansible refuses an index past the end, in exclusions too
                raise term_error(f"{term!r} is past the last of its hosts", pattern, origin)
        if not matched and required:
            raise term_error(f"{term!r} matched no hosts", pattern, origin)
        return matched

    def _matches(self, groups: list[str], host_matches: Any, hosts_too: bool) -> list[str]:
        """Hosts of the matching groups (each group in :meth:`group_members` order), then matching hosts."""
        found: dict[str, None] = {}
        for group in groups:
            found.update(dict.fromkeys(self.group_members(group)))
        if hosts_too:
            found.update(dict.fromkeys(h for h in self.hosts if host_matches(h)))
        return list(found)
