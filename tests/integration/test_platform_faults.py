"""Issue 26's platform checks end to end over real sshd hosts: each planted fault named on its host.

Two healthy 8x H100 NDR nodes of tests/support/hostkit.py and one node per fault of
tests/support/platformkit.py's ``PLATFORM_FAULTS`` (ACS redirect between a GPU and a NIC, a translating
IOMMU, NUMA balancing on, powersave governors, a GPU without persistence mode, an unsynchronised clock, a
read-only root, an NVMe drive gone), judged by one ``diagnose run`` against the h100-8x-ndr400 profile with
``expected_mounts`` and ``expected_nvme_count`` set as a site would. The healthy nodes carry the traps: ACS
left on the NVSwitch tray's port, a clock 22 µs off, a read-only squashfs nobody expects to write.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from diagnose.cli import main
from tests.support.hostkit import PROFILE, healthy_h100, memlock_vars
from tests.support.platformkit import PLATFORM_FAULTS
from tests.support.testbed import TestBed

pytestmark = pytest.mark.integration

HEALTHY = ("node1", "node2")
PLATFORM = (
    "pci.acs",
    "host.iommu",
    "host.numa_balancing",
    "host.cpu_governor",
    "gpu.persistence",
    "host.time_sync",
    "host.storage",
)
#: gpu.topology runs the nvidia-smi call gpu.persistence reads.
CHECKS = ("host.reachable", "gpu.topology", *PLATFORM)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    work = tmp_path_factory.mktemp("platform")
    with TestBed(work / "bed") as bed:
        hosts = [healthy_h100(h) for h in HEALTHY]
        hosts += [change(healthy_h100(h)) for h, (change, _, _) in PLATFORM_FAULTS.items()]
        bed.add_many(hosts)
        inventory = bed.write_inventory(work / "inventory.yaml")
        playbook = work / "platform.yaml"
        playbook.write_text(
            f"name: platform\ndescription: issue 26's platform checks\nchecks: [{', '.join(CHECKS)}]\n"
        )
        out = work / "out"
        argv = ["run", "--inventory", str(inventory), "--playbook", str(playbook), "--out", str(out)]
        argv += ["--skip-benchmarks", "--format", "json", "-e", f"diagnose_profile={PROFILE}"]
        argv += ["-e", "expected_mounts=/,/dev/shm", "-e", "expected_nvme_count=8", *memlock_vars()]
        started = time.monotonic()
        code = main(argv)
        yield {
            "code": code,
            "results": json.loads((out / "results.json").read_text()),
            "out": out,
            "seconds": time.monotonic() - started,
        }


def results_for(run: dict[str, Any], check_id: str) -> dict[str | None, dict[str, Any]]:
    return {c["host"]: c for c in run["results"]["checks"] if c["id"] == check_id}


@pytest.mark.parametrize("host", sorted(PLATFORM_FAULTS))
def test_each_fault_is_named_on_its_host_by_its_check(run: dict[str, Any], host: str) -> None:
    _, check_id, status = PLATFORM_FAULTS[host]
    result = results_for(run, check_id).get(host)
    assert result is not None, f"{check_id} has no result for {host}"
    assert result["status"] == status, result["message"]
    assert result["message"] and result["remediation"]
    assert host in result["message"]
    # Each fault stays on its own check: the other platform checks pass on that host.
    for other in PLATFORM:
        if other != check_id:
            assert results_for(run, other)[host]["status"] == "PASS", (host, other)


def test_healthy_hosts_pass_every_platform_check_and_the_traps_stay_quiet(run: dict[str, Any]) -> None:
    assert run["code"] == 1
    for host in HEALTHY:
        mine = {c["id"]: c for c in run["results"]["checks"] if c["host"] == host}
        for check_id in PLATFORM:
            assert mine[check_id]["status"] == "PASS", (host, check_id, mine[check_id]["message"])
    message = {c["id"]: c["message"] for c in run["results"]["checks"] if c["host"] == "node1"}
    assert "ACS redirect on 82:00.0, not between a GPU and a NIC" in message["pci.acs"]
    assert "passthrough (2 remapping units; groups: 11 identity" in message["host.iommu"]
    assert "run performance" in message["host.cpu_governor"]
    assert "persistence mode On for the 8 GPUs of node1" in message["gpu.persistence"]
    assert message["host.time_sync"].endswith("offset -22 µs")
    assert (
        message["host.storage"]
        == "node1: 2 expected mounts read-write, / 64 GiB free, /dev/shm 128 GiB free, 8 NVMe drives"
    )


def test_fault_messages_say_what_is_wrong(run: dict[str, Any]) -> None:
    acs = results_for(run, "pci.acs")["acs-on"]["message"]
    assert "17:01.0 (ReqRedir+ CmpltRedir+) between 19:00.0, 1a:00.0" in acs
    assert "11 IOMMU groups translate DMA" in results_for(run, "host.iommu")["iommu-dma"]["message"]
    assert "kernel.numa_balancing = 1 (on)" in results_for(run, "host.numa_balancing")["numa-on"]["message"]
    assert "powersave on CPU 0" in results_for(run, "host.cpu_governor")["powersave"]["message"]
    off = results_for(run, "gpu.persistence")["persistence-off"]["message"]
    assert "persistence mode Off on persistence-off: GPU 3 (00000000:5D:00.0);" in off
    clock = results_for(run, "host.time_sync")["clock-unsynced"]["message"]
    assert "clock of clock-unsynced is not synchronised" in clock
    storage = results_for(run, "host.storage")
    assert "/ is mounted read-only (/dev/vda, ext4)" in storage["root-ro"]["message"]
    assert "7 NVMe drives, expected_nvme_count 8" in storage["nvme-7"]["message"]


def test_the_platform_commands_leave_evidence(run: dict[str, Any]) -> None:
    """Each check's raw output is kept; gpu.persistence shares gpu.topology's nvidia-smi call."""
    evidence = {c["id"]: c["evidence"] for c in run["results"]["checks"] if c["host"] == "acs-on"}
    assert evidence["pci.acs"] == "raw/acs-on/lspci.txt"
    assert evidence["gpu.persistence"] == "raw/acs-on/nvidia_smi.txt"
    assert "ReqRedir+" in (run["out"] / "raw/acs-on/lspci.txt").read_text()
    assert "Persistence-M" in (run["out"] / "raw/acs-on/nvidia_smi.txt").read_text()
