"""The training probe's verdicts on real GPU runs, judged again with today's code from what each run recorded
per rank and per step (results.json ``training[].steps``: the analyzer's figures of the ranks' traces) and
from its own all_reduce sweep (``benchmarks``). The causes are grouped again from the rows so judged.

Two slips the recorded runs made:
- on a healthy socket-bound pair (two hosts carved out of one lent H200 machine) ``train.overlap`` WARNed
  "rank skew" from the difference of two medians, where the ranks' per-step communication differed only by
  where one step boundary fell (equal sums, step for step 0, +114, −114, 0 ms);
- with NCCL's P2P and SHM off on one lent 4x H200 node (the sweep 23.4 GB/s, under its 289 GB/s floor) it
  said "poor overlap on a fabric that delivers".
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from diagnose.core.vars import Vars
from diagnose.render.causes import causes_json
from diagnose.trace.analyze import RankAnalysis, StepMetrics, summarize
from diagnose.trace.judge import baseline_from_benchmarks, judge_training

RUNS = Path(__file__).resolve().parents[2] / "fixtures" / "gpu_runs"
_STEP_FIELDS = {f.name for f in dataclasses.fields(StepMetrics)}


def _analysis(record: dict[str, Any]) -> RankAnalysis:
    """One rank as the analyzer left it: its steps as recorded, the summary made again from them."""
    steps = [StepMetrics(**{k: v for k, v in s.items() if k in _STEP_FIELDS}) for s in record["steps"]]
    return RankAnalysis(
        path=record["trace"],
        rank=record["rank"],
        rank_source=record["rank_source"],
        device=record["device"],
        steps=steps,
        summary={**record["summary"], **summarize(steps)},
        not_judged=[],
        skipped={},
        notes=[],
        step_source=record["step_source"],
        world_size=record["world_size"],
        backend=record.get("backend"),
    )


def rejudged(name: str) -> dict[str, Any]:
    """The run's document with its train.* rows judged again by today's code."""
    document = json.loads((RUNS / name).read_text())
    records = document["training"]
    baseline = baseline_from_benchmarks(document["benchmarks"], int(records[0]["summary"]["comm_bytes"]))
    judged = {
        r.id: r for r in judge_training([_analysis(t) for t in records], Vars({}), baseline, "training probe")
    }
    for row in document["checks"]:
        if row["id"] in judged:
            row.update(status=judged[row["id"]].status, message=judged[row["id"]].message)
    return document


def _row(document: dict[str, Any], check: str) -> dict[str, Any]:
    return next(c for c in document["checks"] if c["id"] == check)


@pytest.mark.parametrize(
    "name",
    [
        "h200x2-campaign-2026-11-28/next_step2_results.json",
        "h200x4-2026-11-27/socket_results.json",
    ],
)
def test_no_rank_skew_where_the_steps_differ_only_by_a_boundary(name: str) -> None:
    recorded = json.loads((RUNS / name).read_text())
    assert "rank skew" in _row(recorded, "train.overlap")["message"], "what the run said"
    overlap = _row(rejudged(name), "train.overlap")
    assert "rank skew" not in overlap["message"] and "waits for" not in overlap["message"]


def test_the_healthy_socket_pair_passes_its_training_probe_and_keeps_one_cause() -> None:
    document = rejudged("h200x2-campaign-2026-11-28/next_step2_results.json")
    assert _row(document, "train.overlap")["status"] == "PASS"
    assert "cannot hide behind the 12.52 ms of backward compute" in _row(document, "train.overlap")["message"]
    assert [c["check"] for c in causes_json(document)] == ["bench.all_reduce"]


def test_a_fabric_below_its_floor_is_named_as_the_fabric_not_as_overlap() -> None:
    document = rejudged("h200x4-2026-11-27/p2p_results.json")
    overlap = _row(document, "train.overlap")
    assert overlap["status"] == "FAIL"
    assert "a fabric that delivers" not in overlap["message"]
    assert overlap["message"].startswith(
        "training probe: communication hidden behind compute out of limits on ranks 0, 1, 2, 3; rank 0: "
        "exposed communication on a fabric below its expected rate (the collectives stage failed its "
        "all-reduce under the floor of 289 GB/s busbw)"
    )
    (cause,) = causes_json(document)
    assert cause["check"] == "nccl.env"
    assert {"train.overlap", "bench.all_reduce"} <= {c["id"] for c in cause["consequences"]}


def test_a_rank_held_back_by_a_foreign_process_is_still_told_as_skew() -> None:
    """The lent 4x H200 with a matmul loop on GPU 0 (rank 0 computes 57 ms where the others compute 22): the
    other ranks wait ~29 ms a step for it, step after step, and that is skew, named with rank 0."""
    document = rejudged("h200x4-2026-11-27/hog_results.json")
    overlap = _row(document, "train.overlap")
    assert overlap["status"] != "PASS"
    assert "rank 1 waits for rank 0: 29.63 ms more communication than rank 0" in overlap["message"]
