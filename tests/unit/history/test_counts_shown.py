"""The report's history of two nightly runs of two CPU hosts said "11 PASS" for the first and "13 PASS" for
the second, the run being reported, though both counted 11 PASS and 2 shown on their cron lines: the
second run's counts are taken before it finishes (no ``coverage`` yet), from its rows, and that count took
the two results that judged no figure (``judged: false``) for passes."""

from __future__ import annotations

from typing import Any

from diagnose.history.counts import run_counts


def _night() -> dict[str, Any]:
    return {
        "checks": [
            {"id": "host.reachable", "host": "node1", "status": "PASS"},
            {"id": "host.reachable", "host": "node2", "status": "PASS"},
            {"id": "gpu.memory", "host": "node1", "status": "SKIP"},
            {"id": "fleet.memcpy", "host": None, "status": "PASS", "judged": False},
            {"id": "bench.all_reduce", "host": None, "status": "PASS", "judged": False},
        ],
        "benchmarks": [{"collective": "all_reduce", "status": "PASS"}],
    }


def test_a_run_not_yet_finished_counts_as_the_finished_one_does() -> None:
    before = run_counts(_night())
    finished = {**_night(), "coverage": {"counts": {"PASS": 2, "WARN": 0, "FAIL": 0, "ERROR": 0, "SKIP": 1}}}
    assert (
        before.statuses
        == run_counts(finished).statuses
        == {
            "PASS": 2,
            "WARN": 0,
            "FAIL": 0,
            "ERROR": 0,
            "SKIP": 1,
        }
    )
