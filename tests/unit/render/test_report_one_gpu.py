"""The default run of a real one-GPU machine, rendered: tests/fixtures/results/h100_one_gpu.json (the lent H100
VM, its `_fixture` note says how it was run) is a PASS without FAIL or ERROR, and every output says why what
it did not judge was not judged (issue 23: one rank moves nothing, one GPU has no NVLink peer, no HCA)."""

from __future__ import annotations

import html
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from diagnose.render.load import clean_tree, normalize
from diagnose.render.render import render_from_dict
from tests.support.paths import FIXTURES

RUN = FIXTURES / "results" / "h100_one_gpu.json"
ONE_RANK = (
    "not measured: one rank in all (localhost, one GPU): a collective over one rank moves nothing between "
    "ranks and opens no connection, so there is no bandwidth or transport to judge"
)
#: check id -> the reason its SKIP gives, as the run recorded it.
NOT_JUDGED = {
    "bench.all_reduce": ONE_RANK,
    "nccl.transport": ONE_RANK,
    "gpu.nvlink": "profile single-node-pcie expects no NVLink (expected_nvlink false)",
    "ib.devices": "/dev/infiniband holds only rdma_cm (no uverbs device)",
    "fleet.busbw": "one rank per host (nccl), so a single-node collective moves nothing between ranks",
    "train.overlap": "one rank: DDP exchanges no gradients",
    "infer.kv_transfer": "localhost has one GPU: no pair inside the node",
}


def results() -> dict[str, Any]:
    return normalize(clean_tree(json.loads(RUN.read_text())))


def test_the_one_gpu_machine_passes_with_its_profile_chosen_for_it() -> None:
    run = results()
    assert run["verdict"] == "PASS"
    assert run["run"]["profile"] == "single-node-pcie"
    assert run["run"]["profile_note"].startswith(
        "1 GPU, so no GPU pair to join by NVLink (nvidia-smi topo -m)"
    )
    bad = [(c["id"], c["status"]) for c in run["checks"] if c["status"] in ("FAIL", "ERROR")]
    assert not bad and run["benchmarks"] == [], "one rank in all: nothing is launched, nothing fails"
    statuses = {c["id"]: c for c in run["checks"]}
    for check_id, reason in NOT_JUDGED.items():
        assert statuses[check_id]["status"] == "SKIP" and reason in statuses[check_id]["message"], check_id
    measured = {c["id"] for c in run["checks"] if c["status"] == "PASS"}
    assert {"gpu.topology", "gpu.gemm", "gpu.hbm", "nccl.version"} <= measured


def test_every_output_says_what_was_not_judged_and_why(tmp_path: Path) -> None:
    written = render_from_dict(results(), {"html", "junit", "prom"}, tmp_path, RUN.parent)
    assert {p.name for p in written} == {"report.html", "junit.xml", "diagnose.prom"}
    page = (tmp_path / "report.html").read_text()
    assert ONE_RANK in html.unescape(page)
    junit = ET.fromstring((tmp_path / "junit.xml").read_text())
    assert junit.get("failures") == "0" and junit.get("errors") == "0"
    skipped = junit.find("./testsuite[@name='bench.all_reduce']/testcase/skipped")
    assert skipped is not None and skipped.get("message", "").endswith(ONE_RANK)
