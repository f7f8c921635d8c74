"""The pure parts of the Slurm paths: hosts from Slurm's nodes with an inventory's variables, the srun
step's task script (run for real under /bin/sh), the batch submission's script and secrets, and node
coverage for the rotation (on a real history database). The Slurm commands themselves run against the
real test bed in tests/integration/test_slurm_*.py.
"""

from __future__ import annotations

import json
import os
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from diagnose.config.host_settings import first_problem
from diagnose.config.playbook import load_playbook
from diagnose.connectors.srun import step_argv
from diagnose.core.errors import ConfigError
from diagnose.core.vars import Vars
from diagnose.engine.run import RunOptions, RunRequest
from diagnose.history import prune, record_run
from diagnose.history.coverage import last_covered, record_coverage, stalest
from diagnose.launchers.srun import RANK, files_archive, srun_argv, task_script
from diagnose.launchers.torchrun_argv import torchrun_args
from diagnose.slurm.submit import batch_script, inner_argv, job_id, plan, split_secrets
from diagnose.targets.loading import InventoryFiles
from diagnose.targets.resolve import resolve_hosts
from diagnose.targets.slurm_nodes import SlurmNode, SlurmNodes, SlurmQuery
from diagnose.targets.sources import HostContext


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def nodes(job: str | None = None) -> SlurmNodes:
    """n1 in partition cpu; n2 and n3 in gpu, n3 also in debug (as sinfo -N lists them)."""
    found = [
        SlurmNode("n1", ("cpu",), "idle"),
        SlurmNode("n2", ("gpu",), "mix"),
        SlurmNode("n3", ("gpu", "debug"), "idle"),
    ]
    return SlurmNodes(SlurmQuery(partitions="cpu,gpu,debug"), found, job_id=job)


# ----------------------------------------------------------------------------------------- hosts from Slurm


def test_query_label_names_the_query_not_the_state_and_sinfo_filters_it() -> None:
    query = SlurmQuery(partitions="gpu", nodes="n[1-4]", states="idle,mixed")
    assert query.label == "slurm:partition=gpu,nodes=n[1-4]"
    assert SlurmQuery().label == "slurm"
    assert query.sinfo_argv() == [
        "sinfo", "-h", "-N", "-o", "%N %P %t", "-p", "gpu", "-n", "n[1-4]", "-t", "idle,mixed",
    ]  # fmt: skip
    assert query.sinfo_argv("n[7-8]")[-2:] == ["-n", "n[7-8]"]  # an allocation's nodes: no state filter
    assert query.described() == "partition gpu, nodes n[1-4], state idle,mixed"


def test_slurm_nodes_are_the_targets_in_partition_groups_without_an_inventory() -> None:
    hosts = resolve_hosts([nodes()], HostContext(load_playbook(None)))
    assert [h.name for h in hosts] == ["n1", "n2", "n3"]
    by_name = {h.name: h for h in hosts}
    assert "gpu" in by_name["n2"].groups and {"gpu", "debug"} <= set(by_name["n3"].groups)
    assert by_name["n1"].connection == "ssh"  # sinfo's nodes are outside any allocation: SSH as usual
    assert "bench_launcher" not in by_name["n1"].vars
    limited = resolve_hosts([nodes()], HostContext(load_playbook(None), "gpu"))
    assert [h.name for h in limited] == ["n2", "n3"]


def test_an_inventory_lends_its_variables_by_name_but_no_hosts(tmp_path: Path) -> None:
    inventory = write(
        tmp_path / "site" / "hosts.yml",
        "all:\n  vars:\n    site: lab\n  children:\n    rack1:\n      hosts:\n        n2:\n          slot: 7\n"
        "        login1:\n",
    )
    write(tmp_path / "site" / "group_vars" / "gpu.yml", "diagnose_profile: h100-8x-ndr400\n")
    write(tmp_path / "site" / "group_vars" / "rack1.yml", "rack: one\n")
    write(tmp_path / "site" / "host_vars" / "n3.yml", "ansible_host: 10.0.0.3\n")
    hosts = {
        h.name: h
        for h in resolve_hosts([InventoryFiles([inventory]), nodes()], HostContext(load_playbook(None)))
    }
    assert list(hosts) == ["n1", "n2", "n3"], "login1 is an inventory host, not a Slurm node"
    assert {h.vars["site"] for h in hosts.values()} == {"lab"}
    assert (
        hosts["n2"].vars["slot"] == 7 and hosts["n2"].vars["rack"] == "one" and "rack1" in hosts["n2"].groups
    )
    assert hosts["n3"].address == "10.0.0.3"
    assert hosts["n2"].vars["expected_gpu_count"] == 8, "group_vars/<partition> chose the profile"
    assert hosts["n1"].vars["diagnose_profile"] is None
    with pytest.raises(ConfigError, match="matched no Slurm node"):
        resolve_hosts([InventoryFiles([inventory]), nodes()], HostContext(load_playbook(None), "login1"))


def test_a_variables_only_inventory_is_enough_beside_slurm(tmp_path: Path) -> None:
    inventory = write(tmp_path / "vars.yml", "all:\n  vars:\n    site: lab\n")
    hosts = resolve_hosts([InventoryFiles([inventory]), nodes()], HostContext(load_playbook(None)))
    assert [h.vars["site"] for h in hosts] == ["lab"] * 3


def test_allocation_nodes_default_to_srun_below_every_inventory_level(tmp_path: Path) -> None:
    inventory = write(tmp_path / "hosts.yml", "all:\n  hosts:\n    n3:\n      ansible_connection: ssh\n")
    hosts = {
        h.name: h
        for h in resolve_hosts(
            [InventoryFiles([inventory]), nodes(job="42")], HostContext(load_playbook(None))
        )
    }
    assert hosts["n1"].connection == "srun" and hosts["n1"].vars["bench_launcher"] == "srun"
    assert hosts["n1"].vars["slurm_job_id"] == "42"
    assert hosts["n3"].connection == "ssh", "the inventory's own choice wins"
    forced = resolve_hosts(
        [nodes("42")], HostContext(load_playbook(None), None, {"bench_launcher": "torchrun"})
    )
    assert {h.vars["bench_launcher"] for h in forced} == {"torchrun"}


@pytest.mark.parametrize(
    ("values", "problem"),
    [
        ({"ansible_connection": "srun"}, None),
        ({"bench_launcher": "srun"}, None),
        ({"bench_launcher": "ssh"}, "bench_launcher='ssh' is not supported"),
        ({"slurm_time": "1-02:00:00"}, None),
        ({"slurm_time": "30"}, None),
        ({"slurm_time": "2h"}, "slurm_time must be a Slurm time limit"),
        ({"slurm_nodes": "0"}, "slurm_nodes must be at least 1"),
        ({"slurm_partition": "gpu;rm"}, "slurm_partition must be a Slurm partition name"),
        ({"slurm_account": "--uid=0"}, "slurm_account must be a Slurm account name"),
        ({"slurm_job_id": "12.3"}, "slurm_job_id must be a Slurm job id"),
        ({"slurm_step_nodes": "512"}, None),
        ({"slurm_step_nodes": "0"}, "slurm_step_nodes must be at least 1"),
        ({"slurm_step_checks": "no"}, None),
        ({"slurm_step_checks": "sometimes"}, "variable slurm_step_checks for host n1 must be true or false"),
    ],
)
def test_slurm_settings_are_checked_before_any_host_is_touched(values: dict, problem: str | None) -> None:
    found = first_problem(Vars(values, host="n1"))
    assert (found is None) if problem is None else (found is not None and problem in found[1])


def test_a_host_reached_by_srun_needs_a_name_srun_reads_as_one_node() -> None:
    """The name goes into --nodelist, where ``gpu[1-4]`` or ``a,b`` would name other nodes."""
    for name in ("gpu[1-4]", "a,b"):
        found = first_problem(Vars({"ansible_connection": "srun"}, host=name))
        assert found == (
            "ansible_connection",
            f"host {name}: the host name {name!r} is not a Slurm node name: set slurm_node",
        )
        assert first_problem(Vars({"ansible_connection": "srun", "slurm_node": "gpu1"}, host=name)) is None
    assert first_problem(Vars({"ansible_connection": "ssh"}, host="a,b")) is None


# ------------------------------------------------------------------------------------- the srun step


def test_srun_and_its_step_are_argv_lists_one_task_per_node() -> None:
    argv = srun_argv("42", ["n1", "n2"], "main")
    assert argv[:2] == ["srun", "--jobid=42"]
    assert {"--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--nodelist=n1,n2", "--label"} <= set(argv)
    assert "--kill-on-bad-exit=1" in argv and "--overlap" in argv
    step = step_argv("42", "n2", "echo 'a b'; exit 3")
    assert step[-3:] == ["/bin/sh", "-c", "echo 'a b'; exit 3"] and "--nodelist=n2" in step


def test_task_script_finds_its_rank_by_node_name_takes_the_program_and_quotes_everything(
    tmp_path: Path,
) -> None:
    """Run the task script as one task of the step would, with /bin/echo standing in for Python."""
    hostile = "x'; touch /tmp/pwned-by-diagnose-test; echo '"
    script = task_script(
        ["n1", "n2"],
        f"{tmp_path}/run/main/n",
        "tok-1",
        ["/bin/echo", "/bin/echo"],
        [{}, {"NCCL_IB_HCA": hostile}],
        torchrun_args(2, RANK, 4, "n1", 29500),
        ["--backend", "gloo", "--results", "./results.jsonl"],
    )
    env = {**os.environ, "SLURMD_NODENAME": "n2", "SLURM_JOB_ID": "42", "SLURM_STEP_ID": "3"}
    files = files_archive({"program.py": "print('program')\n", "common.py": "# beside\n"})
    done = subprocess.run(["/bin/sh", "-c", script + "\n"], input=files, capture_output=True, env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.decode().splitlines()
    assert lines[0] == "@@diagnose-node 1 42.3"
    assert (
        "--node-rank=1" in lines[1]
        and "--master-addr=n1" in lines[1]
        and "program.py --backend gloo" in lines[1]
    )
    assert (tmp_path / "run" / "main" / "n1" / "program.py").read_text() == "print('program')\n"
    assert (tmp_path / "run" / "main" / "n1" / "common.py").read_text() == "# beside\n"
    assert not Path("/tmp/pwned-by-diagnose-test").exists()
    stranger = subprocess.run(
        ["/bin/sh", "-c", script],
        input="",
        capture_output=True,
        text=True,
        env={**env, "SLURMD_NODENAME": "n9"},
    )
    assert stranger.returncode == 96 and "n9 is not one of this launch's (n1 n2)" in stranger.stderr


# ------------------------------------------------------------------------------------- the submission


def test_secret_variables_leave_the_command_line_and_the_rest_stays_in_order(tmp_path: Path) -> None:
    extra = write(tmp_path / "more.yml", "x: 1\n")
    public, hidden = split_secrets(
        ["slurm_nodes=4", "api_token=s3cr3t site=lab", '{"db_password": "pw", "keep": 1}', f"@{extra}"]
    )
    assert hidden == {"api_token": "s3cr3t", "db_password": "pw"}
    assert public == ["slurm_nodes=4", '{"site": "lab"}', '{"keep": 1}', f"@{extra.resolve()}"]
    script = batch_script(
        ["python3", "-m", "diagnose.cli", "run", "-e", "site=a b"], tmp_path / "s.json", "x"
    )
    assert "s3cr3t" not in script and "pw" not in script
    assert subprocess.run(["sh", "-n", "-c", script]).returncode == 0
    assert script.rstrip().endswith("-e 'site=a b' -e @\"$s\"")
    assert "trap 'rm -f \"$s\"' EXIT" in script


def test_a_submission_into_a_folder_holding_a_run_is_refused_before_sbatch(tmp_path: Path) -> None:
    out = tmp_path / "acceptance"
    out.mkdir()
    (out / "results.json").write_text(json.dumps({"schema": 1, "run": {"id": "20261121T020000Z-ab12"}}))
    options = RunOptions(out=str(out), slurm=SlurmQuery(allocation=False), connect_timeout=4.0)
    request = RunRequest(options, load_playbook("acceptance"), [], [], [], [], {"json"}, None)
    with pytest.raises(ConfigError, match=r"holds another run \(run 20261121T020000Z-ab12\)"):
        plan(request)
    argv = inner_argv(options, SlurmQuery(), [], None)  # the job keeps the operator's -T
    assert argv[argv.index("--timeout") + 1] == "4"


def test_sbatch_parsable_output_is_a_job_id() -> None:
    assert job_id("123\n") == "123" and job_id("77;bed\n") == "77"
    with pytest.raises(ValueError, match="where a job id was expected"):
        job_id("sbatch: error: Batch job submission failed\n")


# ------------------------------------------------------------------------------------- coverage


def results(run_id: str, started: datetime, hosts: dict[str, bool]) -> dict:
    return {
        "schema": 1,
        "run": {"id": run_id, "started": started.isoformat(), "finished": started.isoformat(),
                "inventory": "slurm:partition=gpu", "playbook": "nightly", "limit": None},
        "hosts": [{"name": n, "reachable": r, "environment": {}} for n, r in hosts.items()],
        "checks": [], "benchmarks": [], "verdict": "PASS",
    }  # fmt: skip


def test_stalest_takes_never_covered_nodes_first_then_the_oldest() -> None:
    covered = {"n1": ("t1", 100.0), "n2": ("t2", 50.0), "n4": ("t4", 75.0)}
    assert stalest(["n1", "n2", "n3", "n4"], covered, 3) == ["n3", "n2", "n4"]
    assert stalest(["n1"], covered, 3) == ["n1"]


def test_coverage_survives_retention_and_only_reachable_hosts_count(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite3"
    now = datetime.now(timezone.utc).replace(microsecond=0)
    older = results("r1", now - timedelta(days=8), {"n1": True, "n2": False})
    newer = results("r2", now, {"n2": True})
    for document in (older, newer):
        record_run(db, document, None)
        record_coverage(db, document)
    pruned = prune(db, newer, keep_runs=1, keep_days=None)
    assert [p.run_id for p in pruned] == ["r1"], "the old run is forgotten"
    covered = last_covered(db, newer["run"])
    assert set(covered) == {"n1", "n2"}
    assert covered["n1"][0] == older["run"]["started"] and covered["n2"][0] == newer["run"]["started"]
    record_coverage(db, older)  # an older run recorded late never moves coverage back
    assert last_covered(db, newer["run"])["n2"][0] == newer["run"]["started"]
    other = {**newer["run"], "inventory": "slurm:partition=cpu"}
    assert last_covered(db, other) == {}
    assert json.loads(json.dumps(covered))  # plain data
