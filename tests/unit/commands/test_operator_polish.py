"""What an operator meets first on the command line: a sub-command typed wrong gets the closest one, as a
misspelled option does; ``diagnose checks`` fits an 80-column terminal; ``--check`` shows a key file's path
and masks a ``-e`` token, saying which values it hid; and ``--history`` is named once, by
``DIAGNOSE_HISTORY`` or the inventory's ``diagnose_history``, with ``--history`` above both. Real parser,
real dry runs on this machine (connection local)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from diagnose.cli import main
from diagnose.commands.checks import check_rows, table_lines


def _usage_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    with pytest.raises(SystemExit) as caught:
        main(argv)
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    return err.strip()


def test_a_misspelled_sub_command_gets_the_closest_one(capsys) -> None:
    line = _usage_error(capsys, ["rnu"])
    assert line.startswith("diagnose: unknown command rnu; did you mean run? (one of run, report,"), line
    line = _usage_error(capsys, ["campaign", "statsu", "dc3"])
    assert line.startswith("diagnose campaign: unknown command statsu; did you mean status?"), line
    line = _usage_error(capsys, ["zzz"])  # nothing close: the choices, and no guess
    assert "did you mean" not in line and line.startswith("diagnose: unknown command zzz (one of run,"), line


@pytest.mark.parametrize("width", [80, 60, 120])
def test_checks_fit_the_terminal(width: int) -> None:
    rows = check_rows()
    lines = table_lines(rows, width)
    assert max(len(line) for line in lines) <= width, max(lines, key=len)
    text = " ".join(" ".join(lines).split())
    for row in rows:  # nothing cut: every check's id and every word of what it judges is there
        assert row[0] in text and " ".join(row[4].split()) in text, row[0]


def test_checks_through_a_pipe_keep_to_columns(tmp_path) -> None:
    """A pipe has no width: COLUMNS, else 80, as ``| less`` would show it."""
    out = subprocess.run(
        [sys.executable, "-m", "diagnose", "checks"], cwd=Path(__file__).parents[3],
        capture_output=True, text=True, check=True, env={"COLUMNS": "80", "PATH": "/usr/bin:/bin"},
    ).stdout  # fmt: skip
    assert max(len(line) for line in out.splitlines()) <= 80


def _inventory(tmp_path: Path, extra: str = "") -> None:
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    (tmp_path / "cluster.yaml").write_text(
        "all:\n  vars:\n    ansible_user: ops\n"
        f"    ansible_ssh_private_key_file: {key}\n    ansible_become_pass: hunter2\n"
        f"    kube_version: v1.31\n{extra}  hosts:\n    gpu01: {{ansible_host: 10.0.0.11}}\n"
    )


def test_check_shows_key_paths_masks_secret_values_and_says_which(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    _inventory(tmp_path)
    argv = ["run", "-i", "cluster.yaml", "--check", "-e", "my_token=s3cret", "-e", "vault_password_file=~/.v"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "s3cret" not in out and "hunter2" not in out
    lines = out.splitlines()
    assert f"  ansible_ssh_private_key_file = {tmp_path / 'id_ed25519'}" in lines  # a path, no secret
    assert "  vault_password_file = ~/.v" in lines
    assert "  my_token = REDACTED" in lines  # given with -e: shown, masked, never silently dropped
    assert "  ansible_become_pass = REDACTED" in lines
    assert "hidden: the values of ansible_become_pass, my_token (REDACTED: their names look secret)" in lines
    assert any(line.startswith("not shown: ") and "other variable" in line for line in lines), out


def _history_line(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["run", "-i", "cluster.yaml", "--check", *argv]) == 0
    return next(line for line in capsys.readouterr().out.splitlines() if line.startswith("history: "))


def test_history_is_named_once_by_inventory_or_environment(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DIAGNOSE_HISTORY", raising=False)
    _inventory(tmp_path, f"    diagnose_history: {tmp_path}/inventory.sqlite3\n")
    assert _history_line(capsys).startswith(f"history: recorded in {tmp_path}/inventory.sqlite3;")
    monkeypatch.setenv("DIAGNOSE_HISTORY", str(tmp_path / "env.sqlite3"))
    assert _history_line(capsys).startswith(f"history: recorded in {tmp_path}/env.sqlite3;")
    line = _history_line(capsys, "--history", str(tmp_path / "cli.sqlite3"))
    assert line.startswith(f"history: recorded in {tmp_path}/cli.sqlite3;")
    # the commands that read no inventory take the environment's too: a database that is not there is
    # refused by its name, not answered from the default one
    assert main(["history"]) == 2
    assert f"{tmp_path}/env.sqlite3: no history database here" in capsys.readouterr().err


def test_inventory_history_in_a_missing_folder_is_refused(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DIAGNOSE_HISTORY", raising=False)
    _inventory(tmp_path, f"    diagnose_history: {tmp_path}/typo/h.sqlite3\n")
    assert main(["run", "-i", "cluster.yaml", "--check"]) == 2
    assert f"the folder {tmp_path}/typo does not exist" in capsys.readouterr().err
