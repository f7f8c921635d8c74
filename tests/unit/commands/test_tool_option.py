"""``run --tool``: nccl-tests or torch for the collectives without writing a playbook of one's own.

The option overrides the playbook's ``benchmarks.tool``; the dry run shows which tool measures and, for
nccl-tests, which binaries run and how, so a missing ``nccl_tests_dir`` is seen before any host is touched.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from diagnose.cli import main
from diagnose.core.errors import ConfigError
from diagnose.engine.run import RunOptions, prepare
from diagnose.slurm.submit import SlurmQuery, inner_argv


def _inventory(tmp_path: Path) -> Path:
    """Two SSH hosts the dry run never connects to."""
    path = tmp_path / "cluster.yaml"
    path.write_text(
        "all:\n  vars:\n    ansible_user: ops\n  hosts:\n"
        "    gpu01: {ansible_host: 10.0.0.11}\n    gpu02: {ansible_host: 10.0.0.12}\n"
    )
    return path


def _usage_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """The one stderr line of a usage error (exit 2, nothing on stdout)."""
    with pytest.raises(SystemExit) as caught:
        main(argv)
    assert caught.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and "usage:" not in err
    assert len(err.splitlines()) == 1, err
    return err.strip()


def test_tool_nccl_tests_reaches_the_plan_over_the_playbooks_torch(tmp_path: Path) -> None:
    inventory = str(_inventory(tmp_path))
    default = prepare(RunOptions(inventories=[inventory], list_only=True))
    assert default.playbook.benchmarks is not None and default.playbook.benchmarks.tool == "torch"
    chosen = prepare(RunOptions(inventories=[inventory], list_only=True, tool="nccl-tests"))
    assert chosen.playbook.benchmarks is not None and chosen.playbook.benchmarks.tool == "nccl-tests"
    # Everything else of the plan stays the playbook's.
    assert chosen.playbook.benchmarks.collectives == default.playbook.benchmarks.collectives
    back = prepare(RunOptions(inventories=[inventory], list_only=True, tool="torch", playbook="nightly"))
    assert back.playbook.benchmarks is not None and back.playbook.benchmarks.tool == "torch"


def test_the_dry_run_shows_the_tool_and_the_binaries_it_would_start(capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    argv = ["run", "-i", str(_inventory(tmp_path)), "--check", "--tool", "nccl-tests"]
    assert main([*argv, "-e", "nccl_tests_dir=/opt/nccl-tests/build"]) == 0
    out = capsys.readouterr().out
    assert "benchmark sweep: all_reduce with nccl-tests (--tool)" in out, out
    assert "nccl-tests: /opt/nccl-tests/build/all_reduce_perf, under mpirun across the 2 hosts" in out, out
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "nccl-tests: nccl_tests_dir is not set, so no binary can run: each would be an ERROR" in out, out


def test_a_bad_tool_is_exit_2_in_one_line(capsys) -> None:
    line = _usage_error(capsys, ["run", "--tool", "nccl"])
    assert line.startswith("diagnose run: --tool: invalid choice: 'nccl' (choose from 'torch', 'nccl-tests')")
    line = _usage_error(capsys, ["campaign", "next", "c1", "--tool", "mpi"])
    assert "--tool: invalid choice: 'mpi'" in line, line
    # A caller that builds RunOptions itself (a script, campaign next) gets the same refusal.
    with pytest.raises(ConfigError, match="--tool: must be one of torch, nccl-tests, got 'mpi'"):
        prepare(RunOptions(list_only=True, tool="mpi"))


def test_a_tool_with_nothing_to_measure_is_refused(capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    line = _usage_error(capsys, ["run", "--tool", "nccl-tests", "--skip-benchmarks", "--check"])
    assert "--tool nccl-tests: --skip-benchmarks measures no collectives; give one of the two" in line
    assert main(["run", "--check", "--tool", "nccl-tests", "--playbook", "node-check"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1, err
    assert "--tool nccl-tests: the playbook node-check measures no collectives" in err, err


def test_a_slurm_submission_passes_the_tool_to_the_batch_job() -> None:
    argv = inner_argv(RunOptions(tool="nccl-tests"), SlurmQuery(partitions="gpu"), [], None)
    assert argv[argv.index("--tool") + 1] == "nccl-tests"
    assert "--tool" not in inner_argv(RunOptions(), SlurmQuery(partitions="gpu"), [], None)
