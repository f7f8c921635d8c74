"""Section 5 of the report from a real run on the lent 2x H200: the KV-transfer chapter and the checklist.

tests/fixtures/results/h200x2_kv_transfer.json: `diagnose run --inventory inventory/local.yaml` with
kv_transfer on, GPU0->GPU1 healthy and GPU1->GPU0 given NCCL_P2P_DISABLE=1.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from pypdf import PdfReader

from diagnose.render import render
from diagnose.render.view_inference import build_inference
from tests.support.paths import FIXTURES

FIXTURE = FIXTURES / "results" / "h200x2_kv_transfer.json"


def test_the_chapter_holds_every_pair_length_and_method() -> None:
    view = build_inference(json.loads(FIXTURE.read_text()))
    assert view is not None and view.backend == "nccl"
    assert view.model.endswith("bfloat16, 16 tokens per block (320 KiB per token)")
    healthy, planted = view.pairs
    assert (healthy.pair, healthy.link, healthy.transport) == ("GPU0->GPU1", "NV18", "P2P/CUMEM")
    assert (planted.transport, planted.env) == ("SHM", "NCCL_P2P_DISABLE=1")
    assert [(r.request, r.method) for r in healthy.rows][:3] == [
        ("1k", "block by block"),
        ("1k", "packed"),
        ("1k", "staged via host"),
    ]
    last = healthy.rows[-1]
    assert (last.request, last.method, last.samples, last.p50, last.gbps) == (
        "32k",
        "packed",
        74,
        "40.164",
        "267.3",
    )
    assert not last.first and healthy.rows[-2].first and healthy.rows[-2].size == "10.74 GB"
    assert [v.id for v in view.verdicts] == ["infer.kv_transfer", "infer.placement", "infer.staging"]
    assert build_inference({"checks": [], "inference": []}) is None


def test_section_5_is_covered_on_paper(tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    shutil.copy(FIXTURE, results)
    written = render(results, {"html", "pdf"})
    html = next(p for p in written if p.suffix == ".html").read_text()
    assert 'id="inference"' in html and "Inference: KV-cache transfer" in html
    pdf = next(p for p in written if p.suffix == ".pdf")
    text = " ".join(page.extract_text() for page in PdfReader(pdf).pages)
    flat = " ".join(text.split())
    for item in (
        "KV-cache transfer latency",
        "Prefill / decode placement topology-aware",
        "KV path not staged",
    ):
        assert item in flat
    assert "NOT COVERED" not in flat.split("Inference trace")[1].split("Node health")[0]
    assert "NCCL moved the blocks through host shared memory" in flat and "7.61×" in flat
    assert "267.3" in flat and "35.1" in flat  # GB/s of the packed 32k transfer, direct and staged


def test_a_packed_row_shows_its_parts_beside_their_references(tmp_path: Path) -> None:
    """Rows since issue 33 carry the message, gather and scatter apart; the fixture's rows (older) do not."""
    document = json.loads(FIXTURE.read_text())
    row = next(
        r for r in document["inference"][0]["rows"] if r["method"] == "packed" and r["tokens"] == 32768
    )
    row["parts"] = {
        "pack": {"p50_us": 5510.0, "p99_us": 5600.0, "gbps": 1948.7, "copy_gbps": 2150.0},
        "wire": {
            "p50_us": 29020.0,
            "p99_us": 29300.0,
            "gbps": 370.0,
            "plain_us": 28950.0,
            "plain_gbps": 370.9,
        },
        "unpack": {"p50_us": 5630.0, "p99_us": 5700.0, "gbps": 1907.2, "copy_gbps": 2140.0},
    }
    view = build_inference(document)
    assert view is not None
    healthy, planted = view.pairs
    assert planted.parts == [], "rows without parts show none"
    assert [
        (p.request, p.part, p.p50, p.gbps, p.reference, p.reference_gbps, p.share) for p in healthy.parts
    ] == [
        ("32k", "gather (prefill GPU)", "5.510", "1948.7", "device copy", "2150.0", "0.91×"),
        ("32k", "message", "29.020", "370.0", "plain send/recv", "370.9", "1.00×"),
        ("32k", "scatter (decode GPU)", "5.630", "1907.2", "device copy", "2140.0", "0.89×"),
    ]
    results = tmp_path / "results.json"
    results.write_text(json.dumps(document))
    html = next(p for p in render(results, {"html"}) if p.suffix == ".html").read_text()
    assert "Packed, part by part" in html and html.count('class="sizes kvparts"') == 1
    assert "plain send/recv" in html and "370.9" in html


def test_older_results_render_without_parts(tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    shutil.copy(FIXTURE, results)
    html = next(p for p in render(results, {"html"}) if p.suffix == ".html").read_text()
    assert "Inference: KV-cache transfer" in html and "Packed, part by part" not in html
