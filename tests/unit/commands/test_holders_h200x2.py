"""Real runs on a lent 2x H200 (tests/fixtures/gpu_runs/h200x2-holders-2026-11-28, README.md there;
docs/validation.md): two hosts carved out of the machine, healthy and then with an idle process outside both
holding 120 GiB of node2's GPU; and one host with NCCL's P2P and SHM transports off.

Every verdict asserted here is made again with today's code from what the runs kept raw: gpu.processes from
each host's compute-apps listing, GPU query and visibility; the train.* rows from the ranks' profiler traces
and the run's own all_reduce sweep; the causes from the rows so judged.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from diagnose.checks import gpu_processes
from diagnose.core.model import CommandOutput
from diagnose.core.vars import Vars
from diagnose.render.causes import causes_json
from diagnose.trace.analyze import analyze_trace
from diagnose.trace.judge import baseline_from_benchmarks, judge_training

CAPTURED = Path(__file__).resolve().parents[2] / "fixtures" / "gpu_runs" / "h200x2-holders-2026-11-28"


def _load(name: str) -> dict[str, Any]:
    return json.loads((CAPTURED / name).read_text())


def _row(document: dict[str, Any], check: str, host: str | None = None) -> dict[str, Any]:
    return next(c for c in document["checks"] if c["id"] == check and c.get("host") == host)


def _processes(host: str) -> Any:
    raw = CAPTURED / "holder_raw" / host
    outputs = {
        name: CommandOutput(stdout=(raw / f"{name}.txt").read_text(), exit_code=0)
        for name in ("compute_apps", "gpu_query", "gpu_visibility")
    }
    host_vars = Vars({}, host=host)
    return gpu_processes.judge(gpu_processes.parse(outputs, host_vars), host_vars)


def _with_processes_rejudged(document: dict[str, Any]) -> dict[str, Any]:
    for row in document["checks"]:
        if row["id"] == "gpu.processes":
            outcome = _processes(row["host"])
            row.update(status=outcome.status, message=outcome.message, observed=outcome.observed)
    return document


def _with_training_rejudged(document: dict[str, Any], traces: str) -> dict[str, Any]:
    analyses = [analyze_trace(path) for path in sorted((CAPTURED / traces).glob("rank*.trace.json.gz"))]
    grad_bytes = document["training"][0]["probe"]["gradient_bytes"]
    baseline = baseline_from_benchmarks(document["benchmarks"], grad_bytes)
    judged = {r.id: r for r in judge_training(analyses, Vars({}), baseline, "training probe")}
    for row in document["checks"]:
        if row["id"] in judged:
            row.update(status=judged[row["id"]].status, message=judged[row["id"]].message)
    return document


@pytest.mark.record
def test_the_holder_was_idle_and_held_what_the_query_shows() -> None:
    """What the machine itself showed (holder.txt): 120 GiB allocated on GPU 1, 0 % busy, nothing on GPU 0.
    Only the harness saw this; no product code reads it, so it is a record of the run, not a product test."""
    lines = (CAPTURED / "holder.txt").read_text().splitlines()
    assert "'held_bytes': 128849018880" in lines[0]
    assert lines[2:] == ["0, 4 MiB, 143771 MiB, 0 %", "1, 123407 MiB, 143771 MiB, 0 %"]


def test_memory_held_by_a_process_no_host_can_see_is_named_with_gpu_and_amount() -> None:
    outcome = _processes("node2")
    assert outcome.status == "FAIL"
    assert outcome.message.startswith(
        "node2: GPU 1 (00000000:00:07.0) 123407 MiB of 143771 MiB held before diagnose started anything, by "
        "no process this host can see"
    )
    assert outcome.observed == [
        {
            "bus_id": "00000000:00:07.0",
            "gpu": "1",
            "utilization_pct": 0,
            "held_mib": 123407,
            "memory_total_mib": 143771,
        }
    ]
    assert outcome.remediation == gpu_processes.UNSEEN_REMEDIATION


def test_the_other_host_sees_the_held_gpu_but_it_is_not_in_its_scope() -> None:
    outcome = _processes("node1")
    assert outcome.status == "PASS"
    assert outcome.message == ("no compute process on the 1 GPU of node1 in scope (CUDA_VISIBLE_DEVICES=0)")


def test_the_holder_is_one_cause_and_the_short_memtest_is_under_it() -> None:
    document = _with_processes_rejudged(_load("holder_results.json"))
    memtest = _row(document, "gpu.memtest", "node2")
    assert memtest["status"] == "WARN" and "tested only 16.11 GB (82 % of free)" in memtest["message"]
    (cause,) = causes_json(document)
    assert (cause["check"], cause["hosts"], cause["status"]) == ("gpu.processes", ["node2"], "FAIL")
    assert ("gpu.memtest", "node2") in {(c["id"], c["host"]) for c in cause["consequences"]}
    assert _row(document, "gpu.memtest", "node1")["status"] == "PASS", "node1's GPU had all its memory"


def test_without_the_memory_rule_the_holder_went_unseen() -> None:
    """The same raw outputs with the GPU query cut to the tier without memory fields (what the run would
    have read before the query asked for them): nothing to see, PASS, as the issue's run reported."""
    raw = CAPTURED / "holder_raw" / "node2"
    header, *rows = (raw / "gpu_query.txt").read_text().splitlines()
    names = [h.strip() for h in header.split(",")]
    keep = [i for i, n in enumerate(names) if not n.startswith("memory.")]
    cut = "\n".join(", ".join(line.split(",")[i].strip() for i in keep) for line in [header, *rows])
    outputs = {
        "compute_apps": CommandOutput(stdout=(raw / "compute_apps.txt").read_text(), exit_code=0),
        "gpu_query": CommandOutput(stdout=cut + "\n", exit_code=0),
        "gpu_visibility": CommandOutput(stdout=(raw / "gpu_visibility.txt").read_text(), exit_code=0),
    }
    host_vars = Vars({}, host="node2")
    assert gpu_processes.judge(gpu_processes.parse(outputs, host_vars), host_vars).status == "PASS"


def test_the_healthy_socket_pair_has_no_training_finding() -> None:
    document = _with_training_rejudged(_load("healthy_results.json"), "healthy_traces")
    for check in ("train.overlap", "train.tail", "train.sync", "train.input"):
        assert _row(document, check)["status"] == "PASS", check
    overlap = _row(document, "train.overlap")["message"]
    assert "rank skew" not in overlap and "waits for" not in overlap
    assert [c["check"] for c in causes_json(document)] == ["bench.all_reduce"], "the unjudged sweep alone"


def test_a_node_with_p2p_and_shm_off_names_the_fabric_under_nccl_env() -> None:
    document = _with_training_rejudged(_load("p2p_results.json"), "p2p_traces")
    overlap = _row(document, "train.overlap")
    assert overlap["status"] == "FAIL"
    assert "a fabric that delivers" not in overlap["message"]
    assert (
        "rank 0: exposed communication on a fabric below its expected rate (the collectives stage failed its "
        "all-reduce under the floor of 289 GB/s busbw)"
    ) in overlap["message"]
    (cause,) = causes_json(document)
    assert cause["check"] == "nccl.env"
    assert {"train.overlap", "bench.all_reduce", "infer.kv_transfer"} <= {
        c["id"] for c in cause["consequences"]
    }
