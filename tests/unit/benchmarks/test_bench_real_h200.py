"""The shipped single-node profile judges a real 4x H200 sweep as healthy, and a slowed one as not."""

from __future__ import annotations

import json

from diagnose.benchmarks.expect import expected_busbw, judge_busbw, large_message_busbw
from diagnose.config.profile_files import load_profile
from diagnose.core.vars import Vars
from tests.support.paths import FIXTURES

REAL_RUN = FIXTURES / "results" / "h200x4_real_moe.json"


def test_every_collective_of_the_real_run_is_within_the_profile_range() -> None:
    profile = Vars(load_profile("single-node-nvlink").vars, host="vm")
    for bench in json.loads(REAL_RUN.read_text())["benchmarks"]:
        busbw, at = large_message_busbw(bench["rows"])
        expectation = expected_busbw(bench["collective"], 1, bench["ranks"], profile)
        status, message = judge_busbw(bench["collective"], busbw, at, 1, expectation, "nccl")
        assert status == "PASS" and "within the normal range" in message, message
        slowed, _ = judge_busbw(bench["collective"], busbw * 0.6, at, 1, expectation, "nccl")
        assert slowed == "FAIL"
