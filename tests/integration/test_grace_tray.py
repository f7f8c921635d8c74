"""The host stage of gb200-nvl72 on an aarch64 Grace tray over a real sshd host: healthy, it passes.

The tray of tests/support/gracekit.py answers ``uname -m`` with aarch64 and shows what a Grace tray shows
(GPUs each alone in its own PCI domain, no PCIe switch, every NIC at SYS in topo -m, an Arm SMMU, no cpufreq
governor). Every host check of the acceptance playbook runs against it (benchmarks skipped); none may fail,
warn or err, and no message may lean on an x86 notion of the platform.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from diagnose.cli import main
from tests.support.gracekit import PROFILE, grace_tray
from tests.support.hostkit import memlock_vars
from tests.support.paths import REPO
from tests.support.testbed import TestBed

pytestmark = pytest.mark.integration

TRAY = "gb200-tray1"
X86 = re.compile(r"x86|intel|amd|VT-d|AMD-Vi|QPI|UPI", re.IGNORECASE)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    work = tmp_path_factory.mktemp("grace")
    with TestBed(work / "bed") as bed:
        bed.add_many([grace_tray(TRAY)])
        tray_vars = {TRAY: {"nvlink_rack": "rack1", "expected_imex_channels": 0}}
        inventory = bed.write_inventory(work / "inventory.yaml", host_vars=tray_vars)
        out = work / "out"
        argv = [
            "run",
            "--inventory",
            str(inventory),
            "--playbook",
            str(REPO / "playbooks" / "acceptance.yaml"),
        ]
        argv += ["--out", str(out), "--skip-benchmarks", "--format", "json"]
        argv += ["-e", f"diagnose_profile={PROFILE}", *memlock_vars()]
        code = main(argv)
        yield {"code": code, "results": json.loads((out / "results.json").read_text()), "out": out}


def test_the_grace_tray_passes_its_host_stage(run: dict[str, Any]) -> None:
    rows = run["results"]["checks"]
    bad = [(c["id"], c["status"], c["message"]) for c in rows if c["status"] not in ("PASS", "SKIP")]
    assert not bad, bad
    assert run["code"] == 0
    mine = {c["id"]: c for c in rows if c["host"] == TRAY}
    assert mine["gpu.topology"]["status"] == "PASS"
    assert "4x NVIDIA GB200; NVLink on every pair (NV18)" in mine["gpu.topology"]["message"]
    assert mine["gpu.nvlink_domain"]["status"] == "PASS" and mine["gpu.imex"]["status"] == "PASS"


def test_nothing_is_judged_by_an_x86_notion(run: dict[str, Any]) -> None:
    mine = {c["id"]: c for c in run["results"]["checks"] if c["host"] == TRAY}
    assert mine["pci.acs"]["status"] == "PASS", mine["pci.acs"]["message"]
    assert "not between a GPU and a NIC" in mine["pci.acs"]["message"]
    assert mine["host.iommu"]["status"] == "PASS"
    assert "passthrough (3 remapping units" in mine["host.iommu"]["message"]
    assert mine["host.cpu_governor"]["status"] == "SKIP"
    assert mine["host.cpu_governor"]["message"].startswith(f"no cpufreq governor on {TRAY}")
    shown = [c for c in mine.values() if c["status"] != "PASS" and X86.search(c["message"] or "")]
    assert not shown, [(c["id"], c["message"]) for c in shown]


def test_the_host_said_aarch64_and_diagnose_read_it(run: dict[str, Any]) -> None:
    """uname -m is read with the NVIDIA presence probe (the torch remedy on aarch64 depends on it)."""
    probe = (run["out"] / "raw" / TRAY / "nvidia_presence.txt").read_text()
    assert "machine aarch64" in probe.splitlines()
