"""The host stage as ONE Slurm step on a real Slurm (tests/support/slurmbed.py): every node's checks in one
step of the allocation (and the second snapshot in one more), counted by the slurmds that launched them;
the same verdicts as the per-node steps; a node whose task freezes, and a node that dies under the step,
named while the others finish, the step cancelled with nothing of it left on the nodes; Ctrl-C cancelling
the step.

The nodes are tests/support/hostkit.py's 8x H100 hosts (their tools print real captured outputs), one
with an InfiniBand port Down; ``diagnose run --slurm`` runs beside an allocation made with ``salloc
--no-shell``, as from the allocation's own shell.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from diagnose.connectors.srun import SrunStep
from diagnose.core.check import Command
from tests.support.hostkit import PROFILE, hanging_ibstat, healthy_h100, memlock_vars, port_down
from tests.support.paths import REPO
from tests.support.slurmbed import SlurmBed, slurm_bed

pytestmark = pytest.mark.integration

PLAYBOOK = """\
name: slurm-step
description: every check, no benchmark
checks: ["*"]
"""


@pytest.fixture
def playbook(tmp_path: Path) -> Path:
    path = tmp_path / "slurm-step.yaml"
    path.write_text(PLAYBOOK)
    return path


def bed_of(tmp_path: Path, *nodes: object) -> Iterator[SlurmBed]:
    with slurm_bed(tmp_path / "slurm", list(nodes)) as started:  # type: ignore[arg-type]
        started.env["PYTHONPATH"] = str(REPO)
        yield started


def allocate(bed: SlurmBed, nodes: list[str]) -> str:
    """A job holding ``nodes`` (``salloc --no-shell``): its id."""
    done = bed.run(["salloc", "--no-shell", "--exclusive", "-N", str(len(nodes)), "-w", ",".join(nodes)])
    assert "Granted job allocation" in done.stderr, done.stderr
    return done.stderr.split("Granted job allocation")[1].split()[0]


def diagnose(
    bed: SlurmBed, job: str, nodes: list[str], playbook: Path, out: Path, *extra: str
) -> subprocess.Popen[str]:
    """``diagnose run --slurm`` as from inside job ``job`` (its environment), started and not waited for."""
    argv = [sys.executable, "-m", "diagnose.cli", "run", "--slurm", "--playbook", str(playbook)]
    argv += ["--out", str(out), "--format", "json", "-e", f"diagnose_profile={PROFILE}", *memlock_vars()]
    env = {**bed.env, "SLURM_JOB_ID": job, "SLURM_JOB_NODELIST": ",".join(nodes), "SLURM_CLUSTER_NAME": "bed"}
    return subprocess.Popen(
        [*argv, *extra], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def finish(proc: subprocess.Popen[str], timeout: float = 300) -> tuple[int, str]:
    _, err = proc.communicate(timeout=timeout)
    return proc.returncode, err


def verdicts(out: Path) -> dict[tuple[str, str | None], str]:
    results = json.loads((out / "results.json").read_text())
    return {(c["id"], c["host"]): c["status"] for c in results["checks"]}


def check(out: Path, check_id: str, host: str) -> dict:
    results = json.loads((out / "results.json").read_text())
    return next(c for c in results["checks"] if c["id"] == check_id and c["host"] == host)


def evidence(out: Path) -> dict[str, list[str]]:
    return {d.name: sorted(f.name for f in d.iterdir()) for d in sorted((out / "raw").iterdir())}


def wait_for_tool(
    bed: SlurmBed, node: str, tool: str, proc: subprocess.Popen[str], timeout: float = 60
) -> None:
    """Until a process of a job step on ``node`` runs ``tool`` (the hanging ibstat)."""
    deadline = time.monotonic() + timeout

    def running() -> bool:
        # The program a process runs, under `timeout -k 2 3` or a script's shell: its first words.
        words = [w for cmd in bed.step_processes(node).values() for w in cmd.split()[:5]]
        return any(w == tool or w.endswith(f"/{tool}") for w in words)

    while not running():
        assert proc.poll() is None, f"diagnose ended first: {proc.communicate()}"
        assert time.monotonic() < deadline, f"{tool} never ran on {node}: {bed.step_processes(node)}"
        time.sleep(0.02)


def no_step_left(bed: SlurmBed, job: str, nodes: list[str]) -> None:
    """squeue lists no step of ``job`` and no process of any step is left on ``nodes``."""
    deadline = time.monotonic() + 20
    while True:
        steps = bed.run(["squeue", "-h", "-s", "-j", job, "-o", "%i %j"]).stdout.strip()
        left = {n: bed.step_processes(n) for n in nodes if bed.step_processes(n)}
        if not steps and not left:
            return
        assert time.monotonic() < deadline, f"left behind: steps {steps!r}, processes {left}"
        time.sleep(0.2)


@pytest.fixture
def four(tmp_path: Path) -> Iterator[SlurmBed]:
    yield from bed_of(tmp_path, healthy_h100("n1"), port_down("n2"), healthy_h100("n3"), healthy_h100("n4"))


def test_one_step_checks_every_node_with_the_per_node_verdicts(
    four: SlurmBed, playbook: Path, tmp_path: Path
) -> None:
    nodes = ["n1", "n2", "n3", "n4"]
    job = allocate(four, nodes)
    code, err = finish(diagnose(four, job, nodes, playbook, tmp_path / "step"))
    assert code == 1, err  # n2's port is Down
    # One step ran the checks on every node, one more the second snapshot of the counters after the run.
    assert four.launched_steps(job) == {f"{job}.0": nodes, f"{job}.1": nodes}

    no_step_left(four, job, nodes)
    four.run(["scancel", job], check=True)
    per_node_job = allocate(four, nodes)
    code, err = finish(
        diagnose(four, per_node_job, nodes, playbook, tmp_path / "per-node", "-e", "slurm_step_checks=false")
    )
    assert code == 1, err
    per_node_steps = four.launched_steps(per_node_job)
    assert all(len(launched) == 1 for launched in per_node_steps.values())
    assert len(per_node_steps) == 3 * len(nodes), "a `true`, the batch, the second snapshot per node"

    step_verdicts = verdicts(tmp_path / "step")
    assert step_verdicts == verdicts(tmp_path / "per-node")
    assert {step_verdicts[("host.reachable", n)] for n in nodes} == {"PASS"}
    assert (
        step_verdicts[("ib.port_state", "n2")] == "FAIL" and step_verdicts[("ib.port_state", "n1")] == "PASS"
    )
    assert "mlx5_9" in check(tmp_path / "step", "ib.port_state", "n2")["message"]
    assert evidence(tmp_path / "step") == evidence(tmp_path / "per-node")
    ibstat = "ibstat.txt"
    assert (tmp_path / "step" / "raw" / "n1" / ibstat).read_text() == (
        tmp_path / "per-node" / "raw" / "n1" / ibstat
    ).read_text()


@pytest.fixture
def three_one_hanging(tmp_path: Path) -> Iterator[SlurmBed]:
    yield from bed_of(tmp_path, healthy_h100("n1"), hanging_ibstat("n2"), healthy_h100("n3"))


def test_a_frozen_node_is_named_and_the_step_cancelled_at_its_deadline(
    three_one_hanging: SlurmBed, playbook: Path, tmp_path: Path
) -> None:
    bed, nodes = three_one_hanging, ["n1", "n2", "n3"]
    job = allocate(bed, nodes)
    started = time.monotonic()
    proc = diagnose(bed, job, nodes, playbook, tmp_path / "out", "-e", "command_timeout_s=3")
    wait_for_tool(bed, "n2", "ibstat", proc)
    assert bed.freeze("n2"), "n2's task, its timeout and ibstat are stopped: only SIGKILL ends them"
    code, err = finish(proc)
    assert code == 1, err
    assert time.monotonic() - started < 120
    reachable = check(tmp_path / "out", "host.reachable", "n2")
    assert reachable["status"] == "FAIL"
    assert "no output by the deadline: n2 made no progress for" in reachable["message"]
    assert check(tmp_path / "out", "ib.port_state", "n2")["status"] == "ERROR"
    for node in ("n1", "n3"):
        assert check(tmp_path / "out", "host.reachable", node)["status"] == "PASS"
        assert check(tmp_path / "out", "ib.port_state", node)["status"] == "PASS"
    assert next(iter(bed.launched_steps(job).items())) == (f"{job}.0", nodes)
    no_step_left(bed, job, nodes)


def test_a_node_that_dies_under_the_step_is_named_and_the_others_finish(
    three_one_hanging: SlurmBed, playbook: Path, tmp_path: Path
) -> None:
    bed, nodes = three_one_hanging, ["n1", "n2", "n3"]
    job = allocate(bed, nodes)
    proc = diagnose(bed, job, nodes, playbook, tmp_path / "out", "-e", "command_timeout_s=3")
    wait_for_tool(bed, "n2", "ibstat", proc)
    bed.crash("n2")  # slurmd, slurmstepd and the task gone, as when the machine loses power
    code, err = finish(proc)
    assert code == 1, err
    reachable = check(tmp_path / "out", "host.reachable", "n2")
    assert reachable["status"] == "FAIL" and "no output by the deadline" in reachable["message"]
    for node in ("n1", "n3"):
        assert check(tmp_path / "out", "host.reachable", node)["status"] == "PASS"
        assert check(tmp_path / "out", "ib.port_state", node)["status"] == "PASS"
        assert bed.step_processes(node) == {}


@pytest.fixture
def two_hanging(tmp_path: Path) -> Iterator[SlurmBed]:
    yield from bed_of(tmp_path, hanging_ibstat("n1"), hanging_ibstat("n2"))


def test_ctrl_c_cancels_the_step(two_hanging: SlurmBed, playbook: Path, tmp_path: Path) -> None:
    bed, nodes = two_hanging, ["n1", "n2"]
    job = allocate(bed, nodes)
    proc = diagnose(bed, job, nodes, playbook, tmp_path / "out", "-e", "command_timeout_s=60")
    for node in nodes:
        wait_for_tool(bed, node, "ibstat", proc)
    proc.send_signal(signal.SIGINT)
    code, err = finish(proc, timeout=90)
    assert code == 130, err
    assert json.loads((tmp_path / "out" / "results.json").read_text())["run"]["interrupted"] is True
    no_step_left(bed, job, nodes)


@pytest.fixture
def bare_three(tmp_path: Path) -> Iterator[SlurmBed]:
    yield from bed_of(tmp_path, "n1", "n2", "n3")


def test_without_an_allocation_the_step_is_a_job_of_its_own(
    bare_three: SlurmBed, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No job held: the checks step allocates its nodes itself; where another job holds one of them
    exclusively, the nodes are named as not started, with srun's words, and nothing stays queued."""
    bed = bare_three
    for key in ("SLURM_CONF", "PATH"):
        monkeypatch.setenv(key, bed.env[key])
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    commands = [Command("name", "hostname")]
    step = SrunStep(None, ["n1", "n3"], commands)
    results = step.run()
    assert {n: r.outputs["name"].stdout for n, r in results.items()} == {"n1": "n1\n", "n3": "n3\n"}
    assert step.step is not None and step.step.endswith(".0")

    holder = allocate(bed, ["n2"])
    waiting = SrunStep(None, ["n1", "n2"], commands, start_timeout=3)
    results = waiting.run()
    for node in ("n1", "n2"):
        assert not results[node].started
        assert results[node].error.startswith(
            f"did not start: no task of the step began on {node} within 3 s"
        )
        assert "queued and waiting for resources" in results[node].error
    queued = bed.run(["squeue", "-h", "-o", "%i"]).stdout.split()
    assert queued == [holder], "the checks' own job gave up its place in the queue"
