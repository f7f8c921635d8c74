"""The GPU stress chapter of a run whose hosts could not import torch: the program never started, so the
chapter is left out and named in the contents' one line, as other chapters with nothing measured are.

The README's first command on a fresh machine without GPU nor torch printed the chapter with "the program
ran on torch CPU with small sizes" above one row reading "0 × ?", "no torch" and "0 s". The stage record
below is the one that run wrote (results.json ``stress``), its paths shortened.
"""

from __future__ import annotations

import json
from typing import Any

from diagnose.render.load import clean_tree, normalize
from diagnose.render.parts import build_parts
from diagnose.render.view import left_out
from tests.support.paths import FIXTURES

NOT_STARTED = {
    "host": "localhost",
    "gpu": None,
    "metric": "stage",
    "device": "cpu",
    "gpus": 0,
    "names": [],
    "torch": None,
    "cuda": None,
    "status": "no torch",
    "message": "torch cannot be imported on localhost (/usr/bin/python3: torch not importable "
    "(ModuleNotFoundError)). This machine has no NVIDIA GPU: install torch's CPU build for that interpreter",
    "seconds": {},
    "wall_s": 0.0,
    "memtest_s": 1.0,
    "burnin_minutes": 0.03333333333333333,
}


def _results(stress: list[dict[str, Any]]) -> dict[str, Any]:
    results = json.loads((FIXTURES / "results" / "cpu_only_local.json").read_text())
    return normalize(clean_tree({**results, "stress": stress}))


def _keys(parts: list[Any]) -> list[str]:
    return [part.key for part in parts]


def test_a_stress_stage_that_never_started_is_left_out() -> None:
    built, empty = build_parts(_results([NOT_STARTED]))
    assert "stress" not in _keys([part for part, _data in built])
    assert "stress" in _keys(empty)
    named = left_out(empty, has_benchmarks=True, has_evidence=True)
    assert (
        "GPUs under load: GEMM, HBM, memory test, SDC, burn-in (not started: no host's Python could import "
        "torch)" in named
    )


def test_a_stress_stage_that_started_and_failed_keeps_its_chapter() -> None:
    failed = {**NOT_STARTED, "status": "failed", "message": "exit 1 after 3 s", "wall_s": 3.0}
    built, _empty = build_parts(_results([failed]))
    assert "stress" in _keys([part for part, _data in built])
