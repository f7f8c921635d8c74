"""The report of a real `diagnose run` on a lent 4x H200 machine reads truthfully on paper."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from pypdf import PdfReader

from diagnose.report import render

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "results" / "h200x4_real_moe.json"


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
