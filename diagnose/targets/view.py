"""What a dry run shows about the targets: ``--list-hosts`` rows and the variables that matter per host.

Pure functions over resolved :class:`~diagnose.core.hosts.Host` objects.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from diagnose.config.host_settings import SETTINGS
from diagnose.config.profiles import PROFILE_VARIABLES
from diagnose.core.hosts import Host
from diagnose.core.redact import MASK, hides
from diagnose.parsers.pod import POD_VARIABLE
from diagnose.targets.model import ALL

# Variables a dry run shows besides the connection (ansible_*), the profile and the expected values: the
# settings that change what a run does or how long it may take (the benchmarks after the sweep: kv_,
# train_probe_).
_RELEVANT_PREFIXES = (
    "ansible_", "diagnose_", "bench_", "nccl_tests_", "expected_", "min_", "max_", "kv_", "train_probe_",
)  # fmt: skip
_RELEVANT_NAMES = {"command_timeout_s", "mpirun", "line_rate_gbps", "nvlink_busbw_gbps"}
# Read from the cluster, not configured: the whole pod object, whose env may hold literal secrets.
_NOT_SHOWN = {POD_VARIABLE}


def list_hosts(hosts: Sequence[Host]) -> list[dict[str, Any]]:
    """What ``--list-hosts`` prints per host: where diagnose would connect, as whom, and how.

    ``groups`` are Ansible's ``group_names`` (sorted, without ``all``); ``port`` and ``user`` are None when
    the inventory leaves them to ``~/.ssh/config`` and ssh's defaults.
    """
    rows = []
    for host in hosts:
        port = host.vars.get("ansible_port") or host.vars.get("ansible_ssh_port")
        rows.append(
            {
                "name": host.name,
                "groups": sorted(g for g in host.groups if g != ALL),
                "address": host.address,
                "port": int(port) if port not in (None, "") else None,
                "user": host.vars.get("ansible_user") or host.vars.get("ansible_ssh_user"),
                "connection": host.connection,
            }
        )
    return rows


def _is_relevant(name: str) -> bool:
    if name in _NOT_SHOWN:
        return False
    return (
        name.startswith(_RELEVANT_PREFIXES)
        or name in _RELEVANT_NAMES
        or name in PROFILE_VARIABLES
        or name in SETTINGS
        or "timeout" in name
    )


def relevant_vars(host: Host, given: Collection[str] = ()) -> dict[str, Any]:
    """The merged variables a dry run shows for one host, sorted by name, secrets masked.

    Only what changes how diagnose connects or judges (connection variables, ``diagnose_profile``, expected
    values, benchmark and timeout settings): an Ansible inventory carries hundreds of variables for other
    tools that would bury these. ``given`` (the ``-e`` names) are shown whatever they are called: the
    operator typed them for this run and must see that they arrived. Values of secret-looking names
    (``ansible_become_pass``, ``my_token``) read ``REDACTED``; a key file's path stays (:func:`hides`).
    """
    return {
        name: MASK if hides(name, host.vars[name]) else host.vars[name]
        for name in sorted(host.vars)
        if name not in _NOT_SHOWN and (_is_relevant(name) or name in given)
    }


def hidden_names(hosts: Sequence[Host], given: Collection[str] = ()) -> tuple[list[str], int]:
    """What a dry run leaves unsaid: the shown names whose values it masks, and how many other variables
    it does not show at all (inventory variables for other tools)."""
    masked: set[str] = set()
    left_out: set[str] = set()
    for host in hosts:
        shown = relevant_vars(host, given)
        masked |= {name for name in shown if hides(name, host.vars[name])}
        left_out |= set(host.vars) - set(shown)
    return sorted(masked), len(left_out)


#: Variables that name one host (where it is reached): a dry run groups hosts by everything else.
PER_HOST_VARS = frozenset({"ansible_host", "ansible_ssh_host", "ansible_port", "ansible_ssh_port"})


def var_groups(hosts: Sequence[Host], given: Collection[str] = ()) -> list[tuple[list[str], dict[str, Any]]]:
    """Hosts grouped by identical shown variables, largest group first: a thousand-node inventory is a
    handful of hardware generations, and its dry run should read as one block per generation.

    The variables that only say where one host is reached (:data:`PER_HOST_VARS`) do not split groups; a
    group of one host keeps them, a larger group leaves them to the host list.
    """
    groups: dict[str, tuple[list[str], dict[str, Any]]] = {}
    for host in hosts:
        shown = relevant_vars(host, given)
        shared = {k: v for k, v in shown.items() if k not in PER_HOST_VARS}
        key = repr(sorted((k, repr(v)) for k, v in shared.items()))
        names, _ = groups.setdefault(key, ([], shown))
        names.append(host.name)
    return sorted(
        (
            (names, shown if len(names) == 1 else {k: v for k, v in shown.items() if k not in PER_HOST_VARS})
            for names, shown in groups.values()
        ),
        key=lambda group: -len(group[0]),
    )
