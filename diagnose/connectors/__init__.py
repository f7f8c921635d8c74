"""Connectors: how diagnose reaches a host, one module each, chosen by ``ansible_connection``.

The engine, the benchmark launchers and the samplers talk to a :class:`Connection` and never ask which
connector it is. To add one (``kubectl`` for pods, ``srun`` for Slurm steps): subclass
:class:`~diagnose.connectors.base.Connection` in a new module, implement ``open``, ``_execute`` and
``close``, and name it in :data:`CONNECTORS`.
"""

from __future__ import annotations

from collections.abc import Callable

from diagnose.connectors.base import (
    ConnectError,
    Connection,
    batch_script,
    env_prefix,
    kill_session_script,
    parse_batch_output,
    running_batch_hosts,
    running_commands,
    stop_running_batches,
)
from diagnose.connectors.jump import close_jump_hosts, open_jump_hosts
from diagnose.connectors.kubectl import KubectlConnection
from diagnose.connectors.local import LocalConnection
from diagnose.connectors.srun import SrunConnection
from diagnose.connectors.ssh import SSHConnection
from diagnose.core.hosts import Host

__all__ = [
    "CONNECTORS",
    "ConnectError",
    "Connection",
    "KubectlConnection",
    "LocalConnection",
    "SSHConnection",
    "SrunConnection",
    "batch_script",
    "close_jump_hosts",
    "connect",
    "env_prefix",
    "kill_session_script",
    "open_jump_hosts",
    "parse_batch_output",
    "running_batch_hosts",
    "running_commands",
    "stop_running_batches",
]


def _ssh(host: Host, accept_unknown_host_keys: bool, known_hosts: str | None) -> Connection:
    return SSHConnection(host, accept_unknown_host_keys=accept_unknown_host_keys, known_hosts=known_hosts)


def _local(host: Host, accept_unknown_host_keys: bool, known_hosts: str | None) -> Connection:
    return LocalConnection(host)


def _kubectl(host: Host, accept_unknown_host_keys: bool, known_hosts: str | None) -> Connection:
    return KubectlConnection(host)


def _srun(host: Host, accept_unknown_host_keys: bool, known_hosts: str | None) -> Connection:
    return SrunConnection(host)


#: ``ansible_connection`` value -> how to build its connector (Ansible's ``paramiko`` and ``smart`` are ssh).
CONNECTORS: dict[str, Callable[[Host, bool, str | None], Connection]] = {
    "ssh": _ssh,
    "paramiko": _ssh,
    "smart": _ssh,
    "local": _local,
    "kubectl": _kubectl,
    "srun": _srun,
}


def connect(host: Host, accept_unknown_host_keys: bool = False, known_hosts: str | None = None) -> Connection:
    """A connection of the kind the host's ``ansible_connection`` asks for (not yet opened)."""
    build = CONNECTORS.get(host.connection)
    if build is None:
        raise ConnectError(
            f"ansible_connection={host.connection!r} is not supported (use {', '.join(sorted(CONNECTORS))})"
        )
    return build(host, accept_unknown_host_keys, known_hosts)
