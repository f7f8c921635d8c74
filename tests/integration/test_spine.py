"""The spine end to end over real sshd hosts: fan-out, unreachable hosts, keys, hangs, Ctrl-C, bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from diagnose.cli import main
from tests.support.paths import REPO
from tests.support.testbed import HostSpec, Reply, TestBed, TestHost

pytestmark = pytest.mark.integration

SPINE_PLAYBOOK = (
    "name: spine\ndescription: reachability and ports only\nchecks: [host.reachable, net.port_range]\n"
)
HANG = {"uname": Reply(hang=True)}


def spine_playbook(tmp_path: Path) -> Path:
    path = tmp_path / "spine.yaml"
    path.write_text(SPINE_PLAYBOOK)
    return path


def run(tmp_path: Path, inventory: Path, *extra: str, folder: str = "out") -> tuple[int, dict]:
    """``folder``: a second run of a test takes its own (a folder holding a run takes no other)."""
    out = tmp_path / folder
    code = main(
        [
            "run",
            "-i",
            str(inventory),
            "--playbook",
            str(spine_playbook(tmp_path)),
            "-o",
            str(out),
            "--format",
            "json",
            *list(extra),
        ]
    )
    return code, json.loads((out / "results.json").read_text())


def by_host(results: dict, check_id: str) -> dict[str, dict]:
    return {c["host"]: c for c in results["checks"] if c["id"] == check_id}


def test_fan_out_judges_every_host_and_keeps_evidence(testbed: TestBed, tmp_path: Path) -> None:
    testbed.add_many(
        [
            HostSpec("node1"),
            HostSpec("node2"),
            HostSpec("node3", port_range="60000\t60100\n"),
            HostSpec("node4"),
        ]
    )
    code, results = run(tmp_path, testbed.write_inventory(tmp_path / "inv.yaml"), "-f", "4")
    assert code == 1 and results["verdict"] == "FAIL"
    assert {h: c["status"] for h, c in by_host(results, "host.reachable").items()} == dict.fromkeys(
        ["node1", "node2", "node3", "node4"], "PASS"
    )
    ports = by_host(results, "net.port_range")
    assert ports["node3"]["status"] == "FAIL" and "60000-60100" in ports["node3"]["observed"]
    assert all(ports[h]["status"] == "PASS" for h in ("node1", "node2", "node4"))
    evidence = tmp_path / "out" / ports["node3"]["evidence"]
    assert evidence.read_text().split() == ["60000", "60100"]
    assert results["run"]["finished"] and results["schema"] == 1


def test_unreachable_and_silent_hosts_fail_reachability_and_the_rest_is_judged(
    testbed: TestBed, tmp_path: Path
) -> None:
    testbed.add_many(
        [HostSpec("good"), HostSpec("refused", serve="refused"), HostSpec("silent", serve="silent")]
    )
    inventory = testbed.write_inventory(tmp_path / "inv.yaml", extra_vars={"diagnose_connect_timeout": 3})
    started = time.monotonic()
    code, results = run(tmp_path, inventory)
    assert time.monotonic() - started < 30
    reach = by_host(results, "host.reachable")
    assert reach["good"]["status"] == "PASS"
    assert reach["refused"]["status"] == "FAIL" and "refused" in reach["refused"]["message"]
    assert reach["silent"]["status"] == "FAIL" and "timed out" in reach["silent"]["message"].lower()
    assert by_host(results, "net.port_range")["good"]["status"] == "PASS"
    assert set(by_host(results, "net.port_range")) == {"good"}
    hosts = {h["name"]: h for h in results["hosts"]}
    assert hosts["refused"]["reachable"] is False and hosts["refused"]["error"]
    assert code == 1


def test_wrong_key_is_an_authentication_failure(testbed: TestBed, tmp_path: Path) -> None:
    testbed.add_many([HostSpec("ok"), HostSpec("locked", authorized=False)])
    _, results = run(tmp_path, testbed.write_inventory(tmp_path / "inv.yaml"))
    reach = by_host(results, "host.reachable")
    assert reach["ok"]["status"] == "PASS"
    assert reach["locked"]["status"] == "FAIL" and "authentication failed" in reach["locked"]["message"]


def test_changed_host_key_is_refused_even_when_unknown_keys_are_accepted(
    testbed: TestBed, tmp_path: Path
) -> None:
    hosts = testbed.add_many([HostSpec("steady"), HostSpec("reinstalled")])
    old_key = fingerprint(hosts[1])
    hosts[1].change_host_key()
    inventory = testbed.write_inventory(tmp_path / "inv.yaml")
    for extra in ([], ["--accept-unknown-host-keys"]):
        _, results = run(tmp_path, inventory, *extra)
        reach = by_host(results, "host.reachable")
        assert reach["steady"]["status"] == "PASS"
        assert reach["reinstalled"]["status"] == "FAIL" and "CHANGED" in reach["reinstalled"]["message"]
        # Both keys as ssh-keygen -l prints them, so the operator can compare with what the host shows.
        assert f"sent ED25519 {fingerprint(hosts[1])}" in reach["reinstalled"]["message"]
        assert f"known_hosts has ED25519 {old_key}" in reach["reinstalled"]["message"]
        assert "ssh_host_ed25519_key.pub" in reach["reinstalled"]["message"]


def fingerprint(host: TestHost) -> str:
    """``SHA256:...`` of the host's key file, as OpenSSH's own ssh-keygen prints it."""
    key = host.dir / "ssh_host_ed25519_key.pub"
    printed = subprocess.run(["ssh-keygen", "-lf", str(key)], capture_output=True, text=True, check=True)
    return printed.stdout.split()[1]


def test_unknown_host_key_needs_explicit_acceptance(testbed: TestBed, tmp_path: Path) -> None:
    testbed.add(HostSpec("newcomer"))
    inventory = testbed.write_inventory(
        tmp_path / "inv.yaml", extra_vars={"diagnose_known_hosts_file": "/dev/null"}
    )
    _, results = run(tmp_path, inventory)
    refused = by_host(results, "host.reachable")["newcomer"]
    assert refused["status"] == "FAIL" and "known_hosts" in refused["message"]
    _, results = run(tmp_path, inventory, "--accept-unknown-host-keys", folder="accepted")
    assert by_host(results, "host.reachable")["newcomer"]["status"] == "PASS"


def test_a_hanging_command_is_an_error_of_its_check_and_the_run_goes_on(
    testbed: TestBed, tmp_path: Path
) -> None:
    testbed.add_many([HostSpec("fine"), HostSpec("stuck", tools=HANG)])
    inventory = testbed.write_inventory(tmp_path / "inv.yaml", extra_vars={"command_timeout_s": 2})
    started = time.monotonic()
    _, results = run(tmp_path, inventory)
    assert time.monotonic() - started < 30
    reach = by_host(results, "host.reachable")
    assert reach["stuck"]["status"] == "ERROR" and "timed out" in reach["stuck"]["message"]
    assert by_host(results, "net.port_range")["stuck"]["status"] == "PASS"
    assert reach["fine"]["status"] == "PASS"


def test_ctrl_c_keeps_what_was_measured_and_exits_130(testbed: TestBed, tmp_path: Path) -> None:
    testbed.add_many([HostSpec("quick"), HostSpec("slow", serve="silent")])
    inventory = testbed.write_inventory(tmp_path / "inv.yaml", extra_vars={"diagnose_connect_timeout": 120})
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "diagnose.cli", "run", "-i", str(inventory), "--playbook"]
    argv += [str(spine_playbook(tmp_path)), "-o", str(out), "--format", "json"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        results_path = out / "results.json"
        if results_path.exists() and any(
            c["host"] == "quick" and c["id"] == "net.port_range"
            for c in json.loads(results_path.read_text())["checks"]
        ):
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 130, stderr
    results = json.loads((out / "results.json").read_text())
    assert results["run"].get("interrupted") is True
    assert by_host(results, "net.port_range")["quick"]["status"] == "PASS"
    assert "interrupted" in stderr


def test_malformed_inventory_exits_2_naming_file_and_line_before_any_host(tmp_path: Path) -> None:
    inventory = tmp_path / "broken.yaml"
    inventory.write_text("all:\n  hosts:\n    node1:\n      ansible_port: [1, 2\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "diagnose.cli", "run", "-i", str(inventory), "-o", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{inventory}:" in lines[0]
    assert not (tmp_path / "out").exists()


def test_checks_lists_the_catalog(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["checks"]) == 0
    listing = capsys.readouterr().out
    assert "host.reachable" in listing and "net.port_range" in listing


def test_ssh_config_supplies_address_port_user_and_key(testbed: TestBed, tmp_path: Path) -> None:
    """Two aliases of one host that differ only in their User line: root logs in, a user the host does not
    have is refused, so the line is read (the bed's user and the default one are both root)."""
    host = testbed.add(HostSpec("real-name"))
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text(
        "".join(
            f"Host {alias}\n  HostName {host.address}\n  Port {host.port}\n  User {user}\n"
            f"  IdentityFile {testbed.client_key}\n  UserKnownHostsFile {testbed.known_hosts}\n"
            for alias, user in (("gpu-alias", "root"), ("stranger-alias", "diagnose-no-such-user"))
        )
    )
    inventory = tmp_path / "inv.ini"
    inventory.write_text("[gpu]\ngpu-alias\nstranger-alias\n")
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "diagnose.cli", "run", "-i", str(inventory), "--playbook"]
    argv += [str(spine_playbook(tmp_path)), "-o", str(out), "--format", "json"]
    done = subprocess.run(
        argv, capture_output=True, text=True, env={**os.environ, "HOME": str(home)}, timeout=120
    )
    results = json.loads((out / "results.json").read_text())
    reach = by_host(results, "host.reachable")
    assert reach["gpu-alias"]["status"] == "PASS", done.stderr
    assert reach["stranger-alias"]["status"] == "FAIL", reach["stranger-alias"]
    assert "authentication failed" in reach["stranger-alias"]["message"]
