"""Cluster-wide "one value everywhere" rules: find the odd host out and say so in words.

Used by the cluster checks (one NCCL/driver/CUDA/torch version, one MTU, one link rate). The majority value
is taken as the cluster's; every host that differs is named with its value and the majority's. With no
majority (two hosts, two values) every host is named, since nothing says which side is right.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Disagreement:
    """How the hosts split on one value."""

    majority: str | None  # None when no value is held by more hosts than any other
    groups: dict[str, list[str]]  # value -> hosts holding it
    odd_hosts: dict[str, str]  # host -> its value, for every host outside the majority


def split_hosts(values: Mapping[str, str]) -> Disagreement | None:
    """None when every host holds the same value (or there is at most one host)."""
    distinct = set(values.values())
    if len(distinct) <= 1:
        return None
    groups: dict[str, list[str]] = {}
    for host, value in sorted(values.items()):
        groups.setdefault(value, []).append(host)
    ranked = Counter({value: len(hosts) for value, hosts in groups.items()}).most_common()
    majority = ranked[0][0] if ranked[0][1] > ranked[1][1] else None
    odd = {host: value for host, value in sorted(values.items()) if value != majority}
    return Disagreement(majority, groups, odd)


def describe_split(what: str, split: Disagreement) -> str:
    """``NCCL differs: 2.27.3 on node3; 2.28.9 on the other 3 hosts``."""
    if split.majority is None:
        parts = "; ".join(f"{value} on {', '.join(hosts)}" for value, hosts in sorted(split.groups.items()))
        return f"{what} differs with no majority: {parts}"
    others = "; ".join(
        f"{value} on {', '.join(hosts)}"
        for value, hosts in sorted(split.groups.items())
        if value != split.majority
    )
    return (
        f"{what} differs: {others}; {split.majority} on the other {len(split.groups[split.majority])} hosts"
    )
