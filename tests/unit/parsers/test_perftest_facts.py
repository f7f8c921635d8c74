"""perftest's result tables against real captured outputs, one case file per output (the runner of
tests/support/facts.py): ``tests/facts/perftest_bw`` and ``tests/facts/perftest_lat``, reading fixtures from
``tests/fixtures/captured/perftest`` (its SOURCE names each origin).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from diagnose.parsers.perftest import GBPS_PER_UNIT, parse_bw, parse_lat
from tests.support.facts import (
    Parse,
    case_params,
    case_paths,
    check_case,
    fixtures_read,
    folders_without_cases,
)
from tests.support.paths import CAPTURED

PARSERS: dict[str, Parse] = {
    "perftest_bw": lambda text, rc: parse_bw(text),
    "perftest_lat": lambda text, rc: parse_lat(text),
}


@pytest.mark.parametrize("path", case_params(PARSERS))
def test_case(path: Path) -> None:
    check_case(path, PARSERS[path.parent.name])


def test_every_parser_has_cases() -> None:
    assert not folders_without_cases(PARSERS)


def test_every_fixture_is_used_and_sourced() -> None:
    used = fixtures_read(case_paths(PARSERS))
    source = (CAPTURED / "perftest" / "SOURCE").read_text()
    for fixture in sorted((CAPTURED / "perftest").glob("*.txt")):
        relative = fixture.relative_to(CAPTURED).as_posix()
        assert relative in used, f"no case reads {relative}"
        assert fixture.name in source, f"{relative} is not named in SOURCE"


def test_mb_per_second_is_mebibytes_in_gigabits() -> None:
    """perftest's MB/sec divides by 2^20: 23317.65 MB/sec of the HDR capture is 195.6 Gb/s of its 200."""
    assert GBPS_PER_UNIT["MB/sec"] * 23317.65 == pytest.approx(195.603, abs=1e-3)
