"""`--list-hosts` and `--check`: what a run would do, without touching a host (the hosts here do not exist)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import diagnose

pytestmark = pytest.mark.e2e

PROD = """\
[gpu]
node[01:04]

[gpu:vars]
ansible_user=svc-diag
diagnose_profile=h100-8x-ndr400
"""
# A second source, as `-i prod.ini -i site.yaml`: one more host, and a host variable for node02.
SITE = """\
all:
  children:
    storage:
      hosts:
        store01: {ansible_host: 192.0.2.50, diagnose_profile: cpu-testbed}
    gpu:
      hosts:
        node02: {ansible_port: 2222}
"""


def inventories(tmp_path: Path) -> list[str]:
    (tmp_path / "prod.ini").write_text(PROD)
    (tmp_path / "site.yaml").write_text(SITE)
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / "node03.yml").write_text("ansible_host: 198.51.100.3\napi_token: hunter2\n")
    return ["-i", str(tmp_path / "prod.ini"), "-i", str(tmp_path / "site.yaml")]


def test_list_hosts_merges_sources_and_host_vars_and_touches_nothing(tmp_path: Path) -> None:
    done = diagnose(
        "run", *inventories(tmp_path), "--list-hosts", "--limit", "gpu[1:2]:store01", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "hosts (3):"
    assert "ssh svc-diag@node02:2222" in lines[1]
    assert "ssh svc-diag@198.51.100.3" in lines[2], "host_vars/ beside the inventory wins over the range"
    assert "store01" in lines[3] and "groups=storage" in lines[3]
    assert not (tmp_path / "diagnose-runs").exists()


def test_check_shows_merged_variables_profile_and_commands(tmp_path: Path) -> None:
    done = diagnose("run", *inventories(tmp_path), "--check", "--limit", "node03:store01", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "node03: profile h100-8x-ndr400" in out and "store01: profile cpu-testbed" in out
    assert "expected_link_rate_gbps = 400" in out and "ansible_host = 198.51.100.3" in out
    assert "hunter2" not in out and "api_token" not in out, "site secrets are neither shown nor relevant"
    assert "[ibstat] ibstat" in out and "[port_range] cat /proc/sys/net/ipv4/ip_local_port_range" in out
    assert "benchmarks: all_reduce (torch)" in out
    assert not (tmp_path / "diagnose-runs").exists()
