"""The checks step's transport, without Slurm: each task's script run by a local shell, its output
labelled as ``srun --label`` labels it (and cut where srun cuts), read back per node by
:class:`~diagnose.connectors.srun.SrunStep` — byte for byte what the per-host batch gives."""

from __future__ import annotations

import os
import subprocess

from diagnose.connectors.local import LocalConnection
from diagnose.connectors.srun import PIECE_BYTES, SrunStep, checks_step_argv
from diagnose.core.check import Command
from diagnose.core.hosts import Host
from diagnose.core.vars import Vars

COMMANDS = [
    Command("long", "python3 -c \"import sys; sys.stdout.write('ab' * 2600 + '\\n' + 'x' * 1200)\""),
    Command("err", "echo out; printf 'e%.0s' $(seq 1 2100) >&2; echo >&2; echo tail >&2; exit 3"),
    Command("blank", "printf 'one\\n\\n\\nlast'"),
    Command("utf8", "printf 'Gb/s \\342\\200\\224 \\303\\251t\\303\\251\\n'"),
    Command("missing", "no-such-tool-here --version", tool="no-such-tool-here"),
    Command("hang", "sleep 30", timeout=1),
    Command("after", "echo alive"),
]


def run_task(step: SrunStep, node: str, task: int, step_id: str = "12.3") -> tuple[list[bytes], list[bytes]]:
    """The task's script under a local shell as slurmstepd starts it; its lines labelled as srun labels
    them, each line cut at 1 KiB as srun's buffered I/O cuts it (a cut piece labelled afresh)."""
    job, _, number = step_id.partition(".")
    env = {**os.environ, "SLURMD_NODENAME": node, "SLURM_JOB_ID": job, "SLURM_STEP_ID": number}
    done = subprocess.run(["/bin/sh", "-c", step.script], capture_output=True, env=env, timeout=60)

    def labelled(data: bytes) -> list[bytes]:
        lines = []
        for line in data.split(b"\n")[:-1]:
            while len(line) > 1024:
                lines.append(f"{task}: ".encode() + line[:1024])
                line = line[1024:]
            lines.append(f"{task}: ".encode() + line)
        return lines

    return labelled(done.stdout), labelled(done.stderr)


def test_every_output_comes_back_as_the_per_host_batch_gives_it() -> None:
    step = SrunStep("12", ["n7"], COMMANDS)
    out, err = run_task(step, "n7", 0)
    assert max(len(line) for line in out + err) <= PIECE_BYTES + 10, "no line reaches srun's 1 KiB cut"
    step.take_lines(out)
    step.take_lines(err, stderr=True)
    result = step.results()["n7"]
    assert result.started and result.error is None and step.step == "12.3"
    local = LocalConnection(Host("n7", vars=Vars({}, "n7"))).run_batch(COMMANDS)
    for key, expected in local.items():
        got = result.outputs[key]
        assert (got.stdout, got.stderr, got.exit_code, got.timed_out, got.error) == (
            expected.stdout,
            expected.stderr,
            expected.exit_code,
            expected.timed_out,
            expected.error,
        ), key
    assert result.outputs["long"].stdout == "ab" * 2600 + "\n" + "x" * 1200
    assert result.outputs["err"].stderr == "e" * 2100 + "\ntail\n" and result.outputs["err"].exit_code == 3
    assert result.outputs["hang"].timed_out and result.outputs["after"].stdout == "alive\n"


def test_tasks_are_told_apart_by_the_node_they_name_not_by_their_number() -> None:
    commands = [Command("name", "echo $SLURMD_NODENAME")]
    step = SrunStep("12", ["a1", "b2"], commands)
    for task, node in ((0, "b2"), (1, "a1")):  # Slurm numbers tasks in its own node order
        out, err = run_task(step, node, task)
        step.take_lines(out)
        step.take_lines(err, stderr=True)
    results = step.results()
    assert {n: r.outputs["name"].stdout for n, r in results.items()} == {"a1": "a1\n", "b2": "b2\n"}


def test_a_node_whose_task_never_began_is_named_with_sruns_words() -> None:
    step = SrunStep("12", ["n1", "n2"], [Command("id", "echo ok")])
    out, err = run_task(step, "n1", 0)
    step.take_lines(out)
    step.take_lines(err, stderr=True)
    step.take_lines(
        [b"srun: error: Task launch for StepId=12.3 failed on node n2: Communication connection failure"],
        stderr=True,
    )
    results = step.results()
    assert results["n1"].error is None and results["n1"].outputs["id"].stdout == "ok\n"
    assert not results["n2"].started
    assert results["n2"].error == (
        "did not start: srun: error: Task launch for StepId=12.3 failed on node n2: "
        "Communication connection failure"
    )
    assert results["n2"].outputs["id"].error == results["n2"].error


def test_a_task_cut_in_the_middle_leaves_its_unfinished_commands_as_errors() -> None:
    commands = [Command("first", "echo one"), Command("second", "echo two")]
    step = SrunStep("12", ["n1"], commands)
    out, err = run_task(step, "n1", 0)
    cut = next(i for i, line in enumerate(out) if b"OUT second" in line)
    step.take_lines(out[:cut])
    step.take_lines(err, stderr=True)
    result = step.results()["n1"]
    assert result.outputs["first"].stdout == "one\n" and result.outputs["first"].error is None
    assert result.error == "its task ended before the batch finished, in `second`"
    assert result.outputs["second"].error == result.error


def test_a_step_of_the_allocation_or_a_job_of_its_own() -> None:
    inside = checks_step_argv("12", ["n1", "n2"], 5)
    assert inside[:3] == ["srun", "--jobid=12", "--overlap"]
    assert {
        "--nodes=2",
        "--ntasks=2",
        "--ntasks-per-node=1",
        "--nodelist=n1,n2",
        "--no-kill",
        "--label",
    } <= set(inside)
    fresh = checks_step_argv(None, ["n1"], 5)
    assert fresh[1] == "--time=5" and not any(a.startswith(("--jobid", "--overlap")) for a in fresh)


def test_a_task_that_cannot_run_its_batch_says_why() -> None:
    """A node without awk: the task names its node, then its shell's complaint is all it says."""
    step = SrunStep("12", ["n1"], [Command("id", "echo ok")])
    step.take_lines([b"0: n n1 12.3"])
    step.take_lines([b"0: /bin/sh: 1: awk: not found", b"0: /bin/sh: 1: awk: not found"], stderr=True)
    result = step.results()["n1"]
    assert result.started
    assert result.error == "its task ended before the batch finished, in `id` (/bin/sh: 1: awk: not found)"
