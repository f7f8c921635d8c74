"""A host's SSH login as the inventory gives it, with Ansible's precedence settled once.

Two clients log in with these values: the ssh connector (paramiko through Fabric) and the custom checks
(OpenSSH, through the ssh_config that :mod:`diagnose.engine.custom` writes for testinfra). Both must
reach a host the same way, so the order is decided here:

1. an ``ansible_*`` variable (``ansible_user``, ``ansible_port``, ``ansible_ssh_private_key_file``,
   ``ansible_ssh_timeout``, ``ansible_host_key_checking``, and their older spellings);
2. the options of ``ansible_ssh_common_args`` / ``ansible_ssh_extra_args``
   (:mod:`diagnose.connectors.ssh_args`): Ansible puts the variables first on ssh's command line and
   OpenSSH keeps the first value it reads;
3. ~/.ssh/config for the host, which each client reads itself after both: :func:`choose_proxy` applies
   the same order to ProxyJump / ProxyCommand, given the client's lookup of ~/.ssh/config.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from diagnose.connectors.ssh_args import Hop, SSHArgs, host_ssh_args, parse_jump_spec
from diagnose.core.vars import Vars

#: Where a proxy set by the variables comes from, as messages name it.
FROM_VARIABLES = "ansible_ssh_common_args/ansible_ssh_extra_args"
FROM_SSH_CONFIG = "~/.ssh/config"


@dataclass(frozen=True)
class SSHLogin:
    """The login values of one host; None (or empty) where neither the variables nor the options say.

    ``key_files`` and ``known_hosts_files`` are in the order they are tried, ``~`` expanded;
    ``host_key_checking`` False admits a host known_hosts does not list.
    """

    args: SSHArgs
    user: str | None
    port: int | None
    key_files: tuple[str, ...]
    connect_timeout: float | None
    host_key_checking: bool | None
    known_hosts_files: tuple[str, ...]


def ssh_login(values: Vars, known_hosts: str | None = None) -> SSHLogin:
    """The login of a host with variables ``values``; ``known_hosts`` (the run's option) comes before
    ``diagnose_known_hosts_file``. SSHArgsError when the ssh options cannot be honoured."""
    args = host_ssh_args(values)
    key = values.str("ansible_ssh_private_key_file") or values.str("ansible_private_key_file")
    keys = [key] if key else []
    checking = values.bool("ansible_host_key_checking", None)
    known = [known_hosts or values.str("diagnose_known_hosts_file"), *args.known_hosts_files]
    return SSHLogin(
        args=args,
        user=values.str("ansible_user") or values.str("ansible_ssh_user") or args.user,
        port=values.int("ansible_port", None) or values.int("ansible_ssh_port", None) or args.port,
        key_files=tuple(os.path.expanduser(k) for k in [*keys, *args.identity_files]),
        connect_timeout=(
            values.float("ansible_ssh_timeout", None)
            or values.float("diagnose_connect_timeout", None)
            or args.connect_timeout
        ),
        host_key_checking=args.strict_host_key_checking if checking is None else checking,
        known_hosts_files=tuple(os.path.expanduser(k) for k in known if k),
    )


@dataclass(frozen=True)
class Proxy:
    """How the login reaches its host: a jump chain, a command, or directly (both empty).

    ``source`` says where it was set (FROM_VARIABLES, FROM_SSH_CONFIG, or "" for none); ``off`` that the
    variables turned off any proxy ~/.ssh/config would give (``ProxyJump=none``).
    """

    jump: tuple[Hop, ...] = ()
    command: str | None = None
    source: str = ""
    off: bool = False


def _set(value: Any) -> str | None:
    text = str(value or "").strip()
    return text if text and text.lower() != "none" else None


def choose_proxy(args: SSHArgs, config: Mapping[str, Any], names: Collection[str]) -> Proxy:
    """The variables' proxy, else the one of ``config`` (the client's lookup of ~/.ssh/config for the
    host: ``proxyjump``, ``proxycommand``). A ProxyJump there whose first hop is the host itself
    (``names``: its address and its HostName; a ``Host *`` block matches the jump host too) means none.
    SSHArgsError when that ProxyJump cannot be read."""
    if args.has_proxy or args.no_proxy:
        return Proxy(args.proxy_jump, args.proxy_command, FROM_VARIABLES, off=args.no_proxy)
    jump = _set(config.get("proxyjump"))
    if jump is not None:
        hops = parse_jump_spec(jump)
        return Proxy(hops, source=FROM_SSH_CONFIG) if hops[0].host not in names else Proxy()
    command = _set(config.get("proxycommand"))
    return Proxy(command=command, source=FROM_SSH_CONFIG) if command is not None else Proxy()
