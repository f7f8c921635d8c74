"""Test hosts with networks of their own (HostSpec.own_network) and the harness that splits one machine into
cluster nodes with them (tests/support/gpuhosts.py), on CPU hosts: what a lent GPU machine runs, minus GPUs.

Two such hosts must be two nodes to every program that tells nodes apart: their own hostname, an address on
a network between them that each resolves by name, a /tmp of their own; a host whose sshd died keeps what
it runs (as a node does); and diagnose's cross-node collective runs between them over that network.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.bedhosts import wait_until
from tests.support.gpuhosts import Action, leftovers, split, sshd_pids
from tests.support.paths import REPO
from tests.support.playbooks import GLOO_BENCH, write_playbook
from tests.support.testbed import HostSpec, TestBed

pytestmark = pytest.mark.integration


def _harness(tmp_path: Path, harness: list[str], run: list[str]) -> subprocess.CompletedProcess[str]:
    """``python -m tests.support.gpuhosts`` with two CPU hosts (and ``harness`` options) around ``diagnose run``
    (with ``run`` options), as a user runs it on a GPU machine; its work folder is tmp_path/gh."""
    argv = [
        *(sys.executable, "-m", "tests.support.gpuhosts", "--hosts", "2", "--workdir", str(tmp_path / "gh")),
        *("-v", "diagnose_profile=cpu-testbed", "-v", "bench_startup_timeout_s=180", *harness, "--"),
        *(sys.executable, "-m", "diagnose", "run", "-i", "{inventory}", *run),
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(argv, capture_output=True, text=True, timeout=400, env=env, cwd=REPO)


def test_two_hosts_with_their_own_network_are_two_nodes(testbed: TestBed) -> None:
    one, two = testbed.add_many(
        [
            HostSpec("alpha", own_network=True, private_tmp=True),
            HostSpec("beta", own_network=True, private_tmp=True),
        ]
    )
    assert {one.network_address, two.network_address} == {"198.18.0.2", "198.18.0.3"}
    probe = (
        "hostname; ip -4 -o addr show eth0 | awk '{print $4}'; getent hosts alpha beta | awk '{print $1, $2}'; "
        "echo mine > /tmp/only-$(hostname); ls /tmp | grep only-; "
        f"{sys.executable} -c \"import socket; print(socket.create_connection(('{{peer}}', 22), 5).recv(7))\""
    )
    seen = {}
    for host, peer in ((one, "beta"), (two, "alpha")):
        done = testbed.ssh(host, probe.replace("{peer}", peer))
        assert done.returncode == 0, done.stderr
        seen[host.name] = done.stdout.split("\n")
    for host in (one, two):
        name, address, first, second, only, banner = seen[host.name][:6]
        assert (name, address) == (host.name, f"{host.network_address}/24")
        assert [first, second] == [f"{one.network_address} alpha", f"{two.network_address} beta"]
        assert only == f"only-{host.name}", "each host has a /tmp of its own"
        assert banner == "b'SSH-2.0'", "the other host's sshd answers over the network between them"
    outside = testbed.ssh(one, "ls /tmp").stdout.split()
    assert "only-beta" not in outside


def _signals_pending(pid: int) -> int:
    """The signals sent to ``pid`` and not yet acted on (a process told to die that has not run since)."""
    status = dict(line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return int(status["SigPnd"], 16) | int(status["ShdPnd"], 16)


def test_a_host_outlives_its_sshd_and_the_bed_still_leaves_nothing(testbed: TestBed) -> None:
    host = testbed.add(HostSpec("gamma", own_network=True))
    started = testbed.ssh(host, "setsid sleep 600 </dev/null >/dev/null 2>&1 & echo started")
    assert started.stdout.strip() == "started"
    wait_until(lambda: any(" sleep 600" in line for line in leftovers(host)), 10, "the sleep to start")
    (sleeper,) = [int(line.split()[0]) for line in leftovers(host) if " sleep 600" in line]
    captured, host.pid_namespace = host.pid_namespace, None
    try:
        with pytest.raises(RuntimeError, match="its pid namespace was not captured"):
            sshd_pids(host)  # an empty namespace would have no sshd to kill, and the kill would do nothing
    finally:
        host.pid_namespace = captured
    for pid in sshd_pids(host):
        with contextlib.suppress(ProcessLookupError):  # the session of the command above may end meanwhile
            os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not sshd_pids(host), 10, "the host's sshd to die")
    # Every sshd is reaped: a signal its death sent is pending by now, whether or not the sleep has run since.
    assert any(line.startswith(f"{sleeper} sleep 600") for line in leftovers(host)), "what the node runs"
    assert _signals_pending(sleeper) == 0, "nothing is about to end it: it survives its sshd"
    assert host.alive
    testbed.stop()
    assert testbed.leftover_pids() == []


def test_the_harness_splits_gpus_evenly_and_parses_its_actions() -> None:
    assert split([0, 1, 2, 3], 2) == [[0, 1], [2, 3]]
    assert split([0, 1, 2, 3, 4, 5, 6, 7], 4) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    with pytest.raises(ValueError, match="3 GPUs do not split evenly over 2 hosts"):
        split([0, 1, 2], 2)
    assert split([0, 1], 4, shared=True) == [[0], [1], [0], [1]]
    with pytest.raises(ValueError, match="3 hosts do not share 2 GPUs evenly"):
        split([0, 1], 3, shared=True)
    action = Action.parse("all_reduce, 4 ranks=kill-sshd:node2+5")
    assert (action.pattern.pattern, action.what, action.host, action.delay) == (
        "all_reduce, 4 ranks",
        "kill-sshd",
        "node2",
        5.0,
    )
    assert Action.parse("training probe on=sigint").what == "sigint"
    assert Action.parse("all_reduce=sigkill+3").what == "sigkill"
    ranks_up = Action.parse("all_reduce, 2 ranks=kill-sshd:node2@program.py")
    assert (ranks_up.what, ranks_up.host, ranks_up.delay, ranks_up.running) == (
        "kill-sshd",
        "node2",
        0,
        "program.py",
    )


def test_diagnose_runs_its_collective_across_two_harness_hosts(
    testbed_available: None, tmp_path: Path
) -> None:
    """The harness's command line as on a GPU machine, here with CPU hosts: gloo between two nodes over the
    veths (node2's sends shaped by tc), the rendezvous at the first host's own address, nothing left on
    either host afterwards."""
    playbook = write_playbook(tmp_path, GLOO_BENCH)
    out = tmp_path / "run"
    done = _harness(
        tmp_path,
        ["--shape", "node2=20gbit"],
        ["--playbook", str(playbook), "-o", str(out), "--format", "json"],
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    harness = json.loads((tmp_path / "gh" / "harness.json").read_text())
    assert [h["name"] for h in harness["hosts"]] == ["node1", "node2"]
    assert len({h["address"] for h in harness["hosts"]}) == 2
    assert harness["left_running"] == {"node1": [], "node2": []}
    assert harness["shaped"]["node2"].startswith("qdisc tbf") and "rate 20Gbit" in harness["shaped"]["node2"]
    inventory = (tmp_path / "gh" / "inventory.yaml").read_text()
    for host in harness["hosts"]:  # per host: the search's pair tests are led by other hosts than the first
        assert f"{host['name']}:\n      ansible_host: 127.0.0.1" in inventory
        assert f"bench_master_addr: {host['address']}" in inventory
    results = json.loads((out / "results.json").read_text())
    bench = next(b for b in results["benchmarks"] if b["collective"] == "all_reduce")
    assert (bench["nodes"], bench["backend"], bench["status"]) == (2, "gloo", "PASS"), bench["message"]
    assert bench["rows"], "sizes measured between the two nodes"


def test_a_host_whose_sshd_dies_mid_sweep_is_one_cause_and_nothing_is_left(
    testbed_available: None, tmp_path: Path
) -> None:
    """Issue 34 case 3 on CPU hosts (the GPU machine's time ran out before it): node2's sshd killed during the
    cross-node all_reduce. Before, every stage after the sweep tried node2 again and failed on it: 12 ERRORs,
    5 causes. Now node2's host.reachable is the one cause, the sweep's ERROR under it, the extras run on node1
    alone, and neither host keeps a process of the run."""
    out = tmp_path / "run"
    done = _harness(
        tmp_path,
        ["--at", "all_reduce, 2 ranks=kill-sshd:node2@program.py"],
        ["-o", str(out), "--format", "json", "-e", "burnin_minutes=0"],
    )
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    harness = json.loads((tmp_path / "gh" / "harness.json").read_text())
    assert [a["detail"] for a in harness["actions"]] == ["killed 2 sshd process(es) of node2"]
    assert harness["left_running"] == {"node1": [], "node2": []}
    results = json.loads((out / "results.json").read_text())
    assert [
        (c["check"], c["hosts"], [(x["id"], x["host"]) for x in c["consequences"]]) for c in results["causes"]
    ] == [("host.reachable", ["node2"], [("bench.all_reduce", None)])]
    reach = next(c for c in results["checks"] if c["id"] == "host.reachable" and c["host"] == "node2")
    assert reach["message"].startswith(
        "node2 answered at the start, then stopped answering during the collective"
    )
    later = [
        c["id"]
        for c in results["checks"]
        if c["host"] == "node2" and c["id"].startswith(("fleet.", "gpu.gemm"))
    ]
    assert later == [], "nothing after the sweep tried node2 again"


def test_a_controller_killed_with_sigkill_leaves_nothing_once_the_lease_has_passed(
    testbed_available: None, tmp_path: Path
) -> None:
    """diagnose SIGKILLed (no stop of its own can run) once the ranks of a sweep that would never end by
    itself (a million iterations of 16 MiB) run on both hosts: only the launch's watchdog can end them, once
    no poll has renewed its 60 s lease."""
    endless = GLOO_BENCH.replace("min_bytes: 4096\n  max_bytes: 16384", "min_bytes: 16M\n  max_bytes: 16M")
    playbook = write_playbook(tmp_path, endless.replace("iters: 2\n", "iters: 1000000\n"))
    done = _harness(
        tmp_path,
        ["--at", "all_reduce, 2 ranks=sigkill@program.py"],
        ["--playbook", str(playbook), "-o", str(tmp_path / "run"), "--format", "json"],
    )
    assert done.returncode == -signal.SIGKILL % 256, done.stdout[-3000:]
    harness = json.loads((tmp_path / "gh" / "harness.json").read_text())
    assert harness["rc"] == -signal.SIGKILL and [a["action"] for a in harness["actions"]] == ["sigkill"]
    for host in ("node1", "node2"):
        assert any("program.py" in p for p in harness["left_running_at_exit"][host]), "the ranks outlived it"
    assert harness["left_running"] == {"node1": [], "node2": []}
    assert 30 < harness["gone_after_s"] <= 75
