"""The parser of a failed torchrun's stderr against real captured outputs (the runner of tests/support/facts.py).

Cases live in ``tests/facts/torchrun_failure/<case>.json``; their outputs in ``tests/fixtures/captured/torchrun``,
each named with its origin in that folder's SOURCE.
"""

from __future__ import annotations

from diagnose.parsers.torchrun_failure import parse_torchrun_failure
from tests.support.facts import Parse, fact_suite

PARSERS: dict[str, Parse] = {"torchrun_failure": lambda text, rc: parse_torchrun_failure(text)}

test_case, test_every_parser_has_cases, test_every_fixture_is_used_and_sourced = fact_suite(
    PARSERS, ("torchrun",)
)
