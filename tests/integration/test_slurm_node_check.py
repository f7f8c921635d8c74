"""``diagnose node-check`` on nodes of a real Slurm (tests/support/slurmbed.py): one line and an exit code per run,
a node with a planted fault drained with the failed check as reason (through srun on that node, and as
slurmd's HealthCheckProgram), resumed once the fault is gone, and an admin's drain never touched.

Nodes are the 8x H100 NDR hosts of tests/support/hostkit.py: their tools print real captured outputs, and a fault
is one of hostkit's fault builders planted on a running node (``SlurmBed.plant``).
"""

from __future__ import annotations

import json
import re
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from diagnose.config.playbook import load_playbook
from tests.support.hostkit import PROFILE, healthy_h100, memlock_vars, port_down, xid_79
from tests.support.slurmbed import HealthCheck, SlurmBed, slurm_bed

pytestmark = pytest.mark.integration

NODE_CHECK = [sys.executable, "-m", "diagnose.cli", "node-check", "--profile", PROFILE, *memlock_vars()]
CHECKS = len(load_playbook("node-check").checks)
ADMIN_REASON = "admin: PSU swap [ticket=INC-4711]; do not resume"
# Slurm runs a health check within this long of a change (interval 2 s, a node-check of a few seconds on
# a busy two-core machine), with room to spare.
HEALTH_CHECK_WAIT_S = 90


def drained_by_diagnose(fields: dict[str, str]) -> bool:
    return "DRAIN" in fields["State"].split("+") and fields.get("Reason", "").startswith("diagnose:")


def not_drained(fields: dict[str, str]) -> bool:
    return "DRAIN" not in fields["State"].split("+") and "Reason" not in fields


def test_healthy_node_one_line_exit_0_and_json(tmp_path: Path) -> None:
    with slurm_bed(tmp_path / "slurm", [healthy_h100("n1")]) as bed:
        record = tmp_path / "n1.json"
        step = bed.srun("n1", [*NODE_CHECK, "--drain", "--json", str(record)])
        assert step.returncode == 0, step.stderr
        assert re.fullmatch(rf"diagnose node-check: OK n1 \({CHECKS} checks, \d+\.\d s\)\n", step.stdout)
        assert not_drained(bed.node("n1"))
    document = json.loads(record.read_text())
    assert document["verdict"] == "PASS"
    assert [h["name"] for h in document["hosts"]] == ["n1"]
    assert {c["id"] for c in document["checks"]} == set(load_playbook("node-check").checks)
    assert {c["status"] for c in document["checks"]} <= {"PASS", "WARN", "SKIP"}
    assert document["run"]["node_check"]["healthy"] is True
    assert document["run"]["node_check"]["slurm_action"] == "none"
    assert document["run"]["playbook"] == "node-check"


def test_planted_fault_drains_that_node_through_srun(tmp_path: Path) -> None:
    with slurm_bed(tmp_path / "slurm", [healthy_h100("n1"), healthy_h100("n2")]) as bed:
        bed.plant("n2", port_down("n2"))
        step = bed.srun("n2", [*NODE_CHECK, "--drain"])
        assert step.returncode == 1, step.stderr
        line = step.stdout
        assert line.count("\n") == 1
        assert line.startswith("diagnose node-check: FAIL n2: ib.port_state ")
        assert "mlx5_9/1 Down/Polling" in line
        assert line.rstrip().endswith("s; drained)")
        fields = bed.wait_for_node("n2", drained_by_diagnose, what="drained by node-check")["n2"]
        reason = fields["Reason"]
        assert reason.startswith("diagnose: ib.port_state ") and "mlx5_9/1 Down/Polling" in reason
        assert len(reason) <= 160
        # The healthy node beside it is neither drained nor judged unhealthy.
        assert bed.srun("n1", [*NODE_CHECK, "--drain"]).returncode == 0
        assert not_drained(bed.node("n1"))


def _log_lines(bed: SlurmBed, node: str) -> list[str]:
    log = bed.health_check_log(node)
    return log.read_text().splitlines() if log.exists() else []


def _wait_for_line(bed: SlurmBed, node: str, after: int, predicate: Callable[[str], bool]) -> str:
    """The first line the node's health check printed after line ``after`` that satisfies ``predicate``."""
    deadline = time.monotonic() + HEALTH_CHECK_WAIT_S
    while time.monotonic() < deadline:
        for line in _log_lines(bed, node)[after:]:
            if predicate(line):
                return line
        time.sleep(0.2)
    raise AssertionError(f"{node}: no such health check line; log:\n" + "\n".join(_log_lines(bed, node)))


def test_health_check_program_drains_resumes_and_leaves_an_admin_drain(tmp_path: Path) -> None:
    nodes = [healthy_h100("n1"), healthy_h100("n2"), healthy_h100("n3")]
    check = HealthCheck(argv=[*NODE_CHECK, "--drain"], interval=2)
    with slurm_bed(tmp_path / "slurm", nodes, health_check=check) as bed:
        for node in ("n2", "n3"):
            _wait_for_line(bed, node, 0, lambda line: line.startswith("diagnose node-check: OK"))
        # n2 breaks; n3 is drained by an admin and breaks too.
        mark = {node: len(_log_lines(bed, node)) for node in ("n2", "n3")}
        bed.drain("n3", ADMIN_REASON)
        bed.plant("n2", port_down("n2"))
        bed.plant("n3", xid_79("n3"))
        fields = bed.wait_for_node("n2", drained_by_diagnose, timeout=HEALTH_CHECK_WAIT_S)["n2"]
        assert fields["Reason"].startswith("diagnose: ib.port_state ")
        line = _wait_for_line(
            bed, "n3", mark["n3"], lambda line: line.startswith("diagnose node-check: FAIL")
        )
        assert "gpu.xid" in line and f"already out of service: {ADMIN_REASON}" in line
        assert bed.node("n3")["Reason"] == ADMIN_REASON
        # Both are repaired: node-check lifts its own drain only.
        mark = {node: len(_log_lines(bed, node)) for node in ("n2", "n3")}
        bed.plant("n2", healthy_h100("n2"))
        bed.plant("n3", healthy_h100("n3"))
        bed.wait_for_node("n2", not_drained, timeout=HEALTH_CHECK_WAIT_S, what="resumed")
        resumed = _wait_for_line(bed, "n2", mark["n2"], lambda line: "resumed" in line)
        assert resumed.startswith("diagnose node-check: OK n2 ")
        line = _wait_for_line(bed, "n3", mark["n3"], lambda line: line.startswith("diagnose node-check: OK"))
        assert f"left out of service: {ADMIN_REASON}" in line
        fields = bed.node("n3")
        assert fields["State"] == "IDLE+DRAIN" and fields["Reason"] == ADMIN_REASON
        assert not_drained(bed.node("n1"))


def test_prolog_keeps_jobs_off_a_faulty_node(tmp_path: Path) -> None:
    """As Prolog, node-check's exit 1 makes Slurm fail the job's launch there; the node is drained with
    node-check's reason, which Slurm's own "Prolog error" drain does not replace."""
    prolog = tmp_path / "prolog.sh"
    with slurm_bed(
        tmp_path / "slurm", [healthy_h100("n1"), healthy_h100("n2")], extra_conf=[f"Prolog={prolog}"]
    ) as bed:
        prolog.write_text(
            f"#!/bin/sh\nexport PATH={shlex.quote(bed.path)} SLURM_CONF={shlex.quote(str(bed.conf))}\n"
            f"exec {shlex.join([*NODE_CHECK, '--drain'])} >>{shlex.quote(str(tmp_path))}/prolog.log 2>&1\n"
        )
        prolog.chmod(0o755)
        assert bed.srun("n1", ["hostname"]).stdout == "n1\n"
        bed.plant("n2", port_down("n2"))
        step = bed.srun("n2", ["hostname"])
        assert step.returncode != 0 and "n2" not in step.stdout
        assert "prolog failed" in step.stderr
        fields = bed.wait_for_node("n2", drained_by_diagnose, what="drained by node-check")["n2"]
        assert "mlx5_9/1 Down/Polling" in fields["Reason"]
        assert not_drained(bed.node("n1"))


def test_drain_where_slurm_does_not_know_the_node_exits_3(tmp_path: Path) -> None:
    """scontrol answers, but not for this node: nothing is changed and the exit code says so."""
    with slurm_bed(tmp_path / "slurm", ["n1"]) as bed:
        bed.env["SLURMD_NODENAME"] = "no-such-node"
        done = bed.run([*NODE_CHECK, "-e", "expected_hca_count=0", "-e", "expected_gpu_count=0", "--drain"])
        assert done.returncode == 3, done.stdout + done.stderr
        assert done.stdout.startswith("diagnose node-check: ")
        assert "Slurm not updated: scontrol show exited 1" in done.stdout
        assert not_drained(bed.node("n1"))
