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
import stat
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import paramiko

from diagnose.connectors.ssh_args import Hop, SSHArgs, host_ssh_args, parse_jump_spec
from diagnose.core.hosts import Host
from diagnose.core.units import counted
from diagnose.core.vars import Vars

#: The transports that log in with SSH keys (the others need none: local, kubectl, srun).
SSH_CONNECTIONS = ("ssh", "paramiko", "smart")
#: The keys OpenSSH and paramiko try in ~/.ssh when none is named.
DEFAULT_KEYS = ("id_ed25519", "id_ecdsa", "id_rsa", "id_dsa")
#: The system and user ssh_config files whose ``IdentityFile`` the ssh connector reads (through Fabric).
SSH_CONFIGS = ("/etc/ssh/ssh_config", "~/.ssh/config")
#: What to do when a host has nothing to log in with, as the message says it.
LOGIN_FIX = (
    "set ansible_ssh_private_key_file in the inventory (under all: vars: for every host), or load a key "
    "into an agent (eval $(ssh-agent); ssh-add KEY)"
)
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


def key_file_problem(path: str) -> str | None:
    """Why the private key file ``path`` cannot log in — missing, unreadable, a folder, a public key or
    PuTTY key, no key at all — or None when it reads as an OpenSSH/PEM private key. Checked before any
    connection: at connect time the same mistake reads "cannot connect to host:port", once per host."""
    expanded = os.path.expanduser(path)
    try:
        info = os.stat(expanded)
    except FileNotFoundError:
        return f"{path}: no such file"
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    if stat.S_ISDIR(info.st_mode):
        return f"{path}: is a folder, not a key file"
    return _content_problem(path, expanded, info.st_mtime_ns, info.st_size)


@lru_cache(maxsize=256)
def _content_problem(path: str, expanded: str, mtime_ns: int, size: int) -> str | None:
    """The content half of :func:`key_file_problem`, read once per file version however many hosts
    name it (``mtime_ns`` and ``size`` key the cache)."""
    try:
        with open(expanded, "rb") as handle:
            head = handle.read(4096)
    except OSError as exc:
        return f"{path}: cannot be read: {exc.strerror or exc}"
    first = head.lstrip().split(b"\n", 1)[0].strip()
    if first.startswith(b"-----BEGIN ") and first.endswith(b"PRIVATE KEY-----"):
        return None
    if first.startswith((b"ssh-", b"ecdsa-", b"sk-")):
        return f"{path}: is a public key; name the private key (the same name without .pub)"
    if first.startswith(b"PuTTY-User-Key-File"):
        return f"{path}: is a PuTTY key; convert it: puttygen {path} -O private-openssh -o KEY"
    return f"{path}: is not a private key (no -----BEGIN ... PRIVATE KEY----- line)"


def _ssh_configs() -> list[paramiko.SSHConfig]:
    """The ssh_config files the ssh connector reads, parsed once for all hosts (unreadable ones skipped)."""
    configs = []
    for name in SSH_CONFIGS:
        try:
            configs.append(paramiko.SSHConfig.from_path(os.path.expanduser(name)))
        except (OSError, paramiko.SSHException):
            continue
    return configs


def hosts_without_login(hosts: Sequence[Host], environ: Mapping[str, str] = os.environ) -> list[str]:
    """The SSH hosts that have nothing to log in with: no key file (variables, ssh args, ssh_config), no
    password, no ssh-agent (``SSH_AUTH_SOCK`` naming a socket) and no usable ``~/.ssh/id_*`` key.
    Their logins could only fail, each after its connect timeout; local, kubectl and srun hosts need none."""
    sock = environ.get("SSH_AUTH_SOCK")
    agent = bool(sock) and os.path.exists(sock or "")
    home = os.path.expanduser("~/.ssh")
    if any(key_file_problem(os.path.join(home, key)) is None for key in DEFAULT_KEYS):
        return []
    configs = _ssh_configs()
    stranded = []
    for host in hosts:
        values = host.vars
        if host.connection not in SSH_CONNECTIONS:
            continue
        if agent and values.bool("diagnose_ssh_agent", True):
            continue
        if values.str("ansible_password") or values.str("ansible_ssh_pass"):
            continue
        try:
            keys = ssh_login(values).key_files
        except ValueError:  # ssh args the inventory check refuses first
            continue
        if not keys and not any(c.lookup(host.address).get("identityfile") for c in configs):
            stranded.append(host.name)
    return stranded


def login_problem(hosts: Sequence[Host], environ: Mapping[str, str] = os.environ) -> str | None:
    """One line for every host :func:`hosts_without_login` finds, with the fix; None when all can try."""
    stranded = hosts_without_login(hosts, environ)
    if not stranded:
        return None
    named = ", ".join(stranded[:3]) + (f" and {len(stranded) - 3} more" if len(stranded) > 3 else "")
    agent = (
        "SSH_AUTH_SOCK is not set" if not environ.get("SSH_AUTH_SOCK") else "SSH_AUTH_SOCK names no socket"
    )
    return (
        f"{counted(len(stranded), 'SSH host')} ({named}) {'has' if len(stranded) == 1 else 'have'} no way to log in: no ansible_ssh_private_key_file, no "
        f"key in ~/.ssh ({', '.join(DEFAULT_KEYS)}), no ssh-agent ({agent}), no password; {LOGIN_FIX}"
    )
