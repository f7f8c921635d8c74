"""The check catalog end to end over real sshd hosts: every injected fault named, healthy hosts left alone.

Eleven hosts of tests/hostkit.py (two healthy 8x H100 NDR nodes and one node per fault) are judged by one
``diagnose run`` against the h100-8x-ndr400 profile, with the example testinfra module as a custom check.
The run happens once for the module; each test reads its results.json.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from diagnose.cli import main
from tests.hostkit import FAULTS, PROFILE, healthy_h100
from tests.testbed import TestBed

pytestmark = pytest.mark.integration

HEALTHY = ("node1", "node2")
EXAMPLE = Path(__file__).resolve().parents[2] / "checks" / "custom" / "example_sysctl.py"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    work = tmp_path_factory.mktemp("faults")
    with TestBed(work / "bed") as bed:
        bed.add_many([healthy_h100(h) for h in HEALTHY] + [build(h) for h, (build, _, _) in FAULTS.items()])
        inventory = bed.write_inventory(work / "inventory.yaml")
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
                "-e",
                "command_timeout_s=8",
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
    for other in HEALTHY:
        assert results_for(run, check_id).get(other, {"status": "PASS"})["status"] in ("PASS", "SKIP")


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
    ):
        assert statuses[check_id] == "PASS", check_id


def test_cluster_rules_name_only_the_odd_hosts(run: dict[str, Any]) -> None:
    versions = results_for(run, "versions.consistency")
    assert set(versions) == {None, "other-nccl"}
    assert versions["other-nccl"]["message"] == "other-nccl runs NCCL 2.27.7, the other hosts 2.28.3"
    fabric = results_for(run, "ib.consistency")
    assert set(fabric) == {None, "link-200", "mtu-2048"}
    assert fabric[None]["status"] == "FAIL"


def test_fault_messages_say_what_is_wrong(run: dict[str, Any]) -> None:
    assert "mlx5_9/1 Down/Polling" in results_for(run, "ib.port_state")["port-down"]["message"]
    assert "mlx5_4/1 at 200 Gb/s" in results_for(run, "ib.link_rate")["link-200"]["message"]
    assert "NCCL_P2P_DISABLE=1 (from /etc/nccl.conf)" in results_for(run, "nccl.env")["p2p-off"]["message"]
    assert "no /dev/infiniband on no-ib" in results_for(run, "ib.devices")["no-ib"]["message"]
    assert "ibstat is missing on no-ib" in results_for(run, "ib.port_state")["no-ib"]["message"]
    assert "timed out on hung-ibstat" in results_for(run, "ib.port_state")["hung-ibstat"]["message"]
    assert "nvidia_peermem not loaded" in results_for(run, "gpu.gpudirect")["no-peermem"]["message"]
    assert "all 8 InfiniBand ports at 2048" in results_for(run, "ib.mtu")["mtu-2048"]["message"]


def test_environment_and_evidence(run: dict[str, Any]) -> None:
    hosts = {h["name"]: h for h in run["results"]["hosts"]}
    env = hosts["node1"]["environment"]
    assert (env["gpu_model"], env["gpu_count"], env["driver"], env["cuda"], env["nccl"]) == (
        "NVIDIA H100 80GB HBM3",
        8,
        "565.57.01",
        "12.7",
        "2.28.3",
    )
    assert hosts["p2p-off"]["environment"]["nccl_env"]["NCCL_P2P_DISABLE"] == "1"
    evidence = results_for(run, "ib.port_state")["port-down"]["evidence"]
    assert "State: Down" in (run["out"] / evidence).read_text()


def test_custom_testinfra_check(run: dict[str, Any]) -> None:
    ports = results_for(run, "custom.example_sysctl::test_ephemeral_port_range")
    assert ports["narrow-ports"]["status"] == "FAIL"
    assert "60000-60100 leaves 101 ports" in ports["narrow-ports"]["message"]
    assert all(ports[h]["status"] == "PASS" for h in HEALTHY)
