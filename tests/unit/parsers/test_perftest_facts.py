"""perftest's result tables against real captured outputs, one case file per output (the runner of
tests/support/facts.py): ``tests/facts/perftest_bw`` and ``tests/facts/perftest_lat``, reading fixtures from
``tests/fixtures/captured/perftest`` (its SOURCE names each origin).
"""

from __future__ import annotations

import pytest

from diagnose.parsers.perftest import GBPS_PER_UNIT, parse_bw, parse_lat
from tests.support.facts import Parse, fact_suite

PARSERS: dict[str, Parse] = {
    "perftest_bw": lambda text, rc: parse_bw(text),
    "perftest_lat": lambda text, rc: parse_lat(text),
}


test_case, test_every_parser_has_cases, test_every_fixture_is_used_and_sourced = fact_suite(
    PARSERS, ("perftest",)
)


def test_mb_per_second_is_mebibytes_in_gigabits() -> None:
    """perftest's MB/sec divides by 2^20: 23317.65 MB/sec of the HDR capture is 195.6 Gb/s of its 200."""
    assert GBPS_PER_UNIT["MB/sec"] * 23317.65 == pytest.approx(195.603, abs=1e-3)
