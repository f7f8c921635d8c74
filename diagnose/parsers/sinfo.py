"""What Slurm's client commands print about nodes: ``sinfo`` node rows and ``scontrol show hostnames``.

The Slurm host source (:mod:`diagnose.targets.slurm_nodes`) lets Slurm itself filter (``sinfo -p/-n/-t``) and
expand hostlist expressions (``scontrol show hostnames``); these parsers only read the answers, so the
names, partitions and states are exactly Slurm's.
"""

from __future__ import annotations

import re
from typing import Any

from diagnose.core.check import ParseError

#: The format the host source asks sinfo for (``-N``: one row per node and partition).
SINFO_NODE_FORMAT = "%N %P %t"
# Suffixes sinfo's compact state (%t) may carry: * not responding, ~ powered off, # powering up,
# ! pending power down, % powering down, $ maintenance reservation, @ reboot pending, ^ reboot issued,
# - planned by the backfill scheduler.
_STATE_FLAGS = "*~#!%$@^-"
_NODE_NAME = re.compile(r"[A-Za-z0-9_.-]+\Z")


def parse_sinfo_nodes(text: str) -> list[dict[str, Any]]:
    """``sinfo -h -N -o '%N %P %t'`` → one entry per node, in sinfo's order: its name, its partitions
    (sinfo's ``*`` on the default partition removed), its compact state without flags, and whether the
    node answers (no ``*`` flag).

    A node in several partitions has one row per partition; they are joined. Empty output is no node.
    """
    nodes: dict[str, dict[str, Any]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        words = line.split()
        if len(words) != 3 or not _NODE_NAME.match(words[0]):
            raise ParseError(f"sinfo line {number} is not 'NODE PARTITION STATE': {line.strip()[:120]!r}")
        name, partition, state = words
        entry = nodes.setdefault(
            name,
            {
                "name": name,
                "partitions": [],
                "state": state.rstrip(_STATE_FLAGS).lower(),
                "responding": not state.endswith("*"),
            },
        )
        partition = partition.rstrip("*")
        if partition not in entry["partitions"]:
            entry["partitions"].append(partition)
    return list(nodes.values())


def parse_hostnames(text: str) -> list[str]:
    """``scontrol show hostnames EXPR`` → the names, one a line, in Slurm's order."""
    names = [line.strip() for line in text.splitlines() if line.strip()]
    bad = [n for n in names if not _NODE_NAME.match(n)]
    if bad:
        raise ParseError(f"scontrol printed {bad[0]!r} where a host name was expected")
    return names
