"""Logins that cannot work are said before any connection, once, with the inventory line and the fix;
`-T` is the connection timeout's default that a host's variables override, as Ansible's -T.

No host here listens: every refusal must come before a connection is tried (a login attempt would end
in "cannot connect", not exit 2)."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from diagnose.connectors.ssh_login import ssh_login
from diagnose.engine.run import RunOptions, prepare
from tests.support.cli import diagnose

pytestmark = pytest.mark.e2e

NO_AGENT = {"SSH_AUTH_SOCK": None}


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def inventory(path: Path, key_line: str = "", extra: str = "") -> Path:
    """node1, node2 on a closed loopback port; ``key_line`` sits on line 5 (node1's vars)."""
    path.write_text(
        textwrap.dedent(
            f"""\
            all:
              hosts:
                node1:
                  ansible_host: 127.0.0.1
                  {key_line or "ansible_port: 2990"}
                node2: {{ansible_host: 127.0.0.1, ansible_port: 2991}}
            {extra}"""
        )
    )
    return path


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An operator's home without ~/.ssh keys."""
    folder = tmp_path / "home"
    folder.mkdir()
    return folder


def run(tmp_path: Path, home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``diagnose run`` as an operator without keys or agent runs it; a profile, so the only line is ours."""
    return diagnose(
        "run", *argv, "-e", "diagnose_profile=cpu-testbed", "--skip-benchmarks", "--format", "json",
        "-o", str(tmp_path / "out"),
        cwd=tmp_path, env={**NO_AGENT, "HOME": str(home)}, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("name", "content", "why"),
    [
        ("missing_key", None, "no such file"),
        ("keys", "", "is a folder, not a key file"),
        ("id_ed25519.pub", "ssh-ed25519 AAAAC3Nza me@laptop\n", "is a public key"),
        ("notes.txt", "remember the key\n", "is not a private key"),
    ],
)
def test_a_key_file_that_cannot_log_in_names_the_inventory_line_and_the_path(
    tmp_path: Path, home: Path, name: str, content: str | None, why: str
) -> None:
    key = tmp_path / name
    if content == "":
        key.mkdir()
    elif content is not None:
        key.write_text(content)
    inv = inventory(tmp_path / "inv.yaml", f"ansible_ssh_private_key_file: {key}")
    line = one_error_line(run(tmp_path, home, "-i", str(inv)))
    assert line.startswith(f"diagnose: {inv}:5: host node1: ansible_ssh_private_key_file: {key}: {why}"), line
    assert not (tmp_path / "out").exists()


def test_list_hosts_reads_no_key_file_and_check_does(tmp_path: Path, home: Path) -> None:
    """--list-hosts touches nothing, as Ansible's: an inventory whose keys live on the bastion still lists;
    --check shows what a run would do, so the missing key stops it as it would stop the run."""
    inv = inventory(tmp_path / "inv.yaml", "ansible_ssh_private_key_file: /nowhere/id_ed25519")
    env = {**NO_AGENT, "HOME": str(home)}
    listed = diagnose("run", "-i", str(inv), "--list-hosts", cwd=tmp_path, env=env, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[0] for line in listed.stdout.splitlines()[1:]] == ["node1", "node2"]
    checked = diagnose("run", "-i", str(inv), "--check", cwd=tmp_path, env=env, timeout=120)
    assert f"{inv}:5: host node1: ansible_ssh_private_key_file: /nowhere/id_ed25519: no such file" in (
        one_error_line(checked)
    )


def test_a_key_in_ssh_args_is_checked_as_well(tmp_path: Path, home: Path) -> None:
    inv = inventory(tmp_path / "inv.yaml", "ansible_ssh_common_args: -i ~/.ssh/gone")
    line = one_error_line(run(tmp_path, home, "-i", str(inv)))
    assert line.startswith(f"diagnose: {inv}:5: host node1: ansible_ssh_common_args: -i ~/.ssh/gone: no such")


def test_hosts_with_nothing_to_log_in_with_are_said_once_with_the_fix(tmp_path: Path, home: Path) -> None:
    inv = inventory(tmp_path / "inv.yaml")
    line = one_error_line(run(tmp_path, home, "-i", str(inv)))
    assert line.startswith(f"diagnose: {inv}: 2 SSH hosts (node1, node2) have no way to log in:"), line
    assert "SSH_AUTH_SOCK is not set" in line and "set ansible_ssh_private_key_file" in line
    assert "ssh-add" in line and not (tmp_path / "out").exists()


def test_a_default_key_or_an_agent_is_a_way_to_log_in(tmp_path: Path, home: Path) -> None:
    inv = inventory(tmp_path / "inv.yaml", "ansible_port: 2990", "  vars: {ansible_ssh_timeout: 2}\n")
    (home / ".ssh").mkdir()
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(home / ".ssh" / "id_ed25519")], check=True
    )
    done = run(tmp_path, home, "-i", str(inv))
    assert done.returncode == 1, done.stderr  # both hosts tried and unreachable: host.reachable FAIL
    assert "no way to log in" not in done.stderr


def test_hosts_that_need_no_key_are_not_asked_for_one(tmp_path: Path, home: Path) -> None:
    done = run(tmp_path, home)  # this machine, over the local connection
    assert done.returncode in (0, 1), done.stderr
    assert (tmp_path / "out" / "results.json").is_file()


def test_timeout_is_the_default_the_inventory_overrides(tmp_path: Path) -> None:
    inv = inventory(tmp_path / "inv.yaml", "ansible_ssh_timeout: 20")
    hosts = prepare(RunOptions(inventories=[str(inv)], connect_timeout=3.0)).hosts
    assert {h.name: ssh_login(h.vars).connect_timeout for h in hosts} == {"node1": 20.0, "node2": 3.0}
    hosts = prepare(RunOptions([str(inv)], extra_vars=["ansible_ssh_timeout=7"], connect_timeout=3.0)).hosts
    assert {ssh_login(h.vars).connect_timeout for h in hosts} == {7.0}  # -e is above everything
    for bad in ("0", "-1", "soon", "nan"):
        done = diagnose("run", "-T", bad, "-i", str(inv), cwd=tmp_path)
        assert done.returncode == 2 and "-T/--timeout" in done.stderr, done.stderr
