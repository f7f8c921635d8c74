"""Only the GPUs CUDA sees are counted, launched and judged, and the run says so (issue 33).

On the lent 4x H200 node `CUDA_VISIBLE_DEVICES=0 diagnose run` counted four GPUs from nvidia-smi, started four
ranks, and three died on a GPU they could not see. Here real sshd hosts print the healthy 8x H100 node's
nvidia-smi (and, cut to its first four GPUs, a 4-GPU board's: tests/support/shapekit.py) with the variable set
in their login environment, which the host's commands and the benchmark ranks share: one host sees GPU 0 only,
the other is told a GPU it does not have.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from diagnose.cli import main
from tests.support.hostkit import healthy_h100
from tests.support.shapekit import cut_to_gpus
from tests.support.testbed import TestBed

pytestmark = pytest.mark.integration

PLAYBOOK = """name: visible
description: the GPU census, then a tiny all_reduce over the GPUs CUDA sees
checks: [gpu.topology]
benchmarks:
  enabled: true
  collectives: [all_reduce]
  min_bytes: 4K
  max_bytes: 4K
  warmup_iters: 1
  iters: 2
  straggler_isolation: false
"""


def run(testbed: TestBed, tmp_path: Path, names: list[str]) -> dict:
    inventory = testbed.write_inventory(tmp_path / "inv.yaml", [testbed.hosts[n] for n in names])
    playbook = tmp_path / "visible.yaml"
    playbook.write_text(PLAYBOOK)
    out = tmp_path / "out"
    main(
        [
            "run",
            "-i",
            str(inventory),
            "--playbook",
            str(playbook),
            "-o",
            str(out),
            "--format",
            "json",
            "--quiet",
        ]
    )
    return json.loads((out / "results.json").read_text())


def by_id(results: dict, check: str, host: str | None) -> dict:
    return next(c for c in results["checks"] if c["id"] == check and c["host"] == host)


def test_one_visible_gpu_is_one_rank_and_a_gpu_the_host_lacks_is_a_finding(
    testbed: TestBed, tmp_path: Path
) -> None:
    testbed.add_many(
        [
            replace(healthy_h100("cvd0"), env={"CUDA_VISIBLE_DEVICES": "0"}),
            replace(cut_to_gpus("cvd7", 4), env={"CUDA_VISIBLE_DEVICES": "7"}),
        ]
    )
    results = run(testbed, tmp_path, ["cvd0", "cvd7"])
    scoped = by_id(results, "gpu.topology", "cvd0")
    assert scoped["status"] == "PASS", scoped["message"]
    assert (
        "1 of 8 GPUs visible (CUDA_VISIBLE_DEVICES=0); GPUs 1, 2, 3, 4, 5, 6, 7 not in scope"
        in scoped["message"]
    )
    wrong = by_id(results, "gpu.topology", "cvd7")
    assert (wrong["status"], wrong["action"]) == ("FAIL", "check_config")
    assert (
        "CUDA programs see none of the 4 GPUs: 0 of 4 GPUs visible (CUDA_VISIBLE_DEVICES=7)"
        in wrong["message"]
    )
    # One GPU in scope in all: one rank, which moves nothing, so nothing is launched; the note says why.
    sweep = by_id(results, "bench.all_reduce", None)
    assert sweep["status"] == "SKIP", sweep["message"]
    assert sweep["message"].startswith("not measured: one rank in all (cvd0, one GPU)")
    assert "cvd0: 1 of 8 GPUs visible (CUDA_VISIBLE_DEVICES=0)" in sweep["message"]
    assert results["benchmarks"] == []
