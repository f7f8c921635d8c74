"""Where a run's hosts come from, behind one seam: :class:`HostSource`.

Inventory files (:class:`diagnose.targets.loading.InventoryFiles`), this machine
(:class:`diagnose.targets.local_machine.LocalMachine`), Slurm's nodes (:class:`diagnose.targets.slurm_nodes.SlurmNodes`)
and Kubernetes pods chosen by label (:class:`diagnose.targets.k8s_pods.PodSource`) are each a source.
:func:`diagnose.targets.resolve.resolve_hosts` builds one inventory from the sources, in order, applies
``--limit``, merges every host's variables with Ansible's precedence and lets each source complete what only
it can tell; the engine asks nothing else for hosts. A source overrides only the hooks it needs: the
defaults here change nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from diagnose.config.host_settings import SETTINGS, Validator
from diagnose.config.playbook import Playbook
from diagnose.core.hosts import Host

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

    from diagnose.targets.model import Inventory


@dataclass(frozen=True)
class HostContext:
    """What every source is given: the playbook (its ``vars`` and ``profile``; a playbook file's folder lends
    its group_vars/ and host_vars/), ``--limit``, the ``-e`` values, where profiles are looked up (None: the
    packaged ones) and the host settings each host's variables are checked against."""

    playbook: Playbook
    limit: str | None = None
    extra_vars: Mapping[str, Any] = field(default_factory=dict)
    profile_dirs: Sequence[Path | Traversable] | None = None
    settings: Mapping[str, Validator] = field(default_factory=lambda: SETTINGS)


class HostSource:
    """One place hosts come from; each hook's default leaves the hosts as they are."""

    #: What the run's record should say about how the hosts were taken (None: nothing to say).
    note: str | None = None

    def add_hosts(self, inventory: Inventory, context: HostContext) -> None:
        """Add this source's hosts, with the variables they carry from it, to the inventory being built.

        Sources run in order on one inventory, before ``--limit`` applies; one that reads the groups'
        variables makes the inventory whole first (:meth:`~diagnose.targets.model.Inventory.settle`).
        """

    def targets(self, selected: list[str], context: HostContext) -> list[str]:
        """Which hosts ``--limit`` selected stay targets, in this source's order (default: all of them)."""
        return selected

    def vars_below(self, name: str) -> Mapping[str, Any]:
        """Variables the host gets beneath the playbook's ``vars`` and every inventory level, above the
        profile: what this source knows of how to reach it, which any level may still override."""
        return {}

    def vars_above(self, name: str) -> Mapping[str, Any]:
        """Variables the host gets above every inventory level, beneath ``-e``."""
        return {}

    def complete(self, hosts: list[Host]) -> list[Host]:
        """The selected hosts, variables merged, with what only this source can tell (default: unchanged)."""
        return hosts


class CommandLineDefaults(HostSource):
    """Variables an option sets for every host as a default (``-T`` sets ``diagnose_connect_timeout``):
    beneath the playbook's ``vars`` and every inventory level, as Ansible ranks its command-line options
    below variables, so a host that needs another value keeps the one its inventory gives it."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self.values = dict(values)

    def vars_below(self, name: str) -> Mapping[str, Any]:
        return self.values
