"""Which host stages run as Slurm steps, and how the nodes are cut into steps (waves)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from diagnose.connectors.srun import StepResult
from diagnose.core.check import Check, Command
from diagnose.core.hosts import Host
from diagnose.core.model import CheckResult, CommandOutput, Outcome
from diagnose.core.vars import Vars
from diagnose.engine.host_batch import HostState
from diagnose.engine.step_stage import host_state, plan_waves, uses_steps, waves_of

CHECKS = [
    Check(
        id="host.reachable",
        checklist="–",
        summary="",
        commands=(Command("identity", "id -un"),),
        parse=lambda outputs, values: {"user": outputs["identity"].stdout.strip()},
        judge=lambda facts, values: Outcome("PASS", f"connected as {facts['user']}"),
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


def reachable(state: HostState) -> CheckResult:
    return next(r for r in state.results if r.id == "host.reachable")


def test_a_node_is_judged_from_its_task_and_named_when_it_did_not_start_or_finish(tmp_path: Path) -> None:
    commands = list(CHECKS[0].commands)
    done = host_state(
        node("n1"),
        StepResult({"identity": CommandOutput(stdout="root\n")}, started=True),
        commands,
        CHECKS,
        tmp_path,
    )
    assert reachable(done).status == "PASS" and done.healthy and done.connection is not None
    assert (tmp_path / "raw" / "n1" / "identity.txt").read_text() == "root\n"

    why = "did not start: no task of the step began on n2 within 30 s"
    absent = host_state(
        node("n2"), StepResult({"identity": CommandOutput(error=why)}, why), commands, CHECKS, tmp_path
    )
    assert reachable(absent).status == "FAIL" and why in reachable(absent).message
    assert absent.connection is None and absent.record is not None and absent.record.error == why

    frozen_why = "no output by the deadline: n3 made no progress for 13 s while `identity` ran"
    frozen = host_state(
        node("n3"),
        StepResult({"identity": CommandOutput(error=frozen_why)}, frozen_why, True),
        commands,
        CHECKS,
        tmp_path,
    )
    assert reachable(frozen).status == "FAIL" and frozen_why in reachable(frozen).message
    assert not frozen.healthy

    cut = "the step was cancelled (the run's time budget ran out) while `identity` ran"
    late = host_state(
        node("n4"),
        StepResult({"identity": CommandOutput(error=cut)}, cut, True),
        commands,
        CHECKS,
        tmp_path,
        True,
    )
    assert reachable(late).status == "ERROR"
    assert reachable(late).message == "time budget exhausted before the checks ended on n4"


def test_hosts_with_other_batches_go_in_other_steps() -> None:
    """The second snapshot re-runs only the checks a host judged: hosts whose lists differ part."""
    counters, flaps = Command("ib_counters", "cat counters"), Command("flaps", "journalctl -k")
    waves = waves_of(
        [(node("n1"), [counters, flaps]), (node("n2"), [counters]), (node("n3"), [counters, flaps])]
    )
    assert [(w.nodes, [c.key for c in w.commands]) for w in waves] == [
        (["n1", "n3"], ["ib_counters", "flaps"]),
        (["n2"], ["ib_counters"]),
    ]
