"""versions.consistency — one NCCL, driver, CUDA and torch version across all hosts.

NCCL refuses or misbehaves when ranks run different versions (protocol changes between releases), and a
host on another driver or torch build is a host that was not rebuilt with the others. The version facts come
from ``gpu.topology`` (driver, CUDA) and ``nccl.version`` (NCCL, torch); the host that differs from the
majority is named in its own result, and one cluster-level result sums up.
"""

from __future__ import annotations

from collections.abc import Mapping

from diagnose.core.check import ClusterCheck, Facts
from diagnose.core.consistency import describe_split, split_hosts
from diagnose.core.model import Outcome
from diagnose.core.vars import Vars

COMPONENTS = (
    ("NCCL", "nccl.version", "version"),
    ("driver", "gpu.topology", "driver"),
    ("CUDA", "gpu.topology", "cuda"),
    ("torch", "nccl.version", "torch"),
)


def judge(facts: Mapping[str, Mapping[str, Facts]], host_vars: Mapping[str, Vars]) -> list[Outcome]:
    outcomes: list[Outcome] = []
    agreed: list[str] = []
    differing: list[str] = []
    hosts_seen = 0
    for name, check_id, field in COMPONENTS:
        values = {
            host: str(value)
            for host, by_check in facts.items()
            if (value := (by_check.get(check_id) or {}).get(field)) is not None
        }
        hosts_seen = max(hosts_seen, len(values))
        split = split_hosts(values)
        if split is None:
            if values:
                agreed.append(f"{name} {next(iter(values.values()))}")
            continue
        differing.append(describe_split(name, split))
        for host, value in split.odd_hosts.items():
            message = (
                f"{host} runs {name} {value}, the other hosts {split.majority}"
                if split.majority
                else f"{host} runs {name} {value}; the hosts disagree with no majority"
            )
            outcomes.append(
                Outcome("FAIL", message, value, split.majority or f"one {name} version everywhere", host=host)
            )
    if hosts_seen < 2:
        message = "fewer than two hosts reported versions: nothing to compare"
        return [Outcome("SKIP", message, None, "one version of each on every host")]
    if differing:
        summary = "; ".join(differing)
        return [Outcome("FAIL", summary, summary, "one version of each on every host"), *outcomes]
    summary = ", ".join(agreed)
    return [
        Outcome("PASS", f"{summary} on all {hosts_seen} hosts", summary, "one version of each on every host")
    ]


CHECK = ClusterCheck(
    id="versions.consistency",
    checklist="3",
    summary="NCCL, driver, CUDA and torch the same on every host (cluster-wide)",
    uses=("gpu.topology", "nccl.version"),
    judge=judge,
    remediation="Install the same NCCL, driver, CUDA and torch build on every host (one image, one "
    "environment), then re-run.",
    action="check_config",
)
