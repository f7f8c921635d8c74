"""`--list-hosts` and `--check`: what a run would do, without touching a host (the hosts here do not exist)."""

from __future__ import annotations

import re
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
    assert "benchmark sweep: all_reduce with torch" in out
    assert not (tmp_path / "diagnose-runs").exists()


# Two hardware generations and a group without a profile, every extra after the sweep switched on.
FLEET = """\
[h100]
gpu[01:12]

[h100:vars]
ansible_user=ops
diagnose_profile=h100-8x-ndr400

[a100]
old[1:3]

[a100:vars]
ansible_user=ops
diagnose_profile=a100-8x-hdr200

[spare]
spare1
"""
FULL = """\
name: full
benchmarks:
  collectives: [all_reduce, all_gather]
  min_bytes: 1M
  max_bytes: 1G
  step_factor: 4
  warmup_iters: 5
  iters: 20
  fleet_probes: true
  training_probe: true
  kv_transfer: true
  perftest: true
  perftest_latency: true
  stress: true
"""


def test_check_shows_the_whole_plan_grouped_with_an_estimate(tmp_path: Path) -> None:
    (tmp_path / "fleet.ini").write_text(FLEET)
    (tmp_path / "full.yaml").write_text(FULL)
    done = diagnose(
        "run", "-i", str(tmp_path / "fleet.ini"), "--playbook", str(tmp_path / "full.yaml"), "--check",
        "-e", "burnin_minutes=10", "-e", "train_probe_bucket_caps=25,100", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout
    # one block per distinct set of variables, hosts folded; the host without a profile is told what that means
    assert "variables: 3 distinct sets" in out
    assert "\ngpu[01-12] (12 hosts): profile h100-8x-ndr400\n" in out
    assert "\nold[1-3] (3 hosts): profile a100-8x-hdr200\n" in out
    assert "\nspare1: profile none\n  (no profile: expected values absent" in out
    assert out.count("expected_link_rate_gbps = 400") == 1, "a shared value is shown once per group"
    # one batch of commands per distinct set: the profiles ask the same commands of every host here
    assert out.count("in one batch, each under its own timeout") == 1
    assert "commands on gpu[01-12], old[1-3], spare1 (16 hosts)" in out
    assert "[ibstat] ibstat  (timeout " in out
    # the sweep and every extra that is on, with their settings
    assert "benchmark sweep: all_reduce, all_gather with torch" in out
    assert "  sizes: 1 MiB to 1 GiB, ×4 (6 sizes)" in out
    assert "  iterations: 5 warm-up + 20 timed per size" in out
    assert "  ranks: 16 hosts × 8 = 128" in out
    assert "  localization: if a collective is short" in out and "localization would not run" not in out
    extras = out.split("after the sweep:")[1].split("\n\n")[0]
    for key in ("fleet_probes", "training_probe", "kv_transfer", "perftest", "stress"):
        assert f"\n  {key}: " in extras, key
    assert (
        "DDP bucket sizes 25, 100 MB; 480 M params, 5 steps on GPU" in extras and "burn-in 10 min" in extras
    )
    assert "8 pairs a round over 8 rails" in extras and "latency (ib_write_lat) too" in extras
    assert "off:" not in extras
    # values as YAML writes them: no Python None/False/True in the variables or the stress line
    shown = out.split("\ncommands on")[0] + extras
    assert not re.search(r"= (None|False|True)$|_pct None", shown, re.M), shown
    # the estimate: every stage in run order, and a total of the right order of magnitude
    estimate = out.split("estimated duration (an estimate")[1].split("\n\n")[0]  # the table, not the history
    stages = [line.split("  ")[1] for line in estimate.splitlines()[2:]]
    order = ["host stage", "collective sweep", "localization", "fleet probes", "training probe",
             "KV transfer", "perftest", "GPU stress", "reports", "total"]  # fmt: skip
    assert [s.strip() for s in stages] == order, estimate
    total = next(line for line in estimate.splitlines() if line.strip().startswith("total"))
    minutes = int(total.split("~")[1].split(" min")[0])
    assert 12 <= minutes <= 30, total  # the 10-minute burn-in, perftest's 2+ minutes, the rest
    assert not (tmp_path / "diagnose-runs").exists()


def test_check_names_what_is_off(tmp_path: Path) -> None:
    (tmp_path / "fleet.ini").write_text(FLEET)
    done = diagnose("run", "-i", str(tmp_path / "fleet.ini"), "--check", "--limit", "old1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "\nold1: profile a100-8x-hdr200\n" in done.stdout
    assert "  localization: off (needs more than 2 hosts)" in done.stdout
    assert "  perftest: SKIP: a NIC is measured against a partner on another host" in done.stdout
    estimate = done.stdout.split("estimated duration")[1]
    assert "\n  perftest " not in estimate, "a stage that SKIPs costs no time"
    assert "\n  localization " not in estimate


def test_check_says_the_search_would_not_run_with_one_rendezvous_address_for_every_host(
    tmp_path: Path,
) -> None:
    (tmp_path / "fleet.ini").write_text(FLEET)
    (tmp_path / "full.yaml").write_text(FULL)
    done = diagnose(
        "run", "-i", str(tmp_path / "fleet.ini"), "--playbook", str(tmp_path / "full.yaml"), "--check",
        "-e", "bench_master_addr=10.0.0.1", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (
        "  localization would not run: bench_master_addr is one value (10.0.0.1) for gpu01, gpu02, gpu03, "
        "gpu04 and 12 more; the search's pair tests are led by other hosts than the first" in done.stdout
    )
