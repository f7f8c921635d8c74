"""Which Slurm nodes the quarantine cap counts as held by diagnose, and in which order, read from real
``scontrol show node -o`` captures (tests/fixtures/captured/scontrol_node/, see SOURCE)."""

from __future__ import annotations

from diagnose.parsers.scontrol_node import parse_scontrol_node
from diagnose.slurm.drain import held
from tests.support.paths import CAPTURED


def node(case: str, name: str) -> dict:  # type: ignore[type-arg]
    text = (CAPTURED / "scontrol_node" / f"{case}.txt").read_text()
    return {**parse_scontrol_node(text), "name": name}


def test_only_diagnose_drains_count_oldest_first() -> None:
    nodes = [
        node("allocated_drain_diagnose", "n1"),  # drained by diagnose at 19:13:57
        node("idle_drain_admin", "n2"),  # an admin's drain: not ours, not counted
        node("idle_drain_diagnose", "n3"),  # drained by diagnose at 19:13:55
        node("idle", "n4"),
        node("down_diagnose_replaced", "n5"),  # Slurm replaced our reason: no longer ours
        node("idle_drain_diagnose", "n0"),  # the same second as n3: the name decides
    ]
    assert held(nodes) == ["n0", "n3", "n1"]
