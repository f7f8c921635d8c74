"""Which host stages run as Slurm steps, and how the nodes are cut into steps (waves)."""

from __future__ import annotations

from typing import Any

from diagnose.core.check import Check, Command
from diagnose.core.hosts import Host
from diagnose.core.model import Outcome
from diagnose.core.vars import Vars
from diagnose.engine.step_stage import plan_waves, uses_steps

CHECKS = [
    Check(
        id="host.reachable",
        checklist="–",
        summary="",
        commands=(Command("identity", "id -un"),),
        parse=lambda outputs, values: {},
        judge=lambda facts, values: Outcome("PASS", ""),
        remediation="",
    )
]


def node(name: str, **values: Any) -> Host:
    return Host(name, vars=Vars({"ansible_connection": "srun", "slurm_job_id": "12", **values}, name))


def test_steps_only_where_every_host_is_reached_through_srun_and_none_opts_out() -> None:
    assert uses_steps([node("n1"), node("n2")])
    assert not uses_steps([node("n1"), Host("login1", vars=Vars({}, "login1"))])
    assert not uses_steps([node("n1"), node("n2", slurm_step_checks="false")])
    assert not uses_steps([])


def test_waves_of_slurm_step_nodes_per_job_and_batch() -> None:
    hosts = [node(f"n{i}", slurm_step_nodes=2) for i in range(1, 6)]
    hosts.append(node("n6", slurm_step_nodes=2, command_timeout_s=5))  # another batch: its own step
    hosts.append(node("n7", slurm_step_nodes=2, slurm_job_id="13"))  # another job
    waves = plan_waves(hosts, CHECKS)
    assert [(w.job, w.nodes, w.timeout_cap) for w in waves] == [
        ("12", ["n1", "n2"], None),
        ("12", ["n3", "n4"], None),
        ("12", ["n5"], None),
        ("12", ["n6"], 5.0),
        ("13", ["n7"], None),
    ]
    assert [c.key for c in waves[0].commands] == ["identity"]


def test_the_default_wave_holds_2048_nodes_and_a_node_is_in_a_step_once() -> None:
    hosts = [node(f"n{i}") for i in range(3000)]
    assert [len(w.hosts) for w in plan_waves(hosts, CHECKS)] == [2048, 952]
    twice = [node("a", slurm_node="n1"), node("b", slurm_node="n1"), node("c")]
    assert [[h.name for h in w.hosts] for w in plan_waves(twice, CHECKS)] == [["a", "c"], ["b"]]
