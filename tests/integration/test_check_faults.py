"""The check catalog end to end over real sshd hosts: every injected fault named, healthy hosts left alone.

The hosts of tests/support/hostkit.py (two healthy 8x H100 NDR nodes and one node per fault) are judged by one
``diagnose run`` against the h100-8x-ndr400 profile, with the example testinfra module as a custom check.
The run happens once for the module; each test reads its results.json. A link flap is a fault that
happens during a run, so it has a run of its own with a short gloo benchmark between the snapshots.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from diagnose.cli import main
from diagnose.engine.stages import selected_catalog
from tests.support.hostkit import FAULTS, FLAP, FLAP_PORT, PROFILE, healthy_h100, memlock_vars
from tests.support.nshost import memlock_ceiling_kib
from tests.support.paths import REPO
from tests.support.testbed import TestBed

pytestmark = pytest.mark.integration

HEALTHY = ("node1", "node2")
EXAMPLE = REPO / "checks" / "custom" / "example_sysctl.py"
NODE_HEALTH = (
    "gpu.xid",
    "gpu.memory",
    "gpu.clocks",
    "gpu.pcie",
    "gpu.nvlink",
    "gpu.fabricmanager",
    "ib.counters",
    "host.memlock",
)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    work = tmp_path_factory.mktemp("faults")
    with TestBed(work / "bed") as bed:
        bed.add_many([healthy_h100(h) for h in HEALTHY] + [build(h) for h, (build, _, _) in FAULTS.items()])
        # Only the hung host gets a short command timeout: the others' torch probes need longer while
        # eighteen hosts import torch at once on a small machine.
        inventory = bed.write_inventory(
            work / "inventory.yaml", host_vars={"hung-ibstat": {"command_timeout_s": 8}}
        )
        playbook = work / "faults.yaml"
        playbook.write_text(
            "name: faults\ndescription: every check and the example custom check\n"
            f'checks: ["*"]\ncustom_checks: ["{EXAMPLE}"]\n'
        )
        out = work / "out"
        code = main(
            [
                "run",
                "--inventory",
                str(inventory),
                "--playbook",
                str(playbook),
                "--out",
                str(out),
                "--skip-benchmarks",
                "--format",
                "json",
                "-e",
                f"diagnose_profile={PROFILE}",
                *memlock_vars(),
            ]
        )
        yield {"code": code, "results": json.loads((out / "results.json").read_text()), "out": out}


def results_for(run: dict[str, Any], check_id: str) -> dict[str | None, dict[str, Any]]:
    return {c["host"]: c for c in run["results"]["checks"] if c["id"] == check_id}


def test_the_run_fails(run: dict[str, Any]) -> None:
    assert run["code"] == 1
    assert run["results"]["verdict"] == "FAIL"


@pytest.mark.parametrize("host", sorted(FAULTS))
def test_each_fault_is_named_on_its_host_by_its_check(run: dict[str, Any], host: str) -> None:
    _, check_id, status = FAULTS[host]
    result = results_for(run, check_id).get(host)
    assert result is not None, f"{check_id} has no result for {host}"
    assert result["status"] == status, result["message"]
    assert result["message"] and result["remediation"]
    rows = results_for(run, check_id)
    across_hosts = bool(selected_catalog([check_id])[1])  # one summing-up row, and a row per odd host only
    assert not across_hosts or None in rows, f"{check_id} has no cluster-level result"
    for other in HEALTHY:  # judged there too: a missing result is no PASS
        healthy = rows.get(other)
        if healthy is None and across_hosts:
            continue
        assert healthy is not None, f"{check_id} has no result for the healthy {other}"
        assert healthy["status"] in ("PASS", "SKIP"), healthy["message"]


def test_healthy_hosts_have_no_fail_or_error(run: dict[str, Any]) -> None:
    bad = [
        (c["id"], c["host"], c["status"], c["message"])
        for c in run["results"]["checks"]
        if c["host"] in HEALTHY and c["status"] in ("FAIL", "ERROR")
    ]
    assert not bad
    statuses = {c["id"]: c["status"] for c in run["results"]["checks"] if c["host"] == "node1"}
    for check_id in (
        "ib.devices",
        "ib.port_state",
        "ib.link_rate",
        "ib.mtu",
        "gpu.topology",
        "gpu.gpudirect",
        *NODE_HEALTH,
    ):
        assert statuses[check_id] == "PASS", check_id


def test_healthy_node_health_messages(run: dict[str, Any]) -> None:
    """What the node-health checks saw on a healthy node: every GPU, link and port, not an empty answer."""
    message = {c["id"]: c["message"] for c in run["results"]["checks"] if c["host"] == "node1"}
    assert "no Xid in the kernel log of node1 since boot (dmesg-iso, 4 NVRM lines)" in message["gpu.xid"]
    assert "8 GPUs, no uncorrectable memory error, nothing pending" in message["gpu.memory"]
    assert "8 GPUs, no fault among clock event reasons (active: GPU idle)" in message["gpu.clocks"]
    assert "8 GPUs at Gen5 x16" in message["gpu.pcie"]
    # The counter checks are judged again at the end of the run (judge_delta), on the change since the
    # host stage; either verdict names what it saw.
    assert "8 GPUs x 18 active NVLinks at 26.562 GB/s" in message["gpu.nvlink"]
    assert (
        "0 replay, 0 recovery, 0 CRC errors" in message["gpu.nvlink"]
        or "no NVLink error counter moved during the run" in message["gpu.nvlink"]
    )
    assert "Completed/Success on 8 GPUs" in message["gpu.fabricmanager"]
    assert "nvidia-fabricmanager active (systemd)" in message["gpu.fabricmanager"]
    assert (
        "8 fabric ports, no link-level error counted" in message["ib.counters"]
        or "no error counter moved on 8 fabric ports during the run" in message["ib.counters"]
    )
    assert "mlx5_bond_0 port 1 (Ethernet, not judged)" in message["ib.counters"]
    ceiling = memlock_ceiling_kib()
    shown = "unlimited" if ceiling is None else f"{ceiling}"
    assert f"soft {shown}, hard {shown}" in message["host.memlock"]


def test_cluster_rules_name_only_the_odd_hosts(run: dict[str, Any]) -> None:
    versions = results_for(run, "versions.consistency")
    assert set(versions) == {None, "other-nccl"}
    assert versions["other-nccl"]["message"] == "other-nccl runs NCCL 2.27.7, the other hosts 2.28.9"
    fabric = results_for(run, "ib.consistency")
    assert set(fabric) == {None, "link-200", "mtu-2048"}
    assert fabric[None]["status"] == "FAIL"


def test_fault_messages_say_what_is_wrong(run: dict[str, Any]) -> None:
    assert "mlx5_9/1 Down/Polling" in results_for(run, "ib.port_state")["port-down"]["message"]
    assert "mlx5_4/1 at 200 Gb/s" in results_for(run, "ib.link_rate")["link-200"]["message"]
    assert "NCCL_P2P_DISABLE=1 (from /etc/nccl.conf)" in results_for(run, "nccl.env")["p2p-off"]["message"]
    assert "no /dev/infiniband on no-ib" in results_for(run, "ib.devices")["no-ib"]["message"]
    # ib.devices names the missing hardware; the ib.* checks under it point there instead of repeating it.
    no_ib = results_for(run, "ib.port_state")["no-ib"]
    assert no_ib["status"] == "SKIP" and "no RDMA device on no-ib" in no_ib["message"]
    assert "see ib.devices" in no_ib["message"]
    assert "timed out on hung-ibstat" in results_for(run, "ib.port_state")["hung-ibstat"]["message"]
    assert "nvidia_peermem not loaded" in results_for(run, "gpu.gpudirect")["no-peermem"]["message"]
    assert "all 8 InfiniBand ports at 2048" in results_for(run, "ib.mtu")["mtu-2048"]["message"]


def test_node_health_fault_messages_name_the_gpu_or_port(run: dict[str, Any]) -> None:
    xid = results_for(run, "gpu.xid")["xid-79"]["message"]
    assert "Xid 79" in xid and "on GPU 4 (00000000:9A:00.0)" in xid
    assert (
        "GPU 1 (00000000:2A:00.0): remapped rows pending (4 uncorrectable), GPU reset needed"
        in results_for(run, "gpu.memory")["remap-pending"]["message"]
    )
    assert (
        "GPU 1 (00000000:2A:00.0) link x8, expected_pcie_width x16"
        in results_for(run, "gpu.pcie")["pcie-x8"]["message"]
    )
    assert (
        "GPU 1: 17 of 18 NVLinks active (inactive: link 3)"
        in results_for(run, "gpu.nvlink")["nvlink-down"]["message"]
    )
    clocks = results_for(run, "gpu.clocks")["hw-slowdown"]["message"]
    assert "GPU 1 (00000000:2A:00.0): HW slowdown, HW thermal slowdown active, 91 C" in clocks
    assert "GPU 0" not in clocks
    assert "soft 64, hard 64" in results_for(run, "host.memlock")["memlock-64"]["message"]
    fabric = results_for(run, "gpu.fabricmanager")["fabric-init"]["message"]
    assert "GPU 0 (00000000:18:00.0) fabric In Progress" in fabric
    assert fabric.count("fabric In Progress") == 8
    # Each GPU fault stays on its own check: the other node-health checks pass on that host.
    for host, (_, check_id, _) in FAULTS.items():
        if check_id in NODE_HEALTH and check_id != "host.memlock":
            for other in NODE_HEALTH:
                if other != check_id:
                    assert results_for(run, other)[host]["status"] == "PASS", (host, other)


def test_environment_and_evidence(run: dict[str, Any]) -> None:
    hosts = {h["name"]: h for h in run["results"]["hosts"]}
    env = hosts["node1"]["environment"]
    assert (env["gpu_model"], env["gpu_count"], env["driver"], env["cuda"], env["nccl"], env["torch"]) == (
        "NVIDIA H100 80GB HBM3",
        8,
        "565.57.01",
        "12.7",
        "2.28.9",
        "2.11.0+cu130",
    )
    assert hosts["p2p-off"]["environment"]["nccl_env"]["NCCL_P2P_DISABLE"] == "1"
    evidence = results_for(run, "ib.port_state")["port-down"]["evidence"]
    assert "State: Down" in (run["out"] / evidence).read_text()


def test_custom_testinfra_check(run: dict[str, Any]) -> None:
    ports = results_for(run, "custom.example_sysctl::test_ephemeral_port_range")
    assert ports["narrow-ports"]["status"] == "FAIL"
    assert "60000-60100 leaves 101 ports" in ports["narrow-ports"]["message"]
    assert all(ports[h]["status"] == "PASS" for h in HEALTHY)


# ------------------------------------------------------------------------------------------ link flap

# A short gloo sweep on the two hosts (as GLOO_BENCH of tests/support/playbooks.py): the benchmark stage is the window between the
# host stage's counter snapshot and the one taken after the benchmarks.
FLAP_PLAYBOOK = (
    "name: flap\ndescription: IB counters before and after a short gloo benchmark\n"
    "checks: [ib.counters]\n"
    "benchmarks:\n  collectives: [all_reduce]\n  min_bytes: 4096\n  max_bytes: 1048576\n"
    "  step_factor: 4\n  warmup_iters: 1\n  iters: 5\n"
)


def _results(path: Path) -> dict[str, Any] | None:
    """results.json as the run last wrote it (it is replaced atomically), None before the first write."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def test_link_flap_during_the_run_fails_ib_counters(testbed: TestBed, tmp_path: Path) -> None:
    """link_downed moves on one port between the host stage and the after-benchmark snapshot: the host
    passes the single snapshot and fails on the change (judge_delta), the other host passes both."""
    flap_host, build, check_id, status = FLAP
    host = testbed.add_many([healthy_h100("node1"), build(flap_host)])[1]
    inventory = testbed.write_inventory(
        tmp_path / "inv.yaml",
        extra_vars={"ansible_python_interpreter": sys.executable, "bench_startup_timeout_s": 120},
    )
    playbook = tmp_path / "flap.yaml"
    playbook.write_text(FLAP_PLAYBOOK)
    out = tmp_path / "out"
    argv = ["run", "-i", str(inventory), "--playbook", str(playbook), "-o", str(out), "--format", "json"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "diagnose.cli", *argv],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        first = None
        document: dict[str, Any] = {"checks": []}
        while first is None and proc.poll() is None and time.monotonic() < deadline:
            document = _results(out / "results.json") or {"checks": []}
            first = next(
                (c for c in document["checks"] if c["id"] == check_id and c["host"] == flap_host), None
            )
            time.sleep(0.05)
        assert first is not None, f"no host-stage {check_id} result for {flap_host} (run ended or timed out)"
        device, port = FLAP_PORT
        host.set_ib_counter(device, port, "link_downed", host.ib_counter(device, port, "link_downed") + 1)
        flapped_while_running = proc.poll() is None and not document.get("benchmarks")
        _, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert flapped_while_running, "the benchmarks ended before the flap: no window between the snapshots"
    assert first["status"] == "PASS", first["message"]
    results = json.loads((out / "results.json").read_text())
    assert results["verdict"] != "INCOMPLETE", stderr
    mine = [c for c in results["checks"] if c["id"] == check_id]
    assert all(c["status"] == "PASS" for c in mine if c["host"] == "node1"), mine
    final = [c for c in mine if c["host"] == flap_host][-1]
    # Waits on the engine's after-benchmark snapshot (judge_delta): until it lands, the host-stage
    # result is the only one and this fails.
    assert final["status"] == status, final["message"]
    assert f"{device} port {port}: link_downed +1 during the run (link flap)" in final["message"]
