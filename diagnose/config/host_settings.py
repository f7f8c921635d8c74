"""The host variables that are not expected values: connection, timeouts, output caps, benchmark settings.

They are checked once per host when the inventory is resolved, before any host is touched, so a bad value
is a configuration error naming the file and line that set it (exit 2) instead of a crash mid-run. This
is also the gate between inventory text and the places it ends up: a remote shell (``bench_env`` names,
interpreter paths), a generated ssh_config (address, user, key file, ProxyJump/ProxyCommand) and mpirun's command line (``-H``
names). Values are quoted where they are used; what cannot be quoted — an environment variable's name,
a line of ssh_config — must be valid here or the run does not start.

:data:`SETTINGS` holds the variables of the transports and the benchmark stage. A benchmark after the sweep
declares its own beside it (:mod:`diagnose.probes.kv_settings`, :mod:`diagnose.probes.training_settings`)
with the helpers here, and :data:`diagnose.probes.registry.HOST_SETTINGS` is the table a run checks.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from diagnose.connectors.ssh_args import SSHArgsError, host_ssh_args, parse_variable
from diagnose.connectors.ssh_login import SSH_CONNECTIONS, key_file_problem
from diagnose.core.errors import ConfigError
from diagnose.core.vars import Vars
from diagnose.k8s.target import KubectlArgsError, parse_extra_args

#: Checks one variable of one host: None when its value is valid, else the message saying why not.
Validator = Callable[[Vars, str], str | None]

CONNECTIONS = ("ssh", "paramiko", "smart", "local", "kubectl", "srun")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# Host names, IPv4 and IPv6 addresses (with an optional %zone); nothing a shell or ssh_config would parse.
_ADDRESS = re.compile(r"[A-Za-z0-9_.:%\[\]-]+\Z")
_USER = re.compile(r"[A-Za-z0-9_.@\\$-]+\Z")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Kubernetes names (DNS-1123): a label for namespaces and containers, a subdomain for pods. They end up
# as argv words of kubectl, never in a shell, but a name kubectl would refuse is better refused here.
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")
_DNS_SUBDOMAIN = re.compile(r"(?=.{1,253}\Z)[a-z0-9]([-a-z0-9.]*[a-z0-9])?\Z")
# kubeconfig context names are free text in practice (arn:aws:eks:...:cluster/x, gke_p_z_c, user@cluster).
_CONTEXT = re.compile(r"[A-Za-z0-9_.:@/+-]+\Z")
# Slurm (diagnose.targets.slurm_nodes, connectors/srun.py, bench/launcher_srun.py, slurm_submit.py): names as
# slurm.conf allows them, a job id, and sbatch's time formats (minutes, M:S, H:M:S, D-H, D-H:M, D-H:M:S).
_SLURM_NAME = re.compile(r"[A-Za-z0-9_.-]+\Z")
_SLURM_JOB = re.compile(r"[0-9]+\Z")
_SLURM_TIME = re.compile(r"(\d+|\d+:\d\d|\d+:\d\d:\d\d|\d+-\d+|\d+-\d+:\d\d|\d+-\d+:\d\d:\d\d|UNLIMITED)\Z")
BENCH_LAUNCHERS = ("torchrun", "srun")


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


def parsed_by(parse: Callable[[Any], Any]) -> Validator:
    """A setting checked by the parser that will read it: its ValueError is the message."""

    def check(values: Vars, name: str) -> str | None:
        try:
            parse(values.get(name))
        except ValueError as exc:
            return str(exc) if str(exc).startswith(name) else f"{name}: {exc}"
        return None

    return check


def bounded(kind: Callable[[Vars, str], Any], lowest: float, highest: float | None = None) -> Validator:
    """A number (read with ``kind``, e.g. ``Vars.int``) from ``lowest``, up to ``highest`` when given."""

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


def _true_or_false(values: Vars, name: str) -> str | None:
    values.bool(name)  # raises ConfigError naming the variable and the host
    return None


def _key_file(values: Vars, name: str) -> str | None:
    """A private key an SSH host logs in with must be one, readable, before any host is touched; a host
    of another transport (local, kubectl, srun) may inherit the variable from a group and never use it."""
    problem = _path(values, name)
    if problem or (values.str("ansible_connection") or "ssh") not in SSH_CONNECTIONS:
        return problem
    why = key_file_problem(str(values.str(name)))
    return f"{name}: {why}" if why else None


def _ssh_args_and_keys(values: Vars, name: str) -> str | None:
    """:func:`_ssh_args`, and each ``-i KEY`` in them read as :func:`_key_file` reads a key variable."""
    problem = _ssh_args(values, name)
    if problem or (values.str("ansible_connection") or "ssh") not in SSH_CONNECTIONS:
        return problem
    for key in parse_variable(name, values.str(name)).identity_files:
        why = key_file_problem(key)
        if why:
            return f"{name}: -i {why}"
    return None


def _connection(values: Vars, name: str) -> str | None:
    value = values.str(name)
    if value is not None and value not in CONNECTIONS:
        return f"{name}={value!r} is not supported (use one of {', '.join(CONNECTIONS)})"
    pod = values.host
    if value == "kubectl" and "ansible_kubectl_pod" not in values and pod and not _DNS_SUBDOMAIN.match(pod):
        return f"the host name {values.host!r} is not a pod name: set ansible_kubectl_pod"
    # The name goes into srun's --nodelist, where a comma or brackets would name other nodes.
    node = values.host
    if value == "srun" and "slurm_node" not in values and node and not _SLURM_NAME.match(node):
        return f"the host name {values.host!r} is not a Slurm node name: set slurm_node"
    return None


def _bench_launcher(values: Vars, name: str) -> str | None:
    value = values.str(name)
    if value is not None and value not in BENCH_LAUNCHERS:
        return f"{name}={value!r} is not supported (use one of {', '.join(BENCH_LAUNCHERS)})"
    return None


def _kubectl_args(values: Vars, name: str) -> str | None:
    """Extra kubectl options diagnose cannot pass on safely stop the run (see diagnose.k8s.target)."""
    try:
        parse_extra_args(values.str(name))
    except KubectlArgsError as exc:
        return f"{name}: {exc}"
    return None


def _one_line(values: Vars, name: str) -> str | None:
    value = values.str(name)
    if value is not None and (_CONTROL.search(value) or not value.strip()):
        return f"{name} must be one line of text, got {value!r}"
    return None


def _bench_env(values: Vars, name: str) -> str | None:
    try:
        parse_bench_env(values.get(name))
    except ValueError as exc:
        return str(exc)
    return None


def _ssh_args(values: Vars, name: str) -> str | None:
    """An ssh args variable holding an option diagnose cannot honour stops the run here: the option
    would otherwise be dropped without a word (see diagnose.connectors.ssh_args for what is honoured and why)."""
    try:
        parse_variable(name, values.str(name))
        if name == "ansible_ssh_extra_args":  # the two together, once each alone is valid
            host_ssh_args(values)
    except SSHArgsError as exc:
        return str(exc)
    return None


_PORT = bounded(Vars.int, 1, 65535)
_SECONDS = bounded(Vars.float, 0.001)
_ADDRESS_CHECK = _matching(_ADDRESS, "a host name or an IP address")

SETTINGS: dict[str, Validator] = {
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
    "diagnose_history": _path,  # the history database (diagnose.history.storage.HISTORY_VARIABLE)
    "ansible_python_interpreter": _path,
    "bench_python": _path,
    "mpirun": _path,
    "nccl_tests_dir": _path,
    "ansible_ssh_timeout": _SECONDS,
    "diagnose_connect_timeout": _SECONDS,
    "command_timeout_s": _SECONDS,
    "bench_startup_timeout_s": _SECONDS,
    "progress_interval_s": _SECONDS,
    "max_output_bytes": bounded(Vars.int, 1024),
    "bench_env": _bench_env,
    "ansible_ssh_common_args": _ssh_args,
    "ansible_ssh_extra_args": _ssh_args,
    "ansible_kubectl_namespace": _matching(_DNS_LABEL, "a Kubernetes namespace name"),
    "diagnose_k8s_namespace": _matching(_DNS_LABEL, "a Kubernetes namespace name"),
    "ansible_kubectl_pod": _matching(_DNS_SUBDOMAIN, "a pod name"),
    "ansible_kubectl_container": _matching(_DNS_LABEL, "a container name"),
    "diagnose_k8s_container": _matching(_DNS_LABEL, "a container name"),
    "ansible_kubectl_context": _matching(_CONTEXT, "a kubeconfig context name"),
    "ansible_kubectl_kubeconfig": _path,
    "diagnose_kubectl": _path,
    "ansible_kubectl_extra_args": _kubectl_args,
    "diagnose_k8s_selector": _one_line,
    # Slurm (diagnose.targets.slurm_nodes, connectors/srun.py, engine/step_stage.py, launchers/srun.py, slurm/submit.py)
    "bench_launcher": _bench_launcher,
    "slurm_job_id": _matching(_SLURM_JOB, "a Slurm job id"),
    "slurm_node": _matching(_SLURM_NAME, "a Slurm node name"),
    "slurm_partition": _matching(_SLURM_NAME, "a Slurm partition name"),
    "slurm_reservation": _matching(_SLURM_NAME, "a Slurm reservation name"),
    "slurm_qos": _matching(_SLURM_NAME, "a Slurm QOS name"),
    "slurm_account": _matching(_SLURM_NAME, "a Slurm account name"),
    "slurm_time": _matching(_SLURM_TIME, "a Slurm time limit (minutes, H:MM:SS or D-HH:MM:SS)"),
    "slurm_nodes": bounded(Vars.int, 1),
    "slurm_gpus_per_node": bounded(Vars.int, 1),
    "slurm_step_nodes": bounded(Vars.int, 1),
    "slurm_step_checks": _true_or_false,
}

#: What a run that will log in also checks, before any host is touched: the key files named exist and are
#: private keys. Kept out of :data:`SETTINGS` so that ``--list-hosts``, which touches nothing, lists an
#: inventory whose keys live on another machine (Ansible's ``--list-hosts`` reads no key either).
LOGIN_SETTINGS: dict[str, Validator] = {
    "ansible_ssh_private_key_file": _key_file,
    "ansible_private_key_file": _key_file,
    "ansible_ssh_common_args": _ssh_args_and_keys,
    "ansible_ssh_extra_args": _ssh_args_and_keys,
}


def first_problem(values: Vars, settings: Mapping[str, Validator] = SETTINGS) -> tuple[str, str] | None:
    """(variable, message) of the first invalid setting of one host, or None when all are valid.

    ``settings``: the table to check against; a run's is :data:`diagnose.probes.registry.HOST_SETTINGS`.
    """
    for name, check in settings.items():
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
