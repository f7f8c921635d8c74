"""The environment chapter: hosts grouped by identical software stack, the odd values flagged.

A mismatched driver or NCCL on one host out of 500 is the finding; showing every host's stack would bury
it, so hosts with the same stack fold into one row and each value that differs from the majority stands out.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from diagnose.core.units import MISSING
from diagnose.render.hostlist import summarize
from diagnose.render.text import show

ENV_FIELDS = (
    ("gpu_model", "GPU model"),
    ("gpu_count", "GPUs"),
    ("driver", "Driver"),
    ("cuda", "CUDA"),
    ("nccl", "NCCL"),
    ("torch", "torch"),
    ("os", "OS"),
)
UNSET = "(unset)"


@dataclass
class EnvRow:
    hosts: str
    host_count: int
    values: list[tuple[str, bool]]  # (value, differs from the majority)


@dataclass
class NcclVar:
    name: str
    uniform: bool
    values: list[tuple[str, str, int]]  # (value, folded hosts, count)


@dataclass
class Environment:
    rows: list[EnvRow]
    majority: list[str]
    mismatched: list[str]
    nccl_vars: list[NcclVar]
    missing: str
    missing_count: int
    #: (pod, node) for every host that is a Kubernetes pod, in host order.
    pod_nodes: list[tuple[str, str]] = field(default_factory=list)


def build_environment(results: dict[str, Any]) -> Environment:
    """Hosts grouped by identical software stack; values that differ from the majority are flagged."""
    envs = {
        str(h.get("name")): h["environment"]
        for h in results.get("hosts") or []
        if isinstance(h.get("environment"), dict) and h["environment"]
    }
    missing = [str(h.get("name")) for h in results.get("hosts") or [] if str(h.get("name")) not in envs]
    stacks: dict[tuple[str, ...], list[str]] = {}
    for name, env in envs.items():
        stacks.setdefault(tuple(show(env.get(key), 200) for key, _ in ENV_FIELDS), []).append(name)
    majority = []
    for index in range(len(ENV_FIELDS)):
        votes: Counter[str] = Counter()
        for stack, hosts in stacks.items():
            votes[stack[index]] += len(hosts)
        majority.append(votes.most_common(1)[0][0] if votes else MISSING)
    rows = [
        EnvRow(
            summarize(hosts),
            len(hosts),
            [(value, value != majority[i]) for i, value in enumerate(stack)],
        )
        for stack, hosts in sorted(stacks.items(), key=lambda kv: -len(kv[1]))
    ]
    mismatched = [label for i, (_key, label) in enumerate(ENV_FIELDS) if any(r.values[i][1] for r in rows)]
    names: set[str] = set()
    for env in envs.values():
        if isinstance(env.get("nccl_env"), dict):
            names.update(env["nccl_env"])
    nccl_vars = []
    for name in sorted(names):
        holders: dict[str, list[str]] = {}
        for host, env in envs.items():
            nccl_env = env.get("nccl_env") if isinstance(env.get("nccl_env"), dict) else {}
            holders.setdefault(show(nccl_env.get(name, UNSET), 300), []).append(host)
        values = [(v, summarize(h), len(h)) for v, h in sorted(holders.items(), key=lambda kv: -len(kv[1]))]
        nccl_vars.append(NcclVar(name, len(values) == 1, values))
    nccl_vars.sort(key=lambda v: (v.uniform, v.name))
    pod_nodes = [(name, str(env["k8s_node"])) for name, env in envs.items() if env.get("k8s_node")]
    return Environment(rows, majority, mismatched, nccl_vars, summarize(missing), len(missing), pod_nodes)
