"""What a run proves about each host, rebuilt with today's code from results recorded on real GPUs
(tests/fixtures/gpu_runs, lent H200 machines split into hosts): the causes are grouped again, never read back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from diagnose.campaign import phases as ph
from diagnose.campaign.evidence import run_evidence

RUNS = Path(__file__).parents[2] / "fixtures" / "gpu_runs"


def load(relative: str) -> dict[str, Any]:
    return json.loads((RUNS / relative).read_text())


def test_a_gpu_held_by_another_job_fails_its_host_alone_and_the_collective_it_slowed_proves_nothing() -> None:
    """Two hosts of a lent 4x H200, a foreign matmul loop on node2's GPU 0: gpu.gemm FAILs on node2; the
    all_reduce between them FAILs with no host named, so neither host passed nor failed a collective."""
    ev = run_evidence(load("h200x4-two-hosts-2026-11-27/hog_results.json"))
    node1, node2 = ev.evidence["node1"], ev.evidence["node2"]
    assert node2[ph.STRESS].verdict == "FAIL"
    assert node2[ph.STRESS].action == "reset_gpu"
    assert node2[ph.STRESS].message.startswith("node2: GPU 0 (00000000:00:08.0) bf16 309.0 TFLOP/s")
    assert node1[ph.STRESS].verdict == "PASS"
    assert ph.COLLECTIVE not in node1 and ph.COLLECTIVE not in node2
    assert ph.FLEET not in node1  # fleet.busbw FAILed cluster-wide: nobody passed the fleet probes
    assert ev.figures["gemm.bf16|NVIDIA H200"] == [  # node2 failed: its figures are no reference
        ("node1 00000000:00:06.0", 685.55),
        ("node1 00000000:00:07.0", 675.701),
    ]
    assert [(c.phase, c.verdict, len(c.hosts)) for c in ev.cluster] == [
        (ph.FULL_SCALE, "FAIL", 2),
        (ph.TRAINING, "FAIL", 2),
    ]


def test_the_straggler_search_names_the_one_host_that_failed_the_collective() -> None:
    """Four hosts sharing two H200s, node3 shaped to a slow link: bench.straggler names node3, whose slowness
    explains the collective's FAIL; the three others took part in it as they should."""
    ev = run_evidence(load("h200x2-hosts-2026-11-27/shaped4_results.json"))
    assert ev.evidence["node3"][ph.COLLECTIVE].verdict == "FAIL"
    assert ev.evidence["node3"][ph.COLLECTIVE].message.startswith("node3 is 45 % slow in all_reduce")
    for host in ("node1", "node2", "node4"):
        assert ev.evidence[host][ph.COLLECTIVE].verdict == "PASS"
        assert ev.evidence[host][ph.COLLECTIVE].nodes == 4
        assert ev.evidence[host][ph.HOST].verdict == "PASS"


def test_a_healthy_collective_counts_for_every_host_with_its_node_count() -> None:
    ev = run_evidence(load("h200x2-hosts-2026-11-27/healthy4_results.json"))
    assert {h: e[ph.COLLECTIVE].nodes for h, e in ev.evidence.items()} == dict.fromkeys(
        ("node1", "node2", "node3", "node4"), 4
    )
    assert list(ev.figures) == ["busbw|all_reduce|4"]


def test_an_interrupted_run_proves_its_failures_only() -> None:
    doc = load("h100-2026-11-25/interrupted_results.json")
    ev = run_evidence(doc)
    assert ev.interrupted
    assert all(not e.passed for by_phase in ev.evidence.values() for e in by_phase.values())
    assert ev.cluster == [] and ev.figures == {}


def test_a_one_node_sweep_proves_no_cross_node_collective() -> None:
    ev = run_evidence(load("h200x2-hosts-2026-11-27/ref2_results.json"))
    assert all(e[ph.COLLECTIVE].nodes == 2 for e in ev.evidence.values())
    single = run_evidence(json.loads((RUNS.parent / "results" / "h200_local.json").read_text()))
    assert ph.COLLECTIVE not in single.evidence.get("localhost", {})
