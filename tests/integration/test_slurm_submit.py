"""``diagnose run --slurm-submit`` against a real Slurm (tests/support/slurmbed.py): the run is a real batch job on
exclusive nodes, its results.json lands, secrets given with ``-e`` never appear in the batch script Slurm
keeps (nor in the results or the job's output), and ``--slurm-rotate`` sends the next job to the nodes the
series covered longest ago, so two runs of two nodes cover all three.
"""

from __future__ import annotations

import json
import re
import stat
import sys
import time
from pathlib import Path

import pytest

from diagnose.history.coverage import last_covered
from tests.support.paths import REPO
from tests.support.slurmbed import SlurmBed, slurm_bed

pytestmark = pytest.mark.integration

PLAYBOOK = """\
name: slurm-nightly
description: the checks and a tiny gloo sweep on the nodes Slurm gives the job
checks: ["*"]
benchmarks:
  enabled: true
  collectives: [all_reduce]
  min_bytes: 4K
  max_bytes: 64K
  step_factor: 4
  warmup_iters: 1
  iters: 3
  straggler_isolation: false
"""
SECRET = "s3cr3t-do-not-record"
JOB_WAIT_S = 300


def wait_for_job(bed: SlurmBed, job: str) -> None:
    deadline = time.monotonic() + JOB_WAIT_S
    while bed.run(["squeue", "-h", "-j", job]).stdout.strip():
        assert time.monotonic() < deadline, f"job {job} still queued or running"
        time.sleep(1)


def test_submitted_runs_land_their_results_and_rotate_over_the_nodes(tmp_path: Path) -> None:
    playbook = tmp_path / "slurm-nightly.yaml"
    playbook.write_text(PLAYBOOK)
    runs, db = tmp_path / "runs", tmp_path / "state" / "history.sqlite3"
    db.parent.mkdir()  # a --history folder must exist: a mistyped one is refused, never made (docs/nightly.md)
    submit = [
        sys.executable,
        "-m",
        "diagnose.cli",
        "run",
        "--slurm-submit",
        "--slurm-rotate",
        "--slurm-partition",
    ]
    submit += ["bed", "--playbook", str(playbook), "--runs-dir", str(runs), "--history", str(db)]
    submit += ["-e", "diagnose_profile=cpu-testbed", "-e", "bench_backend=gloo", "-e", "slurm_nodes=2"]
    submit += ["-e", "slurm_time=10", "-e", f"api_token={SECRET}", "--format", "json"]
    with slurm_bed(tmp_path / "slurm", ["n1", "n2", "n3"]) as bed:
        bed.env["PYTHONPATH"] = str(REPO)
        unrotated = [arg for arg in submit if arg != "--slurm-rotate"]
        refused = bed.run([*unrotated, "--slurm-state", "idle", "--check"])
        assert refused.returncode == 2 and "--slurm-state narrows --slurm-rotate's nodes" in refused.stderr
        dry = bed.run([*submit, "--check"])
        assert dry.returncode == 0, dry.stderr
        command, script = dry.stdout.split("\n", 1)
        assert command.startswith("$ sbatch --parsable --exclusive --job-name=diagnose-slurm-nightly ")
        for option in ("--partition=bed", "--time=10", "--nodes=2", "--nodelist=n1,n2"):
            assert option in command.split(), command
        assert SECRET not in dry.stdout and '-e @"$s"' in script

        first = bed.run(submit)
        assert first.returncode == 0, first.stderr
        match = re.fullmatch(
            r"diagnose: submitted batch job (\d+) on n1,n2; its output: (\S+)\n", first.stdout
        )
        assert match, first.stdout
        job, output = match.groups()
        kept = bed.run(["scontrol", "write", "batch_script", job, "-"])
        assert kept.returncode == 0 and "diagnose.cli run --slurm" in kept.stdout, kept.stderr
        assert SECRET not in kept.stdout, "the batch script Slurm keeps holds no secret"
        secrets_file = Path(re.search(r"^s=(\S+)$", kept.stdout, re.M).group(1))  # type: ignore[union-attr]
        assert secrets_file.parent == db.parent / "submit"
        assert stat.S_IMODE(secrets_file.parent.stat().st_mode) == 0o700
        wait_for_job(bed, job)
        assert not secrets_file.exists(), "the job removed its secrets file"
        [results_path] = runs.glob("*/results.json")
        results = json.loads(results_path.read_text())
        text = results_path.read_text() + Path(output).read_text()
        assert SECRET not in text
        assert results["verdict"] == "PASS", Path(output).read_text()
        assert results["run"]["slurm_job"] == job and results["run"]["inventory"] == "slurm:partition=bed"
        assert [h["name"] for h in results["hosts"]] == ["n1", "n2"]
        [entry] = results["benchmarks"]
        assert entry["status"] == "PASS" and entry["hosts"] == ["n1", "n2"], entry["message"]
        assert {c["host"] for c in results["checks"] if c["id"] == "host.reachable"} == {"n1", "n2"}

        second = bed.run([*submit, "--skip-benchmarks"])
        assert second.returncode == 0, second.stderr
        assert " on n3,n1;" in second.stdout, "the node never covered first, then the oldest"
        job2 = second.stdout.split()[4]
        wait_for_job(bed, job2)
    covered = last_covered(db, results["run"])
    assert set(covered) == {"n1", "n2", "n3"}, "two runs of two nodes covered the partition"
    assert covered["n1"][1] > covered["n2"][1]
