"""nccl-tests output parser on real outputs of several nccl-tests versions (tests/facts/nccl_tests/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diagnose.core.check import ParseError
from diagnose.parsers.nccl_tests import parse_nccl_tests, wrong_elements
from tests.support.paths import FACTS

CASES = sorted((FACTS / "nccl_tests").iterdir())


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_nccl_tests_case(case: Path) -> None:
    expected = json.loads((case / "expected.json").read_text())
    assert expected["source"], "every fixture names where it was captured"
    facts = parse_nccl_tests((case / "input.txt").read_text())
    want = expected["facts"]
    for key in ("version", "ranks", "hosts", "out_of_bounds", "avg_busbw_gbps", "error_column"):
        if key in want:
            assert facts[key] == want[key], key
    if "row_count" in want:
        assert len(facts["rows"]) == want["row_count"]
    if "wrong_elements" in want:
        assert wrong_elements(facts) == want["wrong_elements"]
    for index, row in want.get("rows", {}).items():
        got = facts["rows"][int(index)]
        for key, value in row.items():
            assert got[key] == value, f"row {index} {key}"


def test_output_without_a_table_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="no nccl-tests result table"):
        parse_nccl_tests("all_reduce_perf: error while loading shared libraries: libnccl.so.2\n")
