"""The host variables that are not expected values: connection, timeouts, output caps, benchmark settings.

They are checked once per host when the inventory is resolved, before any host is touched, so a bad value
is a configuration error naming the file and line that set it (exit 2) instead of a crash mid-run. This
is also the gate between inventory text and the places it ends up: a remote shell (``bench_env`` names,
interpreter paths), a generated ssh_config (address, user, key file, ProxyJump/ProxyCommand) and mpirun's command line (``-H``
names). Values are quoted where they are used; what cannot be quoted — an environment variable's name,
a line of ssh_config — must be valid here or the run does not start.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from diagnose.errors import ConfigError
from diagnose.ssh_args import SSHArgsError, host_ssh_args, parse_variable
from diagnose.vars import Vars

CONNECTIONS = ("ssh", "paramiko", "smart", "local")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# Host names, IPv4 and IPv6 addresses (with an optional %zone); nothing a shell or ssh_config would parse.
_ADDRESS = re.compile(r"[A-Za-z0-9_.:%\[\]-]+\Z")
_USER = re.compile(r"[A-Za-z0-9_.@\\$-]+\Z")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def parse_bench_env(value: Any, host: str = "") -> dict[str, str]:
    """``bench_env`` as a mapping (YAML) or ``K=V,K=V`` (INI, ``-e``; a piece without ``=`` continues the
    value before it); raises ValueError naming the offending entry. The names become ``export NAME=...`` on the hosts, so only POSIX names pass."""
    if value is None or value == "":
        return {}
    if isinstance(value, Mapping):
        items = [(str(k), "" if v is None else str(v)) for k, v in value.items()]
    else:
        items: list[tuple[str, str]] = []
        for item in str(value).split(","):
            if not item.strip():
                continue
            key, sep, val = item.partition("=")
            if not sep:
                # NCCL's own lists hold commas (NCCL_SOCKET_IFNAME=^lo,docker0): a piece without "="
                # belongs to the value before it.
                if not items:
                    raise ValueError(f"bench_env entry {item.strip()!r} is not KEY=VALUE")
                items[-1] = (items[-1][0], f"{items[-1][1]},{item.strip()}")
                continue
            items.append((key.strip(), val.strip()))
    for key, _ in items:
        if not ENV_NAME.match(key):
            raise ValueError(
                f"bench_env name {key!r} is not a valid environment variable name "
                "(letters, digits and _, not starting with a digit)"
            )
    return dict(items)


def _positive(kind: Callable[[Vars, str], Any], lowest: float, highest: float | None = None) -> Callable:
    def check(values: Vars, name: str) -> str | None:
        value = kind(values, name)
        if value is None:
            return None
        if value < lowest or (highest is not None and value > highest):
            bound = f"between {lowest:g} and {highest:g}" if highest is not None else f"at least {lowest:g}"
            return f"{name} must be {bound}, got {values[name]!r}"
        return None

    return check


def _matching(pattern: re.Pattern[str], what: str) -> Callable[[Vars, str], str | None]:
    def check(values: Vars, name: str) -> str | None:
        value = values.str(name)
        if value is None:
            return None
        if not pattern.match(value) or value.startswith("-"):
            return f"{name} must be {what}, got {value!r}"
        return None

    return check


def _path(values: Vars, name: str) -> str | None:
    value = values.str(name)
    if value is not None and (_CONTROL.search(value) or '"' in value or not value.strip()):
        return f"{name} must be a path without quotes or control characters, got {value!r}"
    return None


def _connection(values: Vars, name: str) -> str | None:
    value = values.str(name)
    if value is not None and value not in CONNECTIONS:
        return f"{name}={value!r} is not supported (use one of {', '.join(CONNECTIONS)})"
    return None


def _bench_env(values: Vars, name: str) -> str | None:
    try:
        parse_bench_env(values.get(name))
    except ValueError as exc:
        return str(exc)
    return None


def _ssh_args(values: Vars, name: str) -> str | None:
    """An ssh args variable holding an option diagnose cannot honour stops the run here: the option
    would otherwise be dropped without a word (see diagnose.ssh_args for what is honoured and why)."""
    try:
        parse_variable(name, values.str(name))
        if name == "ansible_ssh_extra_args":  # the two together, once each alone is valid
            host_ssh_args(values)
    except SSHArgsError as exc:
        return str(exc)
    return None


_PORT = _positive(Vars.int, 1, 65535)
_SECONDS = _positive(Vars.float, 0.001)
_ADDRESS_CHECK = _matching(_ADDRESS, "a host name or an IP address")

SETTINGS: dict[str, Callable[[Vars, str], str | None]] = {
    "ansible_port": _PORT,
    "ansible_ssh_port": _PORT,
    "bench_master_port": _PORT,
    "ansible_host": _ADDRESS_CHECK,
    "nccl_tests_mpi_host": _ADDRESS_CHECK,
    "bench_master_addr": _ADDRESS_CHECK,
    "ansible_user": _matching(_USER, "a login name"),
    "ansible_ssh_user": _matching(_USER, "a login name"),
    "ansible_connection": _connection,
    "ansible_ssh_private_key_file": _path,
    "ansible_private_key_file": _path,
    "diagnose_known_hosts_file": _path,
    "ansible_python_interpreter": _path,
    "bench_python": _path,
    "mpirun": _path,
    "nccl_tests_dir": _path,
    "ansible_ssh_timeout": _SECONDS,
    "diagnose_connect_timeout": _SECONDS,
    "command_timeout_s": _SECONDS,
    "bench_startup_timeout_s": _SECONDS,
    "max_output_bytes": _positive(Vars.int, 1024),
    "bench_env": _bench_env,
    "ansible_ssh_common_args": _ssh_args,
    "ansible_ssh_extra_args": _ssh_args,
}


def first_problem(values: Vars) -> tuple[str, str] | None:
    """(variable, message) of the first invalid setting of one host, or None when all are valid."""
    for name, check in SETTINGS.items():
        if name not in values:
            continue
        try:
            problem = check(values, name)
        except ConfigError as err:
            problem = err.message
        if problem:
            where = f"host {values.host}: " if values.host else ""
            return name, where + problem
    return None
