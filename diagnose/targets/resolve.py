"""The hosts of a run, each with its variables merged in the order of the design notes, lowest first:

profile < what a source knows of how to reach a host (Slurm's srun inside an allocation) < playbook
``vars`` < the inventory's levels in Ansible's own order (:meth:`~diagnose.targets.model.Inventory.layers`)
< what a source decides over them (this machine's CPU profile) < ``-e``.

The hosts come from the sources given (:mod:`diagnose.targets.sources`); every value is checked here, so a
bad ``-e expected_gpu_count=eight`` or ``ansible_port`` stops the run (exit 2, naming the file and line
that set it) before any host is touched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from diagnose.config.host_settings import first_problem
from diagnose.config.playbook import PROFILE_VARIABLE, Playbook
from diagnose.config.profile_files import Profile, load_profile
from diagnose.config.profiles import PROFILE_VARIABLES
from diagnose.core.errors import ConfigError
from diagnose.core.hosts import Host
from diagnose.core.vars import Vars
from diagnose.targets.model import Inventory
from diagnose.targets.sources import HostContext, HostSource

_GETTERS = {int: Vars.int, float: Vars.float, bool: Vars.bool, str: Vars.str, list: Vars.list}


@dataclass(frozen=True)
class _Origins:
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


def resolve_hosts(sources: Sequence[HostSource], context: HostContext) -> list[Host]:
    """The selected hosts, in the sources' order, each with its variables merged (see the module's text).

    The sources build one inventory in the order given (inventory files first: a later source's hosts
    join their groups). The profile is chosen per host (its merged ``diagnose_profile``, else the
    playbook's ``profile``), so one inventory can mix hardware generations; ``diagnose_profile`` in the
    result names the profile used (None: no profile).
    """
    playbook, extra_vars = context.playbook, context.extra_vars
    inventory = Inventory(playbook_folder(playbook))
    for source in sources:
        source.add_hosts(inventory, context)
    inventory.settle()
    if not inventory.hosts:
        raise ConfigError("inventory has no hosts (its pod groups need kubectl discovery)", inventory.path)
    origins = _Origins(inventory, playbook, extra_vars)
    profiles: dict[str, Profile] = {}
    selected = inventory.select(context.limit)
    for source in sources:
        selected = source.targets(selected, context)
    hosts = []
    for name in selected:
        above = {k: v for source in sources for k, v in source.vars_above(name).items()}
        upper = {**playbook.vars, **inventory.host_vars(name), **above, **extra_vars}
        profile_name = upper.get(PROFILE_VARIABLE) or playbook.profile
        if profile_name is not None and not isinstance(profile_name, str):
            raise origins.error(
                f"{PROFILE_VARIABLE} must name a profile, got {profile_name!r}", name, PROFILE_VARIABLE
            )
        if profile_name is not None and profile_name not in profiles:
            try:
                profiles[profile_name] = load_profile(profile_name, context.profile_dirs)
            except ConfigError as err:
                if err.path is not None:  # the profile file itself is at fault
                    raise
                raise origins.error(f"host {name}: {err.message}", name, PROFILE_VARIABLE) from None
        profile_vars = profiles[profile_name].vars if profile_name is not None else {}
        below = {k: v for source in sources for k, v in source.vars_below(name).items()}
        merged = Vars({**profile_vars, **below, **upper, PROFILE_VARIABLE: profile_name}, host=name)
        for key, variable in PROFILE_VARIABLES.items():
            try:
                _GETTERS[variable.kind](merged, key)
            except ConfigError as err:
                raise origins.error(err.message, name, key) from None
        problem = first_problem(merged, context.settings)
        if problem is not None:
            raise origins.error(problem[1], name, problem[0])
        hosts.append(Host(name=name, groups=inventory.groups_of(name), vars=merged))
    for source in sources:
        hosts = source.complete(hosts)
    return hosts
