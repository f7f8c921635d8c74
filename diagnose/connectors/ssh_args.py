"""What ``ansible_ssh_common_args`` / ``ansible_ssh_extra_args`` may hold, read without touching a host.

Ansible appends these variables to the OpenSSH command line; diagnose speaks SSH through paramiko, so it
cannot hand them to a client. Instead the words are read here, with :mod:`shlex` as a shell would split
them, and each option is either honoured, accepted as a documented no-op, or refused. A refusal is a
:class:`SSHArgsError` naming the option; host_settings turns it into a configuration error naming the
variable, file and line (exit 2) before any host is touched, so an option never silently loses its effect.

Honoured:

* ``-J spec`` / ``-o ProxyJump=spec``: ``[user@]host[:port]`` hops, comma-separated for a chain, also
  ``ssh://user@host:port``; ``none`` turns off a ProxyJump that ~/.ssh/config would add.
* ``-o ProxyCommand=cmd``: run through ``/bin/sh -c`` as OpenSSH does, with ``%h %p %r %n %%`` expanded;
  ``none`` turns off one from ~/.ssh/config. Other ``%`` tokens are refused (paramiko would pass them
  through literally).
* ``-o StrictHostKeyChecking=``: ``yes``/``ask`` keep the default (an unknown host is refused: diagnose
  never prompts); ``no``/``off``/``accept-new`` admit a host known_hosts does not list, like
  ``ansible_host_key_checking=false``. A key that differs from the recorded one is refused either way —
  stricter than OpenSSH's ``no``, on purpose.
* ``-o UserKnownHostsFile=`` / ``GlobalKnownHostsFile=``: more known_hosts files to read.
* ``-o ConnectTimeout=``, ``-o ServerAliveInterval=`` (the transport's keepalive), ``-o Compression=`` /
  ``-C``.
* ``-i file`` / ``-o IdentityFile=``, ``-p port`` / ``-o Port=``, ``-l user`` / ``-o User=``. As in
  Ansible's ssh plugin, where ``ansible_port`` / ``ansible_user`` / ``ansible_ssh_private_key_file``
  are set they come first on the command line, so they win over these (OpenSSH keeps the first value).

Accepted as no-ops, because they change nothing a paramiko session would do differently:

* ``ControlMaster``, ``ControlPersist``, ``ControlPath``: OpenSSH's connection multiplexing, so that
  Ansible's many short ssh processes share one login. diagnose already keeps one SSH connection per host
  for the whole run (and shares one per jump host), which is what multiplexing buys; the options are
  found in most Ansible configurations, and refusing them would make those inventories unusable for
  nothing.
* ``ServerAliveCountMax``, ``TCPKeepAlive=yes``: a peer that vanished is noticed by TCP keepalive (always
  on) and by the per-command progress deadline.
* ``BatchMode``, ``LogLevel``, ``IdentitiesOnly=yes``, ``-q``: diagnose never prompts, prints nothing of
  the SSH client's own, and with a key file offers only that key.

Everything else (``-A``, ``-t``, ``-F``, ``-v``, ``-o ForwardAgent``, algorithm lists, ...) is refused.
Giving both ProxyJump and ProxyCommand is refused too: OpenSSH would quietly use whichever came first.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

VARIABLES = ("ansible_ssh_common_args", "ansible_ssh_extra_args")
#: -o options that mean nothing to a paramiko session (see the module docstring for why each is safe).
NO_OP_OPTIONS = frozenset(
    {
        "controlmaster",
        "controlpersist",
        "controlpath",
        "serveralivecountmax",
        "batchmode",
        "loglevel",
    }
)
# A name, an ssh_config alias, an IPv4 or IPv6 address (with an optional %zone).
_HOST = re.compile(r"[A-Za-z0-9_.%:-]+\Z")
_USER = re.compile(r"[A-Za-z0-9_.\\$-]+\Z")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_TOKEN = re.compile(r"%(.)")
_PROXY_TOKENS = frozenset("hprn%")
_YES = {"yes", "true"}
_NO = {"no", "false"}


class SSHArgsError(ValueError):
    """An option diagnose cannot honour, or a malformed value; the message names the option."""


@dataclass(frozen=True)
class Hop:
    """One jump host of a ProxyJump chain; ``host`` may be an alias of ~/.ssh/config."""

    host: str
    user: str | None = None
    port: int | None = None

    def __str__(self) -> str:
        user = f"{self.user}@" if self.user else ""
        host = self.host if ":" not in self.host or self.host.startswith("[") else f"[{self.host}]"
        port = f":{self.port}" if self.port else ""
        return f"{user}{host}{port}"


@dataclass(frozen=True)
class SSHArgs:
    """The parsed options; None (or empty) everywhere means the variable did not set it."""

    #: The ProxyJump chain, first hop first; ``()`` with ``no_proxy`` set: "none" was given.
    proxy_jump: tuple[Hop, ...] = ()
    proxy_command: str | None = None
    #: ProxyJump=none or ProxyCommand=none: ignore any proxy ~/.ssh/config gives this host.
    no_proxy: bool = False
    user: str | None = None
    port: int | None = None
    identity_files: tuple[str, ...] = ()
    known_hosts_files: tuple[str, ...] = ()
    #: False: admit a host known_hosts does not list; True: refuse it; None: not set.
    strict_host_key_checking: bool | None = None
    connect_timeout: float | None = None
    server_alive_interval: float | None = None
    compression: bool | None = None
    #: The no-op options seen, as given (kept so a report or a test can say what was accepted).
    no_ops: tuple[str, ...] = field(default=())

    @property
    def has_proxy(self) -> bool:
        return bool(self.proxy_jump) or self.proxy_command is not None


def parse_jump_spec(spec: str) -> tuple[Hop, ...]:
    """``[user@]host[:port][,...]`` (or ``ssh://`` URIs) as hops; SSHArgsError on anything else."""
    hops = []
    for part in spec.split(","):
        part = part.strip()
        if part.startswith("ssh://"):
            part = part[len("ssh://") :].rstrip("/")
        if not part:
            raise SSHArgsError(f"ProxyJump {spec!r} has an empty hop")
        user, at, rest = part.rpartition("@")
        if at and not _USER.match(user):
            raise SSHArgsError(f"ProxyJump hop {part!r} has an invalid user {user!r}")
        host, port_text = rest, ""
        if rest.startswith("["):
            close = rest.find("]")
            if close < 0:
                raise SSHArgsError(f"ProxyJump hop {part!r} has an unclosed [")
            host, port_text = rest[1:close], rest[close + 1 :].removeprefix(":")
            if rest[close + 1 :] and not rest[close + 1 :].startswith(":"):
                raise SSHArgsError(f"ProxyJump hop {part!r} is not [user@]host[:port]")
        elif rest.count(":") == 1:
            host, port_text = rest.split(":")
        if not host or not _HOST.match(host) or host.startswith("-"):
            raise SSHArgsError(f"ProxyJump hop {part!r} has an invalid host {host!r}")
        hops.append(Hop(host=host, user=user or None, port=_port(port_text, f"ProxyJump hop {part!r}")))
    return tuple(hops)


def _port(text: str, what: str) -> int | None:
    if text == "":
        return None
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise SSHArgsError(f"{what}: port must be 1-65535, got {text!r}")
    return int(text)


def _seconds(text: str, option: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise SSHArgsError(f"{option} must be a positive number of seconds, got {text!r}")
    return value


def _path(text: str, option: str) -> str:
    if not text.strip() or _CONTROL.search(text) or '"' in text:
        raise SSHArgsError(f"{option} must be a path without quotes or control characters, got {text!r}")
    return text


def _proxy_command(text: str) -> str:
    if not text.strip() or _CONTROL.search(text):
        raise SSHArgsError(f"ProxyCommand must be one line of shell, got {text!r}")
    for token in _TOKEN.findall(text):
        if token not in _PROXY_TOKENS:
            raise SSHArgsError(f"ProxyCommand token %{token} is not supported (use %h, %p, %r, %n or %%)")
    if text.rstrip().endswith("%"):
        raise SSHArgsError("ProxyCommand ends with a lone %")
    return text


def expand_proxy_command(command: str, host: str, port: int, user: str, original: str) -> str:
    """ProxyCommand's ``%h %p %r %n %%`` filled in, as OpenSSH does before running it."""
    values = {"h": host, "p": str(port), "r": user, "n": original, "%": "%"}
    return _TOKEN.sub(lambda match: values[match.group(1)], command)


def _option(key: str, value: str, found: dict[str, Any]) -> None:
    """Record one ``-o Key=Value`` in ``found`` (first value wins, as in OpenSSH)."""
    name = key.lower()
    if not value:
        raise SSHArgsError(f"-o {key} has no value")

    def keep(field_name: str, parsed: Any) -> None:
        found.setdefault(field_name, parsed)

    lowered = value.lower()
    if name in ("proxyjump", "proxycommand"):
        if lowered == "none":
            proxy: tuple[str, Any] = ("none", ())
        elif name == "proxyjump":
            proxy = ("jump", parse_jump_spec(value))
        else:
            proxy = ("command", _proxy_command(value))
        earlier = found.get("proxy")
        if earlier is not None and earlier[0] != proxy[0] and "none" not in (earlier[0], proxy[0]):
            raise SSHArgsError("ProxyJump and ProxyCommand are both given; OpenSSH would use only the first")
        keep("proxy", proxy)
    elif name == "stricthostkeychecking":
        if lowered in ("yes", "ask", "true"):
            keep("strict_host_key_checking", True)
        elif lowered in ("no", "off", "false", "accept-new"):
            keep("strict_host_key_checking", False)
        else:
            raise SSHArgsError(f"StrictHostKeyChecking must be yes, no, accept-new or ask, got {value!r}")
    elif name in ("userknownhostsfile", "globalknownhostsfile"):
        found.setdefault("known_hosts_files", []).extend(_path(p, key) for p in value.split())
    elif name == "connecttimeout":
        keep("connect_timeout", _seconds(value, key))
    elif name == "serveraliveinterval":
        keep("server_alive_interval", _seconds(value, key))
    elif name == "compression":
        if lowered not in _YES | _NO:
            raise SSHArgsError(f"Compression must be yes or no, got {value!r}")
        keep("compression", lowered in _YES)
    elif name == "identityfile":
        found.setdefault("identity_files", []).append(_path(value, key))
    elif name == "port":
        keep("port", _port(value, "Port"))
    elif name == "user":
        if not _USER.match(value) or value.startswith("-"):
            raise SSHArgsError(f"User must be a login name, got {value!r}")
        keep("user", value)
    elif (
        (name == "identitiesonly" and lowered in _YES)
        or (name == "tcpkeepalive" and lowered in _YES)
        or name in NO_OP_OPTIONS
    ):
        found.setdefault("no_ops", []).append(f"{key}={value}")
    else:
        raise SSHArgsError(f"-o {key}={value} cannot be honoured over paramiko")


def _split_option(word: str) -> tuple[str, str]:
    """``Key=Value`` or ``Key Value`` (both are OpenSSH's -o syntax)."""
    match = re.match(r"\s*([A-Za-z]+)\s*(?:=\s*|\s+)(.*)\Z", word, re.S)
    if not match:
        raise SSHArgsError(f"-o {word!r} is not Key=Value")
    return match.group(1), match.group(2).strip()


def parse_ssh_args(text: str | None) -> SSHArgs:
    """Parse one variable's value; raise SSHArgsError naming the first option that cannot be honoured."""
    if text is None or not str(text).strip():
        return SSHArgs()
    try:
        words = shlex.split(str(text))
    except ValueError as exc:
        raise SSHArgsError(f"cannot be split as shell words: {exc}") from None
    found: dict[str, Any] = {}
    with_value = {"-o", "-J", "-i", "-p", "-l"}
    index = 0
    while index < len(words):
        word = words[index]
        flag, attached = word[:2], word[2:]
        if flag in with_value:
            if attached:
                value = attached
            elif index + 1 < len(words):
                index += 1
                value = words[index]
            else:
                raise SSHArgsError(f"{flag} needs a value")
            if flag == "-o":
                _option(*_split_option(value), found)
            elif flag == "-J":
                _option("ProxyJump", value, found)
            elif flag == "-i":
                _option("IdentityFile", value, found)
            elif flag == "-p":
                _option("Port", value, found)
            else:
                _option("User", value, found)
        elif word == "-q":
            found.setdefault("no_ops", []).append("-q")
        elif word == "-C":
            found.setdefault("compression", True)
        elif word.startswith("-"):
            raise SSHArgsError(f"option {word} cannot be honoured over paramiko")
        else:
            raise SSHArgsError(f"{word!r} is not an option (a host or command does not belong here)")
        index += 1
    return _build(found)


def _build(found: Mapping[str, Any]) -> SSHArgs:
    proxy = found.get("proxy")
    kind, value = proxy if proxy else (None, None)
    return SSHArgs(
        proxy_jump=value if kind == "jump" else (),
        proxy_command=value if kind == "command" else None,
        no_proxy=kind == "none",
        user=found.get("user"),
        port=found.get("port"),
        identity_files=tuple(found.get("identity_files", ())),
        known_hosts_files=tuple(found.get("known_hosts_files", ())),
        strict_host_key_checking=found.get("strict_host_key_checking"),
        connect_timeout=found.get("connect_timeout"),
        server_alive_interval=found.get("server_alive_interval"),
        compression=found.get("compression"),
        no_ops=tuple(found.get("no_ops", ())),
    )


def merge(first: SSHArgs, second: SSHArgs) -> SSHArgs:
    """Options of two variables as on one command line: ``first``'s values win, lists add up.

    Two variables disagreeing about the proxy (one ProxyJump, the other ProxyCommand) is refused:
    OpenSSH would use whichever came first and drop the other without a word.
    """
    proxy_first = first.has_proxy or first.no_proxy
    proxy_second = second.has_proxy or second.no_proxy
    if (
        proxy_first
        and proxy_second
        and (first.proxy_jump, first.proxy_command, first.no_proxy)
        != (
            second.proxy_jump,
            second.proxy_command,
            second.no_proxy,
        )
    ):
        raise SSHArgsError("ProxyJump/ProxyCommand is given twice with different values")
    chosen = first if proxy_first else second
    plain = {
        name: getattr(first, name) if getattr(first, name) is not None else getattr(second, name)
        for name in (
            "user",
            "port",
            "strict_host_key_checking",
            "connect_timeout",
            "server_alive_interval",
            "compression",
        )
    }
    return replace(
        first,
        proxy_jump=chosen.proxy_jump,
        proxy_command=chosen.proxy_command,
        no_proxy=chosen.no_proxy,
        identity_files=first.identity_files + second.identity_files,
        known_hosts_files=first.known_hosts_files + second.known_hosts_files,
        no_ops=first.no_ops + second.no_ops,
        **plain,
    )


def parse_variable(name: str, text: str | None) -> SSHArgs:
    """One variable's value; SSHArgsError messages start with the variable's name."""
    try:
        return parse_ssh_args(text)
    except SSHArgsError as exc:
        raise SSHArgsError(f"{name}: {exc}") from None


def host_ssh_args(values: Mapping[str, Any]) -> SSHArgs:
    """The merged options of ``ansible_ssh_common_args`` then ``ansible_ssh_extra_args`` of one host."""
    parsed = [
        parse_variable(name, None if values.get(name) is None else str(values.get(name)))
        for name in VARIABLES
    ]
    try:
        return merge(parsed[0], parsed[1])
    except SSHArgsError as exc:
        raise SSHArgsError(f"{' and '.join(VARIABLES)}: {exc}") from None
