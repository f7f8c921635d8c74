"""The Slurm test bed itself (tests/support/slurmbed.py): real slurmctld/slurmd/munged on loopback, node names as
hostnames, each node's own tools, admin drains visible, and nothing left running after stop."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.hostkit import healthy_h100, port_down
from tests.support.slurmbed import SlurmBed, slurm_bed

pytestmark = pytest.mark.integration


@pytest.fixture
def bed(tmp_path: Path) -> Iterator[SlurmBed]:
    with slurm_bed(tmp_path / "slurm", [healthy_h100("n1"), healthy_h100("n2"), "n3"]) as started:
        yield started


def test_nodes_idle_and_jobs_run_under_node_names(bed: SlurmBed) -> None:
    listed = bed.run(["sinfo", "-h", "-N", "-o", "%N %t"], check=True).stdout.split("\n")
    assert sorted(line for line in listed if line) == ["n1 idle", "n2 idle", "n3 idle"]
    step = bed.run(["srun", "-N3", "-t", "1", "hostname"], check=True)
    assert sorted(step.stdout.split()) == ["n1", "n2", "n3"]
    hosts = bed.srun("n2", ["getent", "hosts", "n3"])
    assert hosts.stdout.split()[0] == "127.0.0.1"


def test_a_job_sees_its_node_tools_and_a_planted_fault(bed: SlurmBed) -> None:
    count_down = [
        "sh",
        "-c",
        "ibstat | grep -c 'State: Down'; cat /sys/class/infiniband/mlx5_9/ports/1/state",
    ]
    assert bed.srun("n2", count_down).stdout.split("\n")[:2] == ["0", "4: ACTIVE"]
    bed.plant("n2", port_down("n2"))
    assert bed.srun("n2", count_down).stdout.split("\n")[:2] == ["1", "1: DOWN"]
    assert bed.srun("n1", count_down).stdout.split("\n")[:2] == ["0", "4: ACTIVE"]
    # n3 is a bare node: no tools of its own, no /dev/infiniband.
    assert bed.srun("n3", ["sh", "-c", "ls /dev/infiniband || echo none"]).stdout.strip().endswith("none")


def test_admin_drain_and_resume(bed: SlurmBed) -> None:
    bed.drain("n3", "admin: fan replaced; ticket 42")
    fields = bed.node("n3")
    assert fields["State"] == "IDLE+DRAIN"
    assert fields["Reason"] == "admin: fan replaced; ticket 42"
    bed.resume("n3")
    bed.wait_for_node("n3", lambda f: f["State"].startswith("IDLE") and "DRAIN" not in f["State"])


def test_stop_ends_every_daemon_and_job(tmp_path: Path) -> None:
    with slurm_bed(tmp_path / "slurm", ["n1", "n2"]) as bed:
        job = bed.run(["sbatch", "-w", "n2", "-o", "/dev/null", "--wrap", "sleep 600"], check=True)
        job_id = job.stdout.split()[-1]
        deadline = time.monotonic() + 30
        while bed.run(["squeue", "-h", "-j", job_id, "-o", "%T"]).stdout.strip() != "RUNNING":
            assert time.monotonic() < deadline, "the batch job never started"
            time.sleep(0.1)
        assert len(bed.leftover_pids()) > 4  # munged, slurmctld, two slurmd, the job's sleep ...
    assert bed.leftover_pids() == []
    assert not bed.munge_socket_dir.exists()
