"""Issue 26's fabric and NVSwitch checks end to end over real sshd hosts: each planted fault named on its host.

Two healthy 8x H100 NDR nodes of tests/support/hostkit.py, one node per fault of ``FABRIC_FAULTS`` (a fatal
NVSwitch SXid, an Ethernet port that flapped two hours ago, a port the IB core logged going DOWN three times
in the last hour, a port whose effective BER is over the limit, an HCA left on older firmware) and the traps of ``TRAPS`` (one flap thirty days ago), judged by one ``diagnose
run`` against the h100-8x-ndr400 profile. The kernel log is read once per host for gpu.xid, gpu.sxid and
ib.flaps.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from diagnose.cli import main
from tests.support.hostkit import FABRIC_FAULTS, PROFILE, TRAPS, healthy_h100, memlock_vars
from tests.support.testbed import TestBed

pytestmark = pytest.mark.integration

HEALTHY = ("node1", "node2")
CHECKS = (
    "host.reachable",
    "ib.devices",
    "ib.port_state",
    "gpu.memory",
    "gpu.xid",
    "gpu.sxid",
    "ib.flaps",
    "ib.optics",
    "versions.firmware",
)
#: Checks that compare the hosts with each other instead of judging each alone.
COMPARED = ("versions.firmware",)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    work = tmp_path_factory.mktemp("fabric")
    with TestBed(work / "bed") as bed:
        hosts = [healthy_h100(h) for h in HEALTHY]
        hosts += [build(h) for h, (build, _, _) in FABRIC_FAULTS.items()]
        hosts += [build(h) for h, (build, _) in TRAPS.items()]
        bed.add_many(hosts)
        inventory = bed.write_inventory(work / "inventory.yaml")
        playbook = work / "fabric.yaml"
        playbook.write_text(
            "name: fabric\ndescription: issue 26's fabric and NVSwitch checks\n"
            f"checks: [{', '.join(CHECKS)}]\n"
        )
        out = work / "out"
        argv = ["run", "--inventory", str(inventory), "--playbook", str(playbook), "--out", str(out)]
        argv += [
            "--skip-benchmarks",
            "--format",
            "json",
            "-e",
            f"diagnose_profile={PROFILE}",
            *memlock_vars(),
        ]
        code = main(argv)
        yield {"code": code, "results": json.loads((out / "results.json").read_text()), "out": out}


def results_for(run: dict[str, Any], check_id: str) -> dict[str | None, dict[str, Any]]:
    return {c["host"]: c for c in run["results"]["checks"] if c["id"] == check_id}


@pytest.mark.parametrize("host", sorted(FABRIC_FAULTS))
def test_each_fault_is_named_on_its_host_by_its_check(run: dict[str, Any], host: str) -> None:
    _, check_id, status = FABRIC_FAULTS[host]
    result = results_for(run, check_id).get(host)
    assert result is not None, f"{check_id} has no result for {host}"
    assert result["status"] == status, result["message"]
    assert result["message"] and result["remediation"]
    rows = results_for(run, check_id)
    for other in HEALTHY:
        if check_id in COMPARED:
            # a comparison writes its row for the cluster and one for each host that differs, none for the rest
            assert other not in rows and other not in rows[None]["message"], rows.get(other, rows[None])
        else:
            assert other in rows, f"{check_id} has no result for the healthy {other}"
            assert rows[other]["status"] == "PASS", rows[other]["message"]


def test_healthy_hosts_pass_and_say_what_they_saw(run: dict[str, Any]) -> None:
    assert run["code"] == 1
    mine = {c["id"]: c for c in run["results"]["checks"] if c["host"] == "node1"}
    for check_id in ("gpu.sxid", "ib.flaps", "ib.optics"):
        assert mine[check_id]["status"] == "PASS", mine[check_id]["message"]
    assert "no NVSwitch SXid in the kernel log of node1 since boot (dmesg-iso)" in mine["gpu.sxid"]["message"]
    assert (
        "no RDMA link down or module error in the kernel log of node1 in the last 24 h"
        in mine["ib.flaps"]["message"]
    )
    assert mine["ib.optics"]["message"] == (
        "node1: 9 ports, highest effective BER 15E-255, no module temperature sensor"
    )


def test_fault_messages_name_the_switch_port_or_version(run: dict[str, Any]) -> None:
    sxid = results_for(run, "gpu.sxid")["sxid-fatal"]["message"]
    assert "SXid 20034 (LTSSM Fault Up, fatal) on nvidia-nvswitch0 (PCI 0000:05:00) links 63, 62" in sxid
    flaps = results_for(run, "ib.flaps")["link-flaps"]["message"]
    assert "mlx5_bond_0 (0000:01:00.0 enp1s0f0np0): 3 link downs" in flaps
    # The IB core's port state lines (Linux 6.15+) leave the host through the kernel-log command's filter.
    ib_core = results_for(run, "ib.flaps")["ib-core-flaps"]["message"]
    assert "mlx5_3 port 1 (0000:53:00.0): 3 link downs" in ib_core
    optics = results_for(run, "ib.optics")["ber-high"]["message"]
    assert "mlx5_4/1 effective BER 5E-11 > 1e-12" in optics and "mlx5_0" not in optics
    firmware = results_for(run, "versions.firmware")
    assert set(firmware) == {None, "fw-drift"}
    assert firmware[None]["status"] == "FAIL"
    assert firmware["fw-drift"]["message"] == (
        "fw-drift runs HCA MT4129 28.39.4082/28.41.1000, the other hosts 28.41.1000"
    )


def test_traps_stay_quiet(run: dict[str, Any]) -> None:
    for host, (_, check_id) in TRAPS.items():
        result = results_for(run, check_id)[host]
        assert result["status"] == "PASS", result["message"]
    assert "2 older events outside the window" in results_for(run, "ib.flaps")["old-flap"]["message"]


def test_the_kernel_log_is_read_once_per_host(run: dict[str, Any]) -> None:
    """gpu.xid, gpu.sxid and ib.flaps share one command: one evidence file, which all three name."""
    evidence = {results_for(run, c)["node1"]["evidence"] for c in ("gpu.xid", "gpu.sxid", "ib.flaps")}
    assert evidence == {"raw/node1/kernel_log.txt"}
    assert "SXid" in (run["out"] / "raw/sxid-fatal/kernel_log.txt").read_text()
