"""Hosts reachable only through a jump host, configured as Ansible users configure them.

The bed's hosts ``behind_jump`` listen in a private network namespace: a direct connection from this
process is refused, and only the bastion's sshd reaches them. Every test here runs ``diagnose run`` as
an operator does (a fresh ``python -m diagnose.cli``), except the first, which runs it in-process to see
that the one shared bastion login is closed when the run ends.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from diagnose.cli import main
from diagnose.connectors import open_jump_hosts
from tests.support.paths import REPO
from tests.support.testbed import HostSpec, TestBed, TestHost

pytestmark = pytest.mark.integration

PLAYBOOK = "name: jump\ndescription: reachability and ports\nchecks: [host.reachable, net.port_range]\n"
CUSTOM_CHECK = """\
def test_port_range_file_is_readable(host):
    assert host.file("/proc/sys/net/ipv4/ip_local_port_range").exists


def test_runs_behind_the_bastion(host):
    assert host.run("echo behind").stdout.strip() == "behind"
"""
TARGETS = ["gpu1", "gpu2", "gpu3"]


def start(testbed: TestBed) -> tuple[TestHost, list[TestHost]]:
    bastion = testbed.add(HostSpec("bastion", jump=True))
    targets = testbed.add_many([HostSpec(name, behind_jump=True) for name in TARGETS])
    return bastion, targets


def playbook(tmp_path: Path, custom: bool = False) -> Path:
    path = tmp_path / "jump.yaml"
    text = PLAYBOOK
    if custom:
        module = tmp_path / "site_checks" / "test_behind.py"
        module.parent.mkdir()
        module.write_text(CUSTOM_CHECK)
        text += f'custom_checks: ["{module}"]\n'
    path.write_text(text)
    return path


def by_host(results: dict, check_id: str) -> dict[str, dict]:
    return {c["host"]: c for c in results["checks"] if c["id"] == check_id}


def logins(host: TestHost) -> int:
    """Successful logins the host's sshd recorded."""
    return host.log.read_text(errors="replace").count("Accepted publickey")


def run_cli(
    tmp_path: Path, inventory: Path, *, custom: bool = False, home: Path | None = None
) -> tuple[subprocess.CompletedProcess[str], dict | None]:
    """``diagnose run`` in a fresh process (HOME replaced when given); its results, if it wrote any."""
    out = tmp_path / "out"
    argv = ["run", "-i", str(inventory), "--playbook", str(playbook(tmp_path, custom)), "-o", str(out)]
    env = {**os.environ, "PYTHONPATH": str(REPO), **({"HOME": str(home)} if home else {})}
    done = subprocess.run(
        [sys.executable, "-m", "diagnose.cli", *argv, "--format", "json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    results = json.loads((out / "results.json").read_text()) if (out / "results.json").exists() else None
    return done, results


def assert_all_pass(results: dict) -> None:
    for check_id in ("host.reachable", "net.port_range"):
        statuses = {h: c["status"] for h, c in by_host(results, check_id).items()}
        assert statuses == dict.fromkeys(TARGETS, "PASS"), (check_id, by_host(results, check_id))


def test_targets_refuse_direct_connections_but_answer_through_the_bastion(
    testbed: TestBed, tmp_path: Path
) -> None:
    bastion, targets = start(testbed)
    for target in targets:
        direct = testbed.ssh(target, "true")
        assert direct.returncode == 255 and "Connection refused" in direct.stderr
        through = testbed.ssh(target, "cat /proc/sys/net/ipv4/ip_local_port_range", jump=bastion)
        assert through.returncode == 0 and through.stdout.split() == ["32768", "60999"], through.stderr

    # Without the jump host diagnose cannot reach them either.
    _, results = run_cli(tmp_path, testbed.write_inventory(tmp_path / "plain.yaml", hosts=targets))
    assert results is not None
    reach = by_host(results, "host.reachable")
    assert all(reach[t]["status"] == "FAIL" and "refused" in reach[t]["message"] for t in TARGETS)


def test_proxy_jump_in_common_args_reaches_every_target_over_one_bastion_login(
    testbed: TestBed, tmp_path: Path
) -> None:
    bastion, targets = start(testbed)
    before = logins(bastion)
    inventory = testbed.write_inventory(
        tmp_path / "inv.yaml",
        hosts=targets,
        extra_vars={
            "ansible_ssh_common_args": (
                f"-o ProxyJump=root@127.0.0.1:{bastion.port} -o ControlMaster=auto -o ControlPersist=60s"
            )
        },
    )
    out = tmp_path / "out"
    argv = ["run", "-i", str(inventory), "--playbook", str(playbook(tmp_path)), "-o", str(out)]
    code = main([*argv, "-f", "3", "--format", "json"])
    results = json.loads((out / "results.json").read_text())
    assert code == 0, results
    assert_all_pass(results)
    assert logins(bastion) - before == 1  # three targets, one bastion login
    assert open_jump_hosts() == 0  # closed with the last target's connection


def test_proxy_command_in_extra_args_and_custom_checks_behind_the_bastion(
    testbed: TestBed, tmp_path: Path
) -> None:
    bastion, targets = start(testbed)
    hop = testbed.ssh_argv(bastion, "")[:-2]  # the real OpenSSH client with the bed's key
    proxy = shlex.join([*hop, "-W", "%h:%p", "root@127.0.0.1"])
    inventory = testbed.write_inventory(
        tmp_path / "inv.ini",
        hosts=targets,
        fmt="ini",
        extra_vars={"ansible_ssh_extra_args": f"-o ProxyCommand={shlex.quote(proxy)}"},
    )
    done, results = run_cli(tmp_path, inventory, custom=True)
    assert done.returncode == 0, done.stderr
    assert_all_pass(results)
    custom = [c for c in results["checks"] if c["id"].startswith("custom.")]
    assert len(custom) == 2 * len(TARGETS) and all(c["status"] == "PASS" for c in custom), custom
    assert {c["host"] for c in custom} == set(TARGETS)


def test_proxy_jump_from_ssh_config_including_custom_checks(testbed: TestBed, tmp_path: Path) -> None:
    bastion, targets = start(testbed)
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text(
        "Host gpu*\n  HostName 127.0.0.1\n  ProxyJump bastion\n\n"
        f"Host bastion\n  HostName 127.0.0.1\n  Port {bastion.port}\n  User root\n"
        f"  IdentityFile {testbed.client_key}\n  UserKnownHostsFile {testbed.known_hosts}\n"
    )
    inventory = tmp_path / "inv.yaml"
    hosts = "".join(f"    {t.name}:\n      ansible_port: {t.port}\n" for t in targets)
    inventory.write_text(
        "all:\n  vars:\n    ansible_user: root\n"
        f"    ansible_ssh_private_key_file: {testbed.client_key}\n"
        f"    diagnose_known_hosts_file: {testbed.known_hosts}\n  hosts:\n{hosts}"
    )
    before = logins(bastion)
    done, results = run_cli(tmp_path, inventory, custom=True, home=home)
    assert done.returncode == 0, done.stderr
    assert_all_pass(results)
    custom = [c for c in results["checks"] if c["id"].startswith("custom.")]
    assert len(custom) == 2 * len(TARGETS) and all(c["status"] == "PASS" for c in custom), custom
    # testinfra's OpenSSH logs into the bastion once per command (controlpersist=0), so no count here.
    assert logins(bastion) > before


def test_bastion_key_is_checked_against_known_hosts(testbed: TestBed, tmp_path: Path) -> None:
    bastion, targets = start(testbed)
    bastion.change_host_key()  # known_hosts keeps the old key
    inventory = testbed.write_inventory(
        tmp_path / "inv.yaml",
        hosts=targets[:1],
        extra_vars={"ansible_ssh_common_args": f"-J root@127.0.0.1:{bastion.port}"},
    )
    done, results = run_cli(tmp_path, inventory)
    assert done.returncode == 1, done.stderr
    failed = by_host(results, "host.reachable")["gpu1"]
    assert failed["status"] == "FAIL"
    assert f"jump host root@127.0.0.1:{bastion.port}" in failed["message"] and "CHANGED" in failed["message"]


def test_bastion_down_fails_reachability_naming_the_bastion(testbed: TestBed, tmp_path: Path) -> None:
    bastion, targets = start(testbed)
    inventory = testbed.write_inventory(
        tmp_path / "inv.yaml",
        hosts=targets,
        extra_vars={"ansible_ssh_common_args": f"-o ProxyJump=root@127.0.0.1:{bastion.port}"},
    )
    bastion.kill()
    done, results = run_cli(tmp_path, inventory)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    reach = by_host(results, "host.reachable")
    for target in TARGETS:
        assert reach[target]["status"] == "FAIL"
        message = reach[target]["message"]
        assert f"jump host root@127.0.0.1:{bastion.port}" in message and "refused" in message, message
    assert not by_host(results, "net.port_range")


@pytest.mark.parametrize(
    ("variable", "value", "named"),
    [
        ("ansible_ssh_common_args", "-o ProxyJump=root@127.0.0.1:22 -o ForwardAgent=yes", "ForwardAgent"),
        ("ansible_ssh_extra_args", "-A", "-A"),
    ],
)
def test_an_option_that_cannot_be_honoured_exits_2_naming_the_variable(
    testbed: TestBed, tmp_path: Path, variable: str, value: str, named: str
) -> None:
    bastion, targets = start(testbed)
    before = [logins(h) for h in (bastion, *targets)]
    inventory = testbed.write_inventory(
        tmp_path / "inv.yaml", hosts=targets, host_vars={"gpu2": {variable: value}}
    )
    done, results = run_cli(tmp_path, inventory)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and variable in lines[0] and named in lines[0] and str(inventory) in lines[0]
    assert results is None and not (tmp_path / "out").exists()
    assert [logins(h) for h in (bastion, *targets)] == before  # no host was touched
