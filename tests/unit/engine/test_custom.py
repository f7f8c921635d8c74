"""Custom testinfra checks run for real (pytest subprocess, testinfra's local backend) against this machine.

The SSH side is exercised over the sshd test bed in tests/integration/test_check_faults.py; here the
result mapping is pinned down: one result per test × host, assertion messages kept, a module that cannot
be imported reported for every host, and the ssh_config that carries the inventory's connection values.
"""

from __future__ import annotations

from pathlib import Path

from diagnose.core.hosts import Host
from diagnose.core.vars import Vars
from diagnose.engine.custom import run_custom_checks, write_ssh_config
from tests.support.paths import REPO

EXAMPLE = REPO / "checks" / "custom" / "example_sysctl.py"
LOCAL = Host("workstation", vars=Vars({"ansible_connection": "local"}, host="workstation"))


def test_example_module_on_this_machine(tmp_path: Path) -> None:
    results = run_custom_checks([EXAMPLE], [LOCAL], tmp_path)
    by_id = {r.id: r for r in results}
    assert set(by_id) == {
        "custom.example_sysctl::test_ephemeral_port_range",
        "custom.example_sysctl::test_no_transparent_hugepage_always_defrag",
    }
    low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    expected = "PASS" if high - low + 1 >= 28232 else "FAIL"
    port_range = by_id["custom.example_sysctl::test_ephemeral_port_range"]
    assert (port_range.status, port_range.host, port_range.checklist) == (expected, "workstation", "custom")
    assert port_range.evidence == "custom/junit.xml"
    assert (tmp_path / "custom" / "junit.xml").is_file()


def test_failing_assertion_and_class_tests_keep_their_message(tmp_path: Path) -> None:
    module = tmp_path / "site_rules.py"
    module.write_text(
        "def test_hostname_is_known(host):\n"
        "    assert host.run('echo gpu-node-17').stdout.strip() == 'gpu-node-18', 'wrong node answered'\n"
        "\n"
        "class TestKernel:\n"
        "    def test_release_readable(self, host):\n"
        "        assert host.file('/proc/sys/kernel/osrelease').exists\n"
    )
    results = {r.id: r for r in run_custom_checks([module], [LOCAL], tmp_path / "out")}
    failed = results["custom.site_rules::test_hostname_is_known"]
    assert failed.status == "FAIL"
    assert "wrong node answered" in failed.message
    assert results["custom.site_rules::TestKernel::test_release_readable"].status == "PASS"


def test_module_that_cannot_import_is_an_error_for_every_host(tmp_path: Path) -> None:
    module = tmp_path / "broken.py"
    module.write_text("import no_such_module_for_diagnose\n\ndef test_x(host):\n    pass\n")
    other = Host("second", vars=Vars({"ansible_connection": "local"}, host="second"))
    results = run_custom_checks([module], [LOCAL, other], tmp_path / "out")
    assert {(r.id, r.host, r.status) for r in results} == {
        ("custom.broken", "workstation", "ERROR"),
        ("custom.broken", "second", "ERROR"),
    }
    assert all("no_such_module_for_diagnose" in r.message for r in results)


def test_ssh_config_carries_the_inventory_connection(tmp_path: Path) -> None:
    node = Host(
        "node 7",
        vars=Vars(
            {
                "ansible_host": "10.0.0.7",
                "ansible_port": "2222",
                "ansible_user": "ops",
                "ansible_ssh_private_key_file": "/keys/id_ed25519",
                "diagnose_known_hosts_file": "/etc/diagnose/known_hosts",
            },
            host="node 7",
        ),
    )
    relaxed = Host("node8", vars=Vars({"ansible_host_key_checking": "false"}, host="node8"))
    ids = write_ssh_config([node, relaxed, LOCAL], tmp_path / "ssh_config")
    assert ids == {
        "ssh://diagnose-0-node_7": ["node 7"],
        "ssh://diagnose-1-node8": ["node8"],
        "local": ["workstation"],
    }
    text = (tmp_path / "ssh_config").read_text()
    assert "Host diagnose-0-node_7\n  HostName 10.0.0.7\n  BatchMode yes\n  Port 2222\n  User ops\n" in text
    assert '  IdentityFile "/keys/id_ed25519"\n  IdentitiesOnly yes\n' in text
    assert '  UserKnownHostsFile "/etc/diagnose/known_hosts" ~/.ssh/known_hosts\n' in text
    node8 = text.split("Host diagnose-1-node8", 1)[1]
    assert "StrictHostKeyChecking accept-new" in node8
    assert text.count("StrictHostKeyChecking yes") == 1
