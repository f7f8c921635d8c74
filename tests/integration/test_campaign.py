"""An acceptance campaign end to end through the command line, over real sshd hosts.

Three 8x H100 NDR nodes of tests/support/hostkit.py, every GPU with a board serial of its own (the identity a
campaign keeps), are judged against the h100-8x-ndr400 profile by a small acceptance playbook: every check, the
GPU stress without burn-in and a gloo all_reduce sweep (the hosts have no GPU: ``bench_backend=gloo`` starts
real torchrun launches over SSH, on torch CPU). node3 starts with an InfiniBand port Down.

The campaign is one story told in order, each chapter a module fixture on top of the one before, and each test
reads the chapter it is about: the first ``run --campaign`` fails node3; node3 is repaired (its tools and
sysfs swapped for the healthy node's, tests/support/hostkit.py ``reequip``) and ``campaign next`` retests it
and certifies the cluster; then node2 comes back with another GPU board. The soak has a campaign and a
history database of its own on the same hosts, and a controller killed between its rounds.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.support.bedhosts import bench_processes, wait_until
from tests.support.cli import diagnose
from tests.support.hostkit import (
    PROFILE,
    healthy_h100,
    memlock_vars,
    port_down,
    reequip,
    with_board_serials,
)
from tests.support.paths import REPO
from tests.support.prerequisites import require
from tests.support.testbed import TestBed, prerequisite_problem

pytestmark = pytest.mark.integration

NAME = "acc"
HOSTS = ("node1", "node2", "node3")
FAULTY = "node3"
CABLE = "reseat_or_replace_cable"
#: GPU 0's bus id on the 8x H100 node, the slot of the board node2 gets replaced.
SLOT = "00000000:18:00.0"
#: A board of the same series as the captured one (gpu_query/h100x1_580_serial_corrected.txt: 1752524022570).
NEW_BOARD = "1752524029900"
PLAYBOOK = """\
name: campaign-acceptance
description: every check, GPU stress without burn-in, a tiny gloo all_reduce sweep
checks: ["*"]
vars:
  burnin_minutes: 0
benchmarks:
  enabled: true
  collectives: [all_reduce]
  min_bytes: 4K
  max_bytes: 16K
  step_factor: 4
  warmup_iters: 1
  iters: 2
  straggler_isolation: false
  stress: true
"""
#: Two soak rounds 36 s apart: 0.02 h is 1.2 min, one round every 0.6 min (diagnose/campaign/soak.py).
SOAK = ("-e", "soak_hours=0.02", "-e", "soak_interval_minutes=0.6")
SOAK_INTERVAL_S = 36


def board_serials(node: int) -> list[str]:
    """Eight serials of the captured board's series, distinct across the nodes."""
    return [str(1752524022570 + 100 * node + gpu) for gpu in range(8)]


@dataclass
class Cluster:
    """The bed, the files every command names, and the CLI with the options all runs share."""

    bed: TestBed
    work: Path
    inventory: Path
    playbook: Path
    db: Path

    def run_options(self, db: Path | None = None) -> list[str]:
        """What ``run`` and ``campaign next`` take alike: hosts, playbook, profile, gloo, history."""
        return [
            "-i",
            str(self.inventory),
            "--playbook",
            str(self.playbook),
            "--history",
            str(db or self.db),
            "--format",
            "json",
            "-e",
            f"diagnose_profile={PROFILE}",
            "-e",
            "bench_backend=gloo",
            *memlock_vars(),
            "--quiet",
        ]

    def cli(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return diagnose(*argv, cwd=self.work)

    def status(self) -> dict[str, Any]:
        done = self.cli("campaign", "status", NAME, "--history", str(self.db), "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)


def results(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "results.json").read_text())


def host_names(document: dict[str, Any]) -> list[str]:
    return [h["name"] for h in document["hosts"]]


def by_host(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {h["host"]: h for h in status["hosts"]}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    require("the sshd test bed", prerequisite_problem())
    work = tmp_path_factory.mktemp("campaign")
    with TestBed(work / "bed") as bed:
        specs = [healthy_h100("node1"), healthy_h100("node2"), port_down(FAULTY)]
        bed.add_many([with_board_serials(spec, board_serials(i)) for i, spec in enumerate(specs, 1)])
        playbook = work / "campaign-acceptance.yaml"
        playbook.write_text(PLAYBOOK)
        inventory = bed.write_inventory(work / "cluster.yaml")
        yield Cluster(bed, work, inventory, playbook, work / "history.sqlite3")


@pytest.fixture(scope="module")
def first_run(cluster: Cluster) -> dict[str, Any]:
    """The campaign's first run, over the three hosts with node3's port Down."""
    out = cluster.work / "run1"
    done = cluster.cli("run", *cluster.run_options(), "--campaign", NAME, "-o", str(out))
    return {"done": done, "out": out, "results": results(out), "status": cluster.status()}


@pytest.fixture(scope="module")
def accepted(cluster: Cluster, first_run: dict[str, Any]) -> dict[str, Any]:
    """node3 repaired and said so; ``campaign next`` planned, run, and the certificate written."""
    reequip(cluster.bed.hosts[FAULTY], with_board_serials(healthy_h100(FAULTY), board_serials(3)))
    repaired = cluster.cli(
        "campaign", "repaired", NAME, FAULTY, "--note", "reseated mlx5_9's cable", "--operator", "ops",
        "--history", str(cluster.db),
    )  # fmt: skip
    check = cluster.cli("campaign", "next", NAME, *cluster.run_options(), "--check")
    steps = cluster.work / "next"
    done = cluster.cli("campaign", "next", NAME, *cluster.run_options(), "-o", str(steps))
    status = cluster.status()
    folder = cluster.work / "certificate"
    certificate = cluster.cli(
        "campaign", "certificate", NAME, "-o", str(folder), "--operator", "ops", "--history", str(cluster.db)
    )
    return {
        "repaired": repaired,
        "check": check,
        "done": done,
        "steps": {p.name: results(p) for p in sorted(steps.iterdir())},
        "steps_dir": steps,
        "status": status,
        "certificate": certificate,
        "folder": folder,
    }


@pytest.fixture(scope="module")
def replaced(cluster: Cluster, accepted: dict[str, Any]) -> dict[str, Any]:
    """node2 back with another board in GPU 0's slot, then a run of the host checks recorded into the
    campaign (no benchmark: nothing measures the new board yet)."""
    serials = board_serials(2)
    old, serials[0] = serials[0], NEW_BOARD
    reequip(cluster.bed.hosts["node2"], with_board_serials(healthy_h100("node2"), serials))
    out = cluster.work / "swap"
    done = cluster.cli("run", *cluster.run_options(), "--campaign", NAME, "--skip-benchmarks", "-o", str(out))
    return {"done": done, "old": old, "results": results(out), "status": cluster.status()}


def test_first_run_fails_node3_with_todays_cause_and_its_retry_file_limits_a_retest_to_it(
    cluster: Cluster, first_run: dict[str, Any]
) -> None:
    """The first campaign run exits 1; the campaign holds node3 failed with the cause and action the run's
    causes give (the port Down, reseat the cable); node1 and node2 passed their own phases but wait for a
    collective (theirs ran beside node3's fault); failed.retry names node3 alone, and `run --limit
    @failed.retry` goes to node3 and nowhere else."""
    done, document = first_run["done"], first_run["results"]
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"campaign {NAME}: {FAULTY} failed: host checks FAIL:" in done.stdout
    (cause,) = [c for c in document["causes"] if FAULTY in c.get("hosts", []) and c["status"] == "FAIL"]
    hosts = by_host(first_run["status"])
    assert hosts[FAULTY]["state"] == "failed"
    assert hosts[FAULTY]["cause"] == f"host checks: {cause['message']}"
    assert "mlx5_9/1 Down/Polling" in hosts[FAULTY]["cause"]
    assert hosts[FAULTY]["action"] == cause["action"] == CABLE
    assert hosts[FAULTY]["failed_run"] == document["run"]["id"]
    assert {(hosts[h]["state"], tuple(hosts[h]["missing"])) for h in ("node1", "node2")} == {
        ("pending", ("collective",))
    }
    assert first_run["status"]["verdict"] == "NOT ACCEPTED"

    retry = first_run["out"] / "failed.retry"
    assert retry.read_text() == f"{FAULTY}\n"
    out = cluster.work / "retest"
    retest = cluster.cli(
        "run", *cluster.run_options(), "--limit", f"@{retry}", "--skip-benchmarks", "-o", str(out)
    )
    assert retest.returncode in (0, 1), retest.stderr  # judged, not refused as a usage error
    assert host_names(results(out)) == [FAULTY]
    assert sorted(p.name for p in (out / "raw").iterdir()) == [FAULTY]


def test_a_repaired_host_is_retested_alone_and_the_accepted_cluster_is_certified(
    accepted: dict[str, Any],
) -> None:
    """After the repair, `campaign next --check` plans node3 first and alone; `campaign next` runs it alone
    in its first step and touches node1 and node2 only in a full-scale step over all three; the campaign is
    then ACCEPTED, and the certificate says so in its JSON (node3's stress evidence being the retest's run) and
    in its PDF."""
    assert accepted["repaired"].returncode == 0, accepted["repaired"].stderr
    assert f"campaign {NAME}: {FAULTY} repaired: repaired (ops): reseated mlx5_9's cable" in (
        accepted["repaired"].stdout
    )
    check = accepted["check"]
    assert check.returncode == 0, check.stderr
    planned = [line for line in check.stdout.splitlines() if line.startswith("step ")]
    assert planned[0].startswith(f"step 1: retest repaired: 1 host ({FAULTY}) — host checks"), check.stdout

    done = accepted["done"]
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"campaign {NAME}: retest repaired: 1 host ({FAULTY})" in done.stdout
    steps = accepted["steps"]
    first = steps["01-run"]
    assert host_names(first) == [FAULTY]
    assert sorted(p.name for p in (accepted["steps_dir"] / "01-run" / "raw").iterdir()) == [FAULTY]
    for name, document in steps.items():
        if name != "01-run":  # only a full-scale step may come back to the hosts already accepted
            assert host_names(document) == list(HOSTS), name
            assert "collective" in document["run"]["campaign"]["phases"], name

    status = accepted["status"]
    assert status["verdict"] == "ACCEPTED", status
    assert {h["host"]: h["state"] for h in status["hosts"]} == dict.fromkeys(HOSTS, "accepted")

    certificate = accepted["certificate"]
    assert certificate.returncode == 0, certificate.stdout + certificate.stderr
    assert certificate.stdout.startswith(f"campaign {NAME}: ACCEPTED — 3 of 3 hosts accepted")
    content = json.loads((accepted["folder"] / "certificate.json").read_text())
    assert content["verdict"] == "ACCEPTED" and content["operator"] == "ops"
    node3 = {h["name"]: h for h in content["hosts"]}[FAULTY]
    assert node3["status"] == "accepted"
    assert node3["evidence"]["stress"]["run_id"] == first["run"]["id"]  # only the retest ran node3's stress
    pdf = subprocess.run(
        ["pdftotext", str(accepted["folder"] / "certificate.pdf"), "-"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "ACCEPTED" in pdf and "NOT ACCEPTED" not in pdf, pdf[:600]


def test_a_collective_passed_with_the_port_down_does_not_stand_after_the_repair(
    accepted: dict[str, Any],
) -> None:
    """node3's cross-node collective of the first run was measured while its InfiniBand port was Down: after
    the cable is reseated it proves nothing about the repaired fabric, so `campaign next` ends with a
    full-scale step over all three hosts, which then holds node3's collective evidence."""
    full = [document for document in accepted["steps"].values() if host_names(document) == list(HOSTS)]
    assert len(full) == 1, list(accepted["steps"])
    content = json.loads((accepted["folder"] / "certificate.json").read_text())
    node3 = {h["name"]: h for h in content["hosts"]}[FAULTY]
    assert node3["evidence"]["collective"]["run_id"] == full[0]["run"]["id"]


def test_a_replaced_gpu_voids_that_hosts_gpu_phases_and_names_both_serials(replaced: dict[str, Any]) -> None:
    """node2 comes back with another board in GPU 0's slot: the run that sees it prints the `replaced` event,
    and the campaign holds node2 pending for the phases a GPU was measured by (stress, the collective), each
    voided by that event, which names the old and the new serial; node1 stays accepted."""
    done, old = replaced["done"], replaced["old"]
    assert done.returncode == 0, done.stdout + done.stderr
    change = f"GPU {SLOT}: {old} → {NEW_BOARD}"
    assert f"campaign {NAME}: node2 replaced: {change}" in done.stdout.splitlines(), done.stdout
    hosts = by_host(replaced["status"])
    node2 = hosts["node2"]
    assert node2["state"] == "pending"
    assert node2["missing"] == ["stress", "collective"]
    run_id = replaced["results"]["run"]["id"]
    assert set(node2["voided"]) == {"stress", "collective"}
    assert all(why.startswith(f"{change} (run {run_id}") for why in node2["voided"].values()), node2
    assert hosts["node1"]["state"] == "accepted" and hosts["node1"]["voided"] == {}
    assert replaced["status"]["verdict"] == "NOT ACCEPTED"


def soak_rounds(db: Path) -> dict[int, tuple[str, str]]:
    """The soak's finished rounds as the controller's ledger holds them: round -> (run id, started)."""
    if not db.is_file():
        return {}
    try:
        with closing(sqlite3.connect(db, timeout=30)) as conn:
            rows = conn.execute("SELECT round, run_id, started FROM campaign_soak WHERE campaign = 'soak'")
            return {number: (run_id, started) for number, run_id, started in rows}
    except sqlite3.OperationalError:  # the schema is not there yet
        return {}


def test_a_soak_controller_killed_after_round_1_resumes_from_the_ledger(cluster: Cluster) -> None:
    """`campaign next` with soak_hours runs the host checks and the stress every soak_interval_minutes and
    records each round; SIGKILLed once round 1 is recorded, it is started again with the same options and
    goes on with round 2 at its time: round 1 is not run again (its run id stays) and each round is in the
    ledger's runs once."""
    db = cluster.work / "soak.sqlite3"
    argv = ["campaign", "next", "soak", *cluster.run_options(db), "--limit", "node1", *SOAK]
    argv += ["-o", str(cluster.work / "soak")]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with (cluster.work / "soak-1.out").open("w") as log:
        controller = subprocess.Popen(
            [sys.executable, "-m", "diagnose.cli", *argv], cwd=cluster.work, stdout=log, stderr=log, env=env
        )
        try:
            wait_until(lambda: soak_rounds(db) or controller.poll() is not None, 300, "soak round 1")
        finally:
            controller.send_signal(signal.SIGKILL)
            controller.wait()
    assert controller.returncode == -signal.SIGKILL, (cluster.work / "soak-1.out").read_text()
    first = soak_rounds(db)
    assert list(first) == [1]
    node1 = cluster.bed.hosts["node1"]
    wait_until(lambda: not bench_processes(cluster.bed, node1), 300, "the killed controller's ranks to end")

    again = cluster.cli(*argv)
    assert again.returncode == 0, again.stdout + again.stderr
    rounds = soak_rounds(db)
    assert sorted(rounds) == [1, 2] and rounds[1] == first[1], rounds
    assert "soak round 1 of 2" not in again.stdout and "soak round 2 of 2" in again.stdout, again.stdout
    assert "campaign soak: soak: all 2 rounds finished" in again.stdout
    with closing(sqlite3.connect(db)) as conn:
        kinds = sorted(k for (k,) in conn.execute("SELECT kind FROM campaign_runs WHERE campaign = 'soak'"))
        (settings,) = conn.execute("SELECT settings FROM campaigns WHERE name = 'soak'").fetchone()
    assert kinds == ["soak round 1", "soak round 2"]
    start = json.loads(settings)["soak"]["start"]
    second = datetime.fromisoformat(rounds[2][1]).timestamp()
    assert second >= start + SOAK_INTERVAL_S - 1, "round 2 ran before it was due"  # started: whole seconds
