"""Hosts from Slurm: the nodes of the allocation diagnose runs in, or those ``sinfo`` lists.

On a Slurm cluster the scheduler, not a file, knows which nodes exist, which partition they serve and
which are free. ``diagnose run --slurm`` takes its hosts from there:

* inside an allocation (``SLURM_JOB_NODELIST`` and ``SLURM_JOB_ID`` set: ``salloc``, ``sbatch``) the
  job's nodes, expanded by ``scontrol show hostnames``; ``--slurm-partition`` / ``--slurm-nodes`` narrow
  them. Such hosts are reached with ``srun`` (``ansible_connection: srun``, ``bench_launcher: srun``)
  unless an inventory level or ``-e`` says otherwise: inside a job no SSH key is needed;
* otherwise the nodes ``sinfo`` lists for ``--slurm-partition``, ``--slurm-nodes`` (a hostlist expression)
  and ``--slurm-state`` (``idle,mixed``), all filtered by sinfo itself; these are reached over SSH as
  usual (srun needs an allocation).

Every node is a host of a group named after each partition it serves (``--limit gpu``,
``group_vars/gpu.yml``). An Ansible inventory given with ``-i`` adds its variables by name — ``all``,
its groups, ``host_vars``, ``group_vars`` beside it — but no hosts: the targets are Slurm's nodes
(:class:`SlurmNodes` is the run's :class:`~diagnose.targets.sources.HostSource`).

Every Slurm command is an argv list with a timeout, never a shell line; parsing is in
:mod:`diagnose.parsers.sinfo`.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from diagnose.core.check import ParseError
from diagnose.core.errors import ConfigError
from diagnose.core.process import MISSING, TIMEOUT, ProgramError, run_program
from diagnose.parsers.sinfo import SINFO_NODE_FORMAT, parse_hostnames, parse_sinfo_nodes
from diagnose.targets.sources import HostContext, HostSource

if TYPE_CHECKING:
    from diagnose.targets.model import Inventory

SLURM_TIMEOUT_S = 30.0
#: Host variable: the job whose allocation holds the node (srun steps run in it).
JOB_VAR = "slurm_job_id"
#: Host variable: the node's Slurm name where the host's name differs (inventory hosts reached by srun).
NODE_VAR = "slurm_node"
# sinfo's compact states of a drained and a draining node.
_DRAINED = ("drain", "drng")
# Inventory group names Ansible reserves: a partition of that name gets a prefix.
_RESERVED_GROUPS = ("all", "ungrouped")

#: Runs one Slurm client command (argv, timeout) and returns it finished; tests may hand in their own.
Runner = Callable[[Sequence[str], float], "subprocess.CompletedProcess[str]"]


def run_slurm(argv: Sequence[str], timeout: float = SLURM_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """One Slurm client command, outputs captured; one that cannot run is a ConfigError naming it."""
    try:
        return run_program(argv, timeout)
    except ProgramError as exc:
        hint = {
            MISSING: "run on a Slurm login or compute node, or install slurm-client",
            TIMEOUT: "is slurmctld reachable?",
        }.get(exc.reason)
        raise ConfigError(f"{exc} ({hint})" if hint else str(exc)) from None


def first_error_line(stderr: str) -> str:
    """The first line of a Slurm command's error output, for a one-line message."""
    return next((line.strip() for line in stderr.splitlines() if line.strip()), "no error text")[:300]


def _checked(done: subprocess.CompletedProcess[str]) -> str:
    if done.returncode != 0:
        raise ConfigError(f"{done.args[0]} failed: {first_error_line(done.stderr)}")
    return done.stdout


@dataclass(frozen=True)
class SlurmQuery:
    """What ``--slurm``, ``--slurm-partition``, ``--slurm-nodes`` and ``--slurm-state`` asked for."""

    partitions: str | None = None
    nodes: str | None = None
    states: str | None = None
    # False: ask sinfo even inside an allocation (a submission from within a job picks other nodes).
    allocation: bool = True

    @property
    def label(self) -> str:
        """How the run's record names this source (``slurm:partition=gpu``): the history series key, so
        it names the query, never the nodes that answered it on one night."""
        shown = [f"{k}={v}" for k, v in (("partition", self.partitions), ("nodes", self.nodes)) if v]
        return "slurm:" + ",".join(shown) if shown else "slurm"

    def described(self) -> str:
        """``partition gpu, nodes n[1-4], state idle`` for messages; ``any node`` when nothing narrows."""
        parts = (("partition", self.partitions), ("nodes", self.nodes), ("state", self.states))
        return ", ".join(f"{what} {value}" for what, value in parts if value) or "any node"

    def sinfo_argv(self, nodes: str | None = None, *, responding: bool = False) -> list[str]:
        """``sinfo -h -N -o '%N %P %t'`` with this query's filters (``nodes`` replaces the query's)."""
        argv = ["sinfo", "-h", "-N", "-o", SINFO_NODE_FORMAT]
        if self.partitions:
            argv += ["-p", self.partitions]
        if nodes or self.nodes:
            argv += ["-n", nodes or str(self.nodes)]
        if self.states and nodes is None:
            argv += ["-t", self.states]
        if responding:
            argv.append("--responding")
        return argv


@dataclass(frozen=True)
class SlurmNode:
    name: str
    partitions: tuple[str, ...]
    state: str
    responding: bool = True


@dataclass
class SlurmNodes(HostSource):
    """The nodes a query found, in Slurm's order, and the allocation they belong to (None: from sinfo).

    As a host source: every node a host of one group per partition; the inventory's own hosts that are
    no node only lend their variables.
    """

    query: SlurmQuery
    nodes: list[SlurmNode]
    job_id: str | None = None
    cluster: str | None = None
    names: list[str] = field(init=False)

    def __post_init__(self) -> None:
        self.names = [n.name for n in self.nodes]

    @property
    def label(self) -> str:
        return self.query.label

    def vars_below(self, name: str) -> dict[str, Any]:
        """Variables a node gets below every inventory level: inside an allocation srun reaches it."""
        if self.job_id is None or name not in self.names:
            return {}
        return {JOB_VAR: self.job_id, "ansible_connection": "srun", "bench_launcher": "srun"}

    def add_hosts(self, inventory: Inventory, context: HostContext) -> None:
        """Every node as a host of one group per partition (before the inventory is settled)."""
        for node in self.nodes:
            for partition in node.partitions:
                group = f"partition_{partition}" if partition in _RESERVED_GROUPS else partition
                inventory.add_host(node.name, group)

    def targets(self, selected: list[str], context: HostContext) -> list[str]:
        """The selected names that are Slurm nodes, in Slurm's order; none is a ConfigError."""
        chosen = set(selected)
        nodes = [name for name in self.names if name in chosen]
        if not nodes:
            raise ConfigError(f"--limit {context.limit!r} matched no Slurm node")
        return nodes


def expand_hostlist(expression: str, run: Runner = run_slurm) -> list[str]:
    """``gpu[001-004,010],cpu7`` → the names, expanded by Slurm itself (``scontrol show hostnames``)."""
    try:
        return parse_hostnames(_checked(run(["scontrol", "show", "hostnames", expression], SLURM_TIMEOUT_S)))
    except ParseError as exc:
        raise ConfigError(f"scontrol show hostnames {expression}: {exc}") from None


def sinfo_nodes(query: SlurmQuery, *, responding: bool = False, run: Runner = run_slurm) -> list[SlurmNode]:
    """The nodes sinfo lists for ``query`` (``responding``: only those that answer), in sinfo's order.

    sinfo's ``-t idle`` also lists drained nodes that are idle (drain is a flag on top of the state); a
    node an administrator drained is not free, so unless the states name drain such nodes are left out.
    """
    nodes = _sinfo(query.sinfo_argv(responding=responding), run)
    if query.states and "drain" not in query.states.lower():
        nodes = [n for n in nodes if n.state not in _DRAINED]
    return nodes


def _sinfo(argv: list[str], run: Runner) -> list[SlurmNode]:
    try:
        rows = parse_sinfo_nodes(_checked(run(argv, SLURM_TIMEOUT_S)))
    except ParseError as exc:
        raise ConfigError(f"sinfo: {exc}") from None
    return [SlurmNode(r["name"], tuple(r["partitions"]), r["state"], r["responding"]) for r in rows]


def in_allocation(env: Mapping[str, str]) -> bool:
    return bool(env.get("SLURM_JOB_ID") and env.get("SLURM_JOB_NODELIST"))


def find_nodes(
    query: SlurmQuery, env: Mapping[str, str] | None = None, run: Runner = run_slurm
) -> SlurmNodes:
    """The nodes ``query`` selects: the allocation's (narrowed by partition and nodes) or sinfo's.

    A query that selects nothing is a ConfigError: a run over no host would PASS vacuously.
    """
    env = os.environ if env is None else env
    cluster = env.get("SLURM_CLUSTER_NAME") or None
    if query.allocation and in_allocation(env):
        job = env["SLURM_JOB_ID"]
        if query.states:
            raise ConfigError(
                f"--slurm-state chooses nodes outside an allocation; inside job {job} the hosts are the "
                "job's nodes (narrow them with --slurm-partition or --slurm-nodes)"
            )
        allocation = expand_hostlist(env["SLURM_JOB_NODELIST"], run)
        listed = {n.name: n for n in _sinfo(query.sinfo_argv(env["SLURM_JOB_NODELIST"]), run)}
        wanted = set(expand_hostlist(query.nodes, run)) if query.nodes else None
        nodes = [listed[n] for n in allocation if n in listed and (wanted is None or n in wanted)]
        if not nodes:
            raise ConfigError(
                f"--slurm: none of job {job}'s nodes ({env['SLURM_JOB_NODELIST']}) is in {query.described()}"
            )
    else:
        job, nodes = None, sinfo_nodes(query, run=run)
        if not nodes:
            raise ConfigError(f"--slurm: sinfo lists no node for {query.described()}")
    return SlurmNodes(query, nodes, job_id=job, cluster=cluster)
