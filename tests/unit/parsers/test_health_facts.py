"""The node-health parsers against real captured outputs, one case file per output (the runner of tests/support/facts.py).

Cases live in ``tests/facts/<parser>/<case>.json`` and read fixtures from this module's own folders under
``tests/fixtures/captured`` (gpu_query, kernel_log, nvlink, ib_counters, limits), each named with its origin
in that folder's SOURCE.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from diagnose.core.check import ParseError
from diagnose.parsers.gpu_query import parse_gpu_query
from diagnose.parsers.ib_counters import parse_ib_counters
from diagnose.parsers.kernel_log import parse_kernel_log
from diagnose.parsers.limits import parse_memlock
from diagnose.parsers.nvlink import parse_nvlink_errors, parse_nvlink_status
from tests.support.facts import (
    Parse,
    case_params,
    case_paths,
    check_case,
    fixtures_read,
    folders_without_cases,
)
from tests.support.paths import CAPTURED, TESTS

FOLDERS = ("gpu_query", "kernel_log", "nvlink", "ib_counters", "limits")

PARSERS: dict[str, Parse] = {
    "gpu_query": lambda text, rc: parse_gpu_query(text),
    "kernel_log": lambda text, rc: parse_kernel_log(text),
    "nvlink_status": lambda text, rc: parse_nvlink_status(text),
    "nvlink_errors": lambda text, rc: parse_nvlink_errors(text),
    "ib_counters": lambda text, rc: parse_ib_counters(text),
    "memlock": lambda text, rc: parse_memlock(text),
}


@pytest.mark.parametrize("path", case_params(PARSERS))
def test_case(path: Path) -> None:
    check_case(path, PARSERS[path.parent.name])


def test_every_parser_has_cases() -> None:
    missing = folders_without_cases(PARSERS)
    assert not missing, f"parsers without a case: {missing}"


def test_every_fixture_is_used_and_sourced() -> None:
    """Every file in this module's fixture folders is read by a case or a rule test and named in SOURCE."""
    used = fixtures_read(case_paths(PARSERS))
    rules = (TESTS / "unit" / "checks" / "test_health_rules.py").read_text()
    for folder in FOLDERS:
        source = (CAPTURED / folder / "SOURCE").read_text()
        for fixture in sorted((CAPTURED / folder).glob("*.txt")):
            relative = fixture.relative_to(CAPTURED).as_posix()
            assert relative in used or relative in rules, f"no case or rule test reads {relative}"
            assert fixture.name in source, f"{relative} is not named in its folder's SOURCE"


def test_query_names_both_throttle_spellings_alike() -> None:
    """Old drivers print clocks_throttle_reasons.*, new ones clocks_event_reasons.*: one key for both."""
    old = parse_gpu_query((CAPTURED / "gpu_query/pre550_fallback_tier_with_q_fabric.txt").read_text())
    new = parse_gpu_query((CAPTURED / "gpu_query/h200x2_580_healthy.txt").read_text())
    assert old[0]["clocks_event_reasons.gpu_idle"] == new[0]["clocks_event_reasons.gpu_idle"] == "Active"
    assert [r["fabric.state"] for r in old] == ["Completed", "Completed"]


def test_query_errors() -> None:
    assert parse_gpu_query("No devices were found\n") == []
    with pytest.raises(ParseError, match="no CSV header"):
        parse_gpu_query('Field "fabric.state" is not a valid field to query.\n')
