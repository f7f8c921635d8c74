"""Keys checked before any connection (diagnose.connectors.ssh_login): a key file that cannot log in says
why, and the hosts with nothing at all to log in with are found once for the whole run."""

from __future__ import annotations

import os
from pathlib import Path

import paramiko
import pytest

from diagnose.connectors.ssh_login import hosts_without_login, key_file_problem, login_problem
from diagnose.core.hosts import Host
from diagnose.core.vars import Vars


def host(name: str, **values: object) -> Host:
    return Host(name=name, vars=Vars({"ansible_host": "10.0.0.1", **values}, host=name))


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def test_a_private_key_passes_and_each_wrong_file_says_why(tmp_path: Path) -> None:
    key = tmp_path / "id_rsa"
    paramiko.RSAKey.generate(2048).write_private_key_file(str(key))
    assert key_file_problem(str(key)) is None
    putty = tmp_path / "key.ppk"
    putty.write_text("PuTTY-User-Key-File-3: ssh-ed25519\n")
    assert "is a PuTTY key; convert it: puttygen" in str(key_file_problem(str(putty)))
    key.write_text("ssh-rsa AAAAB3 me@laptop\n")  # the same path, now a public key: read again
    assert "is a public key" in str(key_file_problem(str(key)))
    assert key_file_problem(str(tmp_path / "nope")) == f"{tmp_path / 'nope'}: no such file"


def test_nothing_to_log_in_with_is_found_for_ssh_hosts_only(home: Path) -> None:
    hosts = [
        host("node1"),
        host("node2", ansible_password="hunter2"),
        host("pod1", ansible_connection="kubectl"),
        host("here", ansible_connection="local"),
        host("slurm1", ansible_connection="srun"),
        host("node3", ansible_ssh_common_args="-i /etc/keys/site"),
    ]
    assert hosts_without_login(hosts, {}) == ["node1"]
    line = login_problem([host(f"n{i}") for i in range(5)], {"SSH_AUTH_SOCK": str(home / "gone")})
    assert line is not None and line.startswith("5 SSH hosts (n0, n1, n2 and 2 more) have no way to log in")
    assert "SSH_AUTH_SOCK names no socket" in line


def test_an_agent_a_default_key_or_ssh_config_is_a_way_in(home: Path) -> None:
    agent = home / "agent.sock"
    agent.touch()
    assert hosts_without_login([host("node1")], {"SSH_AUTH_SOCK": str(agent)}) == []
    assert hosts_without_login([host("node1", diagnose_ssh_agent=False)], {"SSH_AUTH_SOCK": str(agent)}) == [
        "node1"
    ]
    (home / ".ssh").mkdir()
    (home / ".ssh" / "config").write_text("Host 10.0.0.1\n  IdentityFile ~/.ssh/site\n")
    assert hosts_without_login([host("node1"), host("node9", ansible_host="10.0.0.9")], {}) == ["node9"]
    paramiko.ECDSAKey.generate().write_private_key_file(os.fspath(home / ".ssh" / "id_ecdsa"))
    assert hosts_without_login([host("node9", ansible_host="10.0.0.9")], {}) == []
