"""Runs inside a real Slurm allocation (tests/support/slurmbed.py): per-host checks through srun steps, a gloo
benchmark as one srun step across the nodes, a hung step cancelled with ``scancel <job>.<step>`` and
named, and Ctrl-C stopping the step — each time with nothing left behind: no step in ``squeue -s``, no
benchmark process on any node, no launch folder.

The nodes are tests/support/hostkit.py's 8x H100 hosts (their tools print real captured outputs), one with an
InfiniBand port Down; they have no GPUs, so ``bench_backend=gloo`` runs real torchrun ranks on the CPUs.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from diagnose.benchmarks.stage import BenchContext, run_benchmark_stage
from diagnose.connectors import connect
from diagnose.core.hosts import Host
from diagnose.core.model import CheckResult
from diagnose.core.vars import Vars
from diagnose.launchers.remote import remote_dir
from tests.support.hostkit import PROFILE, healthy_h100, memlock_vars, port_down
from tests.support.paths import REPO
from tests.support.slurmbed import SlurmBed, slurm_bed

pytestmark = pytest.mark.integration

PLAYBOOK = """\
name: slurm-acceptance
description: every check through srun steps, then a tiny gloo sweep as one srun step
checks: ["*"]
benchmarks:
  enabled: true
  collectives: [all_reduce, all_gather]
  min_bytes: 4K
  max_bytes: 256K
  step_factor: 4
  warmup_iters: 1
  iters: 3
  straggler_isolation: false
"""
# Long enough that a freeze or Ctrl-C after the first row catches the sweep in the middle.
LONG_PLAN = SimpleNamespace(
    enabled=True,
    workload="fsdp",
    collectives=("all_reduce", "all_gather"),
    min_bytes=4 << 10,
    max_bytes=64 << 20,
    step_factor=2,
    warmup_iters=1,
    iters=5,
    tool="torch",
    straggler_isolation=False,
    timeout_s=15,
)
LONG_PLAYBOOK = PLAYBOOK.replace("max_bytes: 256K", "max_bytes: 64M").replace(
    "step_factor: 4", "step_factor: 2"
)


@pytest.fixture
def bed(tmp_path: Path) -> Iterator[SlurmBed]:
    with slurm_bed(tmp_path / "slurm", [healthy_h100("n1"), healthy_h100("n2"), port_down("n3")]) as started:
        started.env["PYTHONPATH"] = str(REPO)
        yield started


def allocate(bed: SlurmBed, nodes: str) -> str:
    """A job holding ``nodes`` exclusively, with no shell in it (``salloc --no-shell``): its id."""
    done = bed.run(["salloc", "--no-shell", "--exclusive", "-N", str(len(nodes.split(","))), "-w", nodes])
    match = re.search(r"Granted job allocation (\d+)", done.stderr)
    assert match, done.stderr
    return match.group(1)


def steps_of(bed: SlurmBed, job: str) -> list[str]:
    """The steps ``squeue -s`` lists for ``job`` (an allocation made with --no-shell has none of its own)."""
    listed = bed.run(["squeue", "-h", "-s", "-j", job, "-o", "%i %j"]).stdout
    return [line for line in listed.splitlines() if line.strip()]


def launch_processes(run_id: str) -> list[int]:
    """Pids of processes anywhere on this machine (every node's namespace included) carrying a launch
    token of run ``run_id``: torchrun agents, ranks, task shells."""
    mark = f"DIAGNOSE_BENCH_TOKEN={run_id}-".encode()
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                environ = Path(f"/proc/{entry.name}/environ").read_bytes()
            except OSError:
                continue
            if any(item.startswith(mark) for item in environ.split(b"\0")):
                found.append(int(entry.name))
    return found


def allocation_env(bed: SlurmBed, job: str, nodes: str) -> dict[str, str]:
    """What a process inside job ``job`` sees (salloc's shell), for a diagnose started beside it."""
    return {**bed.env, "SLURM_JOB_ID": job, "SLURM_JOB_NODELIST": nodes, "SLURM_CLUSTER_NAME": "bed"}


def test_checks_and_gloo_benchmark_through_srun_in_an_allocation(bed: SlurmBed, tmp_path: Path) -> None:
    playbook = tmp_path / "slurm-acceptance.yaml"
    playbook.write_text(PLAYBOOK)
    out = tmp_path / "out"
    argv = [
        sys.executable,
        "-m",
        "diagnose.cli",
        "run",
        "--slurm",
        "--playbook",
        str(playbook),
        "--out",
        str(out),
    ]
    argv += [
        "--format",
        "json",
        "-e",
        f"diagnose_profile={PROFILE}",
        "-e",
        "bench_backend=gloo",
        *memlock_vars(),
    ]
    done = bed.run(["salloc", "-N3", "--exclusive", *argv], timeout=400)
    assert done.returncode == 1, done.stderr  # n3's port is Down
    results = json.loads((out / "results.json").read_text())
    run = results["run"]
    assert run["inventory"] == "slurm" and run["slurm_job"] and run["cluster"] == "bed"
    assert [h["name"] for h in results["hosts"]] == ["n1", "n2", "n3"]
    checks = {(c["id"], c["host"]): c for c in results["checks"]}
    for node in ("n1", "n2", "n3"):
        assert checks[("host.reachable", node)]["status"] == "PASS"
        assert (out / "raw" / node / "ibstat.txt").exists(), "evidence came back through srun"
    assert (
        checks[("ib.port_state", "n3")]["status"] == "FAIL"
        and "mlx5_9" in checks[("ib.port_state", "n3")]["message"]
    )
    assert {checks[("ib.port_state", n)]["status"] for n in ("n1", "n2")} == {"PASS"}
    for entry in results["benchmarks"]:
        assert entry["status"] == "PASS", entry["message"]
        assert entry["backend"] == "gloo" and entry["hosts"] == ["n1", "n2", "n3"] and entry["ranks"] == 3
        assert len(entry["rows"]) == 4 and all(r["wrong"] == 0 for r in entry["rows"])
    assert (out / "raw" / "n1" / "bench.out.txt").read_text().startswith('{"event": "start"')
    assert json.loads((out / "raw" / "n2" / "bench.out.txt").read_text() or "null") is None, "rank 0 reports"
    assert bed.run(["squeue", "-h", "-s"]).stdout.strip() == "", "no step is left"
    assert launch_processes(run["id"]) == []
    assert not list(Path("/tmp").glob(f"diagnose-{run['id']}-*"))


def is_rank(cmdline: bytes) -> bool:
    """A benchmark rank (program.py under Python), not the torchrun agent that started it."""
    return b"program.py" in cmdline and b"torch.distributed.run" not in cmdline


def srun_hosts(job: str, names: list[str]) -> list[Host]:
    values = {
        "ansible_connection": "srun",
        "bench_launcher": "srun",
        "slurm_job_id": job,
        "ansible_python_interpreter": sys.executable,
        "bench_startup_timeout_s": 120,
    }
    return [Host(name, vars=Vars(values, name)) for name in names]


def test_a_hung_step_is_cancelled_and_named_with_nothing_left(
    bed: SlurmBed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """n2's ranks freeze after the first row: the collective hangs on n1 too; diagnose cancels the step."""
    for key in ("SLURM_CONF", "PATH", "PYTHONPATH"):
        monkeypatch.setenv(key, bed.env[key])
    job = allocate(bed, "n1,n2")
    hosts = srun_hosts(job, ["n1", "n2"])
    connections = {}
    for host in hosts:
        connections[host.name] = connect(host)
        connections[host.name].open()
    checks: list[CheckResult] = []
    benchmarks: list[dict] = []
    run_id = f"it-slurm-hang-{secrets.token_hex(3)}"
    context = BenchContext(
        hosts, connections, {}, LONG_PLAN, tmp_path / "out", run_id, checks.append, benchmarks.append
    )
    stage = threading.Thread(target=run_benchmark_stage, args=(context,))
    stage.start()
    progress = Path(remote_dir(run_id, "main", 0)) / "results.jsonl"
    deadline = time.monotonic() + 180
    while not (progress.exists() and '"row"' in progress.read_text()):
        assert time.monotonic() < deadline, "the benchmark never produced a row"
        time.sleep(0.2)
    ranks = [p for p in launch_processes(run_id) if is_rank(Path(f"/proc/{p}/cmdline").read_bytes())]
    assert len(ranks) == 2, ranks
    second = Path(remote_dir(run_id, "main", 1))  # node rank 1: n2
    frozen = [p for p in ranks if Path(f"/proc/{p}/cwd").resolve() == second]
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    stage.join(timeout=240)
    assert not stage.is_alive(), "the stage returned"
    entry = next(b for b in benchmarks if b["collective"] == "all_reduce")
    assert entry["status"] == "ERROR" and entry["rows"], entry["message"]
    assert "did not finish within 15 s (the collective hung)" in entry["message"]
    step = re.search(rf"Slurm step ({job}\.\d+) cancelled", entry["message"])
    assert step, entry["message"]
    assert (tmp_path / "out" / "raw" / "n1" / "bench.srun.txt").read_text().count("srun: error:") >= 1
    assert steps_of(bed, job) == [], "squeue -s lists no step of the job"
    assert launch_processes(run_id) == []
    assert not list(Path("/tmp").glob(f"diagnose-{run_id}-*"))
    bed.run(["scancel", job])


def test_a_task_that_fails_names_its_node_not_the_ones_slurm_killed_after_it(
    bed: SlurmBed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """n2 has no such Python: its task exits 127, the step kills n1's task; only n2 is to blame."""
    for key in ("SLURM_CONF", "PATH", "PYTHONPATH"):
        monkeypatch.setenv(key, bed.env[key])
    job = allocate(bed, "n1,n2")
    n1, n2 = srun_hosts(job, ["n1", "n2"])
    n2.vars = n2.vars.with_values(bench_python="/nonexistent/python3")
    connections = {}
    for host in (n1, n2):
        connections[host.name] = connect(host)
        connections[host.name].open()
    checks: list[CheckResult] = []
    benchmarks: list[dict] = []
    run_id = f"it-slurm-fail-{secrets.token_hex(3)}"
    out = tmp_path / "out"
    context = BenchContext(
        [n1, n2], connections, {}, LONG_PLAN, out, run_id, checks.append, benchmarks.append
    )
    run_benchmark_stage(context)
    entry = benchmarks[0]
    assert entry["status"] == "ERROR" and entry["failed_hosts"] == ["n2"], entry["message"]
    assert "the benchmark failed on n2: n2: " in entry["message"]
    assert "/nonexistent/python3: not found" in entry["message"]
    assert "Exited with exit code 127" in (out / "raw" / "n1" / "bench.srun.txt").read_text()
    assert steps_of(bed, job) == [] and launch_processes(run_id) == []
    bed.run(["scancel", job])


def test_ctrl_c_stops_the_step_on_every_node(bed: SlurmBed, tmp_path: Path) -> None:
    job = allocate(bed, "n1,n2")
    playbook = tmp_path / "long.yaml"
    playbook.write_text(LONG_PLAYBOOK)
    out = tmp_path / "out"
    argv = [
        sys.executable,
        "-m",
        "diagnose.cli",
        "run",
        "--slurm",
        "--playbook",
        str(playbook),
        "--out",
        str(out),
    ]
    argv += [
        "--format",
        "json",
        "-e",
        f"diagnose_profile={PROFILE}",
        "-e",
        "bench_backend=gloo",
        *memlock_vars(),
    ]
    proc = subprocess.Popen(
        argv,
        env=allocation_env(bed, job, "n[1-2]"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 240
    run_id = None
    while run_id is None or not any(
        '"row"' in p.read_text() for p in Path("/tmp").glob(f"diagnose-{run_id}-main-n0/results.jsonl")
    ):
        assert time.monotonic() < deadline and proc.poll() is None, (
            proc.stderr.read() if proc.poll() else "no row"
        )
        if run_id is None and (out / "results.json").exists():
            run_id = json.loads((out / "results.json").read_text())["run"]["id"]
        time.sleep(0.2)
    assert steps_of(bed, job), "the benchmark step runs"
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "everything started on the hosts was stopped" in stderr
    assert steps_of(bed, job) == [], "no step of the job is left"
    assert launch_processes(run_id) == []
    assert not list(Path("/tmp").glob(f"diagnose-{run_id}-*"))
    assert json.loads((out / "results.json").read_text())["run"]["interrupted"] is True
    bed.run(["scancel", job])
