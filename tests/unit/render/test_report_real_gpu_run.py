"""The report of a real `diagnose run` on a lent 4x H200 machine reads truthfully on paper."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from pypdf import PdfReader

from diagnose.render import render
from tests.support.paths import FIXTURES

FIXTURE = FIXTURES / "results" / "h200x4_real_moe.json"


def test_real_single_node_run_reports_nvlink_collectives_and_no_hca(tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    shutil.copy(FIXTURE, results)
    document = json.loads(results.read_text())
    assert document["verdict"] == "PASS"
    written = render(results, {"pdf", "junit"})
    pdf = next(p for p in written if p.suffix == ".pdf")
    text = " ".join(page.extract_text() for page in PdfReader(pdf).pages)
    for collective in ("all_reduce", "reduce_scatter", "all_gather", "all_to_all"):
        assert collective in text
    assert "P2P/CUMEM" in text and "NVIDIA H200" in text
    assert "no HCA" in text  # the IB checks say plainly that there is no fabric, as the profile expects
    junit = next(p for p in written if p.suffix == ".xml").read_text()
    assert "<failure" not in junit


def test_real_tcp_fallback_between_two_gpu_nodes_is_named_on_paper(tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    shutil.copy(FIXTURE.with_name("h200x4_two_halves_socket.json"), results)
    document = json.loads(results.read_text())
    (bench,) = document["benchmarks"]
    assert bench["transport"]["inter_node"] == "NET/Socket" and bench["status"] == "FAIL"
    pdf = next(p for p in render(results, {"pdf"}) if p.suffix == ".pdf")
    text = " ".join(page.extract_text() for page in PdfReader(pdf).pages)
    assert "TCP fallback" in text and "NET/Socket" in text and "nccl.transport" in text


def test_real_2x_h200_run_passes_every_node_health_check_on_paper(tmp_path: Path) -> None:
    """`diagnose run` with the default inventory on the lent 2x H200 (driver 580.159.04, a VM whose fabric
    manager runs on the hypervisor): the node-health section is filled in and nothing fails a healthy GPU."""
    results = tmp_path / "results.json"
    shutil.copy(FIXTURE.with_name("h200x2_real_health.json"), results)
    document = json.loads(results.read_text())
    assert document["verdict"] == "PASS"
    health = {c["id"]: c for c in document["checks"] if c["checklist"] == "H"}
    assert set(health) == {
        "gpu.xid",
        "gpu.memory",
        "gpu.clocks",
        "gpu.pcie",
        "gpu.nvlink",
        "gpu.fabricmanager",
        "ib.counters",
        "host.memlock",
    }
    assert all(c["status"] == "PASS" for i, c in health.items() if i != "ib.counters")
    assert health["ib.counters"]["status"] == "SKIP" and "see ib.devices" in health["ib.counters"]["message"]
    assert "no NVLink error counter moved during the run" in health["gpu.nvlink"]["message"]
    pdf = next(p for p in render(results, {"pdf"}) if p.suffix == ".pdf")
    text = " ".join(" ".join(page.extract_text() for page in PdfReader(pdf).pages).split())
    assert "Node health (beyond the checklist)" in text
    for check_id in sorted(health):
        assert check_id in text, check_id
    assert "managed outside the guest" in health["gpu.fabricmanager"]["message"]
