"""Running a local program (diagnose.core.process) for real: answers, and the three ways it cannot run,
each worded as the Slurm, kubectl and srun callers pass them on."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from diagnose.core.errors import ConfigError
from diagnose.core.process import DENIED, MISSING, TIMEOUT, ProgramError, run_program
from diagnose.k8s.kubectl import K8sError, run_kubectl
from diagnose.launchers.srun import slurm_command
from diagnose.slurm.drain import SlurmError, read_node
from diagnose.targets.slurm_nodes import run_slurm


def test_a_failing_program_is_an_answer_with_its_outputs() -> None:
    done = run_program(["/bin/sh", "-c", "read x; echo out $x; echo err >&2; exit 3"], 10, stdin="in\n")
    assert (done.returncode, done.stdout, done.stderr) == (3, "out in\n", "err\n")


def test_without_input_the_program_reads_an_empty_stdin() -> None:
    assert run_program(["/bin/sh", "-c", "cat; echo end"], 10).stdout == "end\n"


def test_missing_denied_and_silent_programs_are_told_apart(tmp_path: Path) -> None:
    script = tmp_path / "tool"
    script.write_text("#!/bin/sh\necho started; sleep 30\n")
    with pytest.raises(ProgramError, match=r"^no-such-tool-x: command not found$") as missing:
        run_program(["no-such-tool-x"], 5)
    with pytest.raises(ProgramError, match=r"tool: not executable$") as denied:
        run_program([str(script)], 5)
    script.chmod(0o755)
    with pytest.raises(ProgramError, match=r"tool gave no answer in 1 s$") as silent:
        run_program([str(script)], 1)
    assert [missing.value.reason, denied.value.reason, silent.value.reason] == [MISSING, DENIED, TIMEOUT]
    assert silent.value.output == "started\n"


def test_callers_word_a_program_that_cannot_run_for_their_readers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ConfigError, match=r"^sinfo: command not found \(run on a Slurm"):
        run_slurm(["sinfo"])
    with pytest.raises(SlurmError, match=r"^scontrol: command not found \(set PATH"):
        read_node("n1")
    with pytest.raises(K8sError, match=r"^kubectl: command not found \(install kubectl"):
        run_kubectl(["kubectl", "get", "pods"], 5)
    answer = slurm_command(["scancel", "1.0"])
    assert (answer.returncode, answer.stderr) == (127, "scancel: command not found")


def test_kubectl_that_hangs_is_an_answer_not_an_error() -> None:
    done = run_kubectl([sys.executable, "-c", "import time; time.sleep(30)"], 1)
    assert done.returncode == 124 and done.stderr.endswith("gave no answer in 1 s")
