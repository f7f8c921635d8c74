"""A host the stress program never started on: ERROR, except a CPU host without torch, whose verdicts would
be SKIP whatever it measured (so `diagnose run` on a machine without the bench extra stays truthful)."""

from __future__ import annotations

from diagnose.catalog.stage_ids import STRESS
from diagnose.core.hosts import Host
from diagnose.core.vars import Vars
from diagnose.probes.stress import NO_TORCH, judge_all
from diagnose.probes.stress_figures import HostStress
from diagnose.probes.stress_judge import CPU_NOTE

WHY = "torch cannot be imported on node (/usr/bin/python3: No module named 'torch')"


def verdicts(item: HostStress) -> dict[str, tuple[str, str]]:
    hosts = {item.host: Host(item.host, vars=Vars(host=item.host))}
    return {c.id: (c.status, c.message) for j in judge_all([item], hosts) for c in j.checks}


def test_a_cpu_host_without_torch_skips_every_stress_check_saying_why() -> None:
    found = verdicts(HostStress("node", device="cpu", status=NO_TORCH, message=WHY))
    assert set(found) == set(STRESS)
    assert all(v == ("SKIP", f"{CPU_NOTE}; not measured either: {WHY}") for v in found.values())


def test_a_gpu_host_without_torch_cannot_be_judged() -> None:
    found = verdicts(HostStress("node", device="cuda", status=NO_TORCH, message=WHY))
    assert set(found.values()) == {("ERROR", f"not measured: {WHY}")}


def test_a_cpu_host_the_time_budget_left_out_is_an_error_naming_the_budget() -> None:
    budget = "the run's time budget ran out before the GPU stress"
    found = verdicts(HostStress("node", device="cpu", status="failed", message=budget))
    assert set(found.values()) == {("ERROR", f"not measured: {budget}")}
