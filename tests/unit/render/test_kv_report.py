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
