"""Two NVL72 racks of test-bed trays over real sshd hosts: the planted faults named with tray and rack.

Rack 2 is a full NVL72 rack, 18 trays of 4 GPUs: its tray 3's first GPU failed its fabric registration
(Insufficient Resources) and its tray 2's IMEX daemon is down, so its 17 peers' IMEX tables show it
disconnected. Rack 1, four healthy trays, is a smaller NVLink domain beside it (tests/support/nvl72.py says
what each tray answers). One ``diagnose run`` of
the NVLink-domain checks under the gb200-nvl72 profile; nothing but the two faulty trays may be named.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from diagnose.cli import main
from tests.support.nvl72 import tray, tray_name
from tests.support.testbed import TestBed

pytestmark = pytest.mark.integration

CHECKS = ("gpu.nvlink_domain", "gpu.imex", "nvlink.rack")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    work = tmp_path_factory.mktemp("nvl72")
    faults = {3: "fabric", 2: "imex"}
    with TestBed(work / "bed") as bed:
        bed.add_many(
            [tray(1, i) for i in range(1, 5)]
            + [tray(2, i, trays=18, fault=faults.get(i), lost=2) for i in range(1, 19)]
        )
        racks = {
            tray_name(r, i): {"nvlink_rack": f"rack{r}", "expected_imex_channels": 0}
            for r, trays in ((1, 4), (2, 18))
            for i in range(1, trays + 1)
        }
        inventory = bed.write_inventory(work / "inventory.yaml", host_vars=racks)
        playbook = work / "nvl72.yaml"
        playbook.write_text(f"name: nvl72\ndescription: the NVLink-domain checks\nchecks: {list(CHECKS)}\n")
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
                "diagnose_profile=gb200-nvl72",
            ]
        )
        yield {"code": code, "results": json.loads((out / "results.json").read_text())}


def _rows(run: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in run["results"]["checks"] if c["id"] in CHECKS]


def test_only_the_two_planted_trays_are_named(run: dict[str, Any]) -> None:
    named = {(c["id"], c["host"]) for c in _rows(run) if c["status"] not in ("PASS",) and c["host"]}
    assert named == {
        ("gpu.nvlink_domain", "r2-tray3"),
        ("nvlink.rack", "r2-tray3"),
        ("gpu.imex", "r2-tray2"),
        ("nvlink.rack", "r2-tray2"),
    }, [(c["id"], c["host"], c["status"], c["message"]) for c in _rows(run) if c["status"] != "PASS"]
    assert run["code"] == 1


def test_each_fault_says_its_tray_and_rack(run: dict[str, Any]) -> None:
    rule = {c["host"]: c["message"] for c in _rows(run) if c["id"] == "nvlink.rack" and c["host"]}
    assert rule["r2-tray3"].startswith("tray 3 (r2-tray3) of rack rack2: NVLink fabric registration failed")
    assert "Insufficient Resources" in rule["r2-tray3"]
    assert rule["r2-tray2"].startswith("tray 2 (r2-tray2) of rack rack2: IMEX peer missing")
    assert "its IMEX daemon is not running" in rule["r2-tray2"]
    domain = {c["host"]: c for c in _rows(run) if c["id"] == "gpu.nvlink_domain"}
    assert domain["r2-tray3"]["message"].startswith("tray 3 (r2-tray3) of rack rack2: GPU 00000000:29:00.0")


def test_the_healthy_rack_passes_every_check(run: dict[str, Any]) -> None:
    rack1 = [c for c in _rows(run) if (c["host"] or "").startswith("r1-")]
    assert len(rack1) == 8 and {c["status"] for c in rack1} == {"PASS"}
    imex = {c["host"]: c["message"] for c in rack1 if c["id"] == "gpu.imex"}
    assert "all 4 nodes READY and Connected, domain UP, 0 channels" in imex["r1-tray1"]


def test_the_full_racks_other_sixteen_trays_pass(run: dict[str, Any]) -> None:
    rack2 = [c for c in _rows(run) if (c["host"] or "").startswith("r2-")]
    healthy = [c for c in rack2 if c["host"] not in ("r2-tray2", "r2-tray3")]
    assert len(healthy) == 16 * 2 and {c["status"] for c in healthy} == {"PASS"}, [
        (c["id"], c["host"], c["status"]) for c in healthy if c["status"] != "PASS"
    ]
