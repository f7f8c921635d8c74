"""Hosts from a real Slurm (tests/support/slurmbed.py): sinfo's nodes with partition, node and state filters,
an allocation's nodes from ``SLURM_JOB_NODELIST``, hostlist expressions expanded by Slurm itself, groups per
partition and an Ansible inventory's variables applied to the nodes by name — through ``diagnose run
--slurm --list-hosts / --check`` as an operator runs it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from diagnose.core.errors import ConfigError
from diagnose.targets.slurm_nodes import SlurmQuery, expand_hostlist, find_nodes
from tests.support.paths import REPO
from tests.support.slurmbed import SlurmBed, slurm_bed

pytestmark = pytest.mark.integration

DIAGNOSE = [sys.executable, "-m", "diagnose.cli", "run"]
ADMIN_REASON = "admin: DIMM swap"


@pytest.fixture
def bed(tmp_path: Path) -> SlurmBed:  # type: ignore[misc]
    """n1-n3 in partition bed; n2 and n3 also in partition gpu; n3 drained by an admin."""
    with slurm_bed(tmp_path / "slurm", ["n1", "n2", "n3"]) as started:
        started.scontrol("create", "PartitionName=gpu", "Nodes=n2,n3", "State=UP", "MaxTime=INFINITE")
        started.drain("n3", ADMIN_REASON)
        started.env["PYTHONPATH"] = str(REPO)
        yield started


@pytest.fixture
def inventory(tmp_path: Path) -> Path:
    """An existing Ansible inventory: a login node that is no Slurm node, per-host and per-partition vars."""
    site = tmp_path / "site"
    (site / "group_vars").mkdir(parents=True)
    (site / "host_vars").mkdir()
    (site / "hosts.yml").write_text(
        "all:\n  vars:\n    diagnose_profile: cpu-testbed\n  hosts:\n    login1:\n    n2:\n      rack: r7\n"
    )
    (site / "group_vars" / "gpu.yml").write_text("bench_gpus_per_host: 4\n")
    (site / "host_vars" / "n1.yml").write_text("ansible_user: ops\n")
    return site / "hosts.yml"


def host_table(stdout: str) -> dict[str, str]:
    """``--list-hosts`` rows by host name."""
    rows = [line.split(None, 1) for line in stdout.splitlines()[1:] if line.startswith("  ")]
    return {name: rest for name, rest in rows}


def test_sinfo_nodes_with_partition_state_and_hostlist_filters(bed: SlurmBed, inventory: Path) -> None:
    listed = bed.run([*DIAGNOSE, "--slurm", "-i", str(inventory), "--list-hosts"])
    assert listed.returncode == 0, listed.stderr
    table = host_table(listed.stdout)
    assert list(table) == ["n1", "n2", "n3"], "login1 lends nothing: it is no Slurm node"
    assert table["n1"].startswith("ssh ops@n1") and "groups=bed" in table["n1"]
    assert "groups=bed,gpu" in table["n2"]

    idle = host_table(bed.run([*DIAGNOSE, "--slurm", "--slurm-state", "idle", "--list-hosts"]).stdout)
    assert list(idle) == ["n1", "n2"], "sinfo lists n3 as idle too, but an admin drained it"
    drained = host_table(bed.run([*DIAGNOSE, "--slurm", "--slurm-state", "drain", "--list-hosts"]).stdout)
    assert list(drained) == ["n3"]

    gpu = bed.run(
        [*DIAGNOSE, "--slurm-partition", "gpu", "--slurm-nodes", "n[2-9]", "-i", str(inventory), "--check"]
    )
    assert gpu.returncode == 0, gpu.stderr
    assert list(host_table(gpu.stdout.split("\n\n")[0])) == ["n2", "n3"]
    group = gpu.stdout.split("\nn[2-3] (2 hosts):")[1].split("\n\n")[0]  # same variables: one block
    assert "bench_gpus_per_host = 4" in group, "group_vars/gpu.yml"
    assert "profile cpu-testbed" in gpu.stdout

    wrong = bed.run([*DIAGNOSE, "--slurm-state", "bogus", "--list-hosts"])
    assert wrong.returncode == 2 and 'sinfo failed: sinfo: error: Bad state string: "bogus"' in wrong.stderr
    nothing = bed.run([*DIAGNOSE, "--slurm-partition", "nope", "--list-hosts"])
    assert nothing.returncode == 2 and "sinfo lists no node for partition nope" in nothing.stderr


def test_allocation_nodes_expand_and_are_reached_by_srun(bed: SlurmBed, inventory: Path) -> None:
    salloc = ["salloc", "-N2", "-w", "n1,n2", "--exclusive"]
    inside = bed.run([*salloc, *DIAGNOSE, "--slurm", "-i", str(inventory), "--list-hosts"], timeout=120)
    assert inside.returncode == 0, inside.stderr
    table = host_table(inside.stdout)
    assert list(table) == ["n1", "n2"]
    assert table["n1"].startswith("srun ") and table["n2"].startswith("srun ")
    narrowed = bed.run([*salloc, *DIAGNOSE, "--slurm-nodes", "n[2-3]", "--list-hosts"], timeout=120)
    assert list(host_table(narrowed.stdout)) == ["n2"], narrowed.stderr
    refused = bed.run([*salloc, *DIAGNOSE, "--slurm-state", "idle", "--list-hosts"], timeout=120)
    assert refused.returncode == 2
    assert "--slurm-state chooses nodes outside an allocation; inside job" in refused.stderr


def test_hostlists_are_expanded_by_slurm(bed: SlurmBed, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("SLURM_CONF", "PATH"):
        monkeypatch.setenv(key, bed.env[key])
    assert expand_hostlist("gpu[001-003,010],cpu7") == ["gpu001", "gpu002", "gpu003", "gpu010", "cpu7"]
    with pytest.raises(ConfigError, match="where a host name was expected"):
        expand_hostlist("n[1-")
    allocation = {**os.environ, "SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n[2-3]"}
    found = find_nodes(SlurmQuery(partitions="gpu"), env=allocation)
    assert found.names == ["n2", "n3"] and found.job_id == "7"
    assert [n.partitions for n in found.nodes] == [("gpu",), ("gpu",)]
    assert found.vars_below("n2") == {
        "slurm_job_id": "7",
        "ansible_connection": "srun",
        "bench_launcher": "srun",
    }
