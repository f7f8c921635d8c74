"""The node-health parsers against real captured outputs, one case file per output (the runner of tests/support/facts.py).

Cases live in ``tests/facts/<parser>/<case>.json`` and read fixtures from this module's own folders under
``tests/fixtures/captured`` (gpu_query, kernel_log, nvlink, ib_counters, limits), each named with its origin
in that folder's SOURCE.
"""

from __future__ import annotations

import pytest

from diagnose.core.check import ParseError
from diagnose.parsers.gpu_query import parse_gpu_query
from diagnose.parsers.ib_counters import parse_ib_counters
from diagnose.parsers.kernel_log import parse_kernel_log
from diagnose.parsers.limits import parse_memlock
from diagnose.parsers.nvlink import parse_nvlink_errors, parse_nvlink_status
from tests.support.facts import Parse, fact_suite
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


test_case, test_every_parser_has_cases, test_every_fixture_is_used_and_sourced = fact_suite(
    PARSERS, FOLDERS, also_read=(TESTS / "unit" / "checks" / "test_health_rules.py",)
)


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
