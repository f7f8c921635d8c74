"""Measurements taken beside a compute process diagnose did not start, marked as such in results.json.

gpu.processes lists, in the host stage, the compute processes already on a host's GPUs (its facts keep
them under ``processes``, and the GPUs held by a process the host cannot see under ``unseen``). A benchmark or a probe measured on such a host shares the GPU with them: its
figure says less about the node. The entry is kept as measured and gains ``shared_gpu: true`` and
``shared_gpu_hosts`` (the hosts of the entry that had such processes); the report shows it beside the
entry's hosts. Entries of hosts without such processes are left as they were, field for field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PROCESSES_CHECK = "gpu.processes"


def shared_hosts(facts: Mapping[str, Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Host -> the foreign compute processes gpu.processes found there, and the GPUs of its scope that a
    process it cannot see holds (busy, or memory in use that no listed process accounts for: ``pid`` None,
    ``held_mib``); hosts with neither left out."""
    found = {}
    for host, checks in facts.items():
        own = checks.get(PROCESSES_CHECK) or {}
        holders = list(own.get("processes") or []) + [
            {"gpu": g.get("index"), "bus_id": g.get("bus_id"), "pid": None, "held_mib": g.get("held_mib")}
            for g in own.get("unseen") or []
        ]
        if holders:
            found[host] = holders
    return found


def mark_shared(entry: dict[str, Any], shared: Mapping[str, Any]) -> dict[str, Any]:
    """``entry`` (a benchmark with ``hosts``, or a record with ``host``) marked where one of its hosts
    had a foreign compute process; returned for chaining."""
    hosts = entry.get("hosts")
    named = (
        [str(h) for h in hosts]
        if isinstance(hosts, list)
        else [str(entry["host"])]
        if entry.get("host")
        else []
    )
    sharing = [h for h in named if h in shared]
    if sharing:
        entry["shared_gpu"] = True
        entry["shared_gpu_hosts"] = sharing
    return entry
