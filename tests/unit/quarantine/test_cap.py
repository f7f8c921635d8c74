"""The quarantine cap (pure): how many nodes may be out, who is taken first, the cluster-wide finding, and
the settings refused before a run."""

from __future__ import annotations

import pytest

from diagnose.config.host_settings import first_problem
from diagnose.config.quarantine_settings import SETTINGS
from diagnose.core.vars import Vars
from diagnose.quarantine.cap import Candidate, Cap, cap_finding, cap_of, ranked, split


@pytest.mark.parametrize(
    ("cap", "selected", "limit"),
    [
        (Cap(), 20, 2),  # the default: 10 % of the selected nodes
        (Cap(), 3, 1),  # ... and at least one node
        (Cap(), 0, 0),
        (Cap(pct=25), 10, 2),  # 2.5 rounds down
        (Cap(pct=0), 50, 0),  # 0 %: report only, never take a node out
        (Cap(count=5), 20, 5),  # a count alone is the cap (the default share does not shrink it)
        (Cap(count=5, pct=10), 20, 2),  # both: the smaller
        (Cap(count=1, pct=50), 20, 1),
        (Cap(count=30), 20, 20),  # never more than there are
    ],
)
def test_limit(cap: Cap, selected: int, limit: int) -> None:
    assert cap.limit(selected) == limit


def test_describe_names_the_rule_that_applies() -> None:
    assert Cap().describe(20) == "at most 2 of 20 selected nodes (max_quarantine_pct 10 %, the default)"
    assert Cap(count=3, pct=50).describe(4) == (
        "at most 2 of 4 selected nodes (max_quarantine 3; max_quarantine_pct 50 %)"
    )


def test_cap_of_takes_the_strictest_host_setting() -> None:
    hosts = [Vars({"max_quarantine": 4}), Vars({"max_quarantine": "2", "max_quarantine_pct": 30}), Vars({})]
    assert cap_of(hosts) == Cap(2, 30.0)
    assert cap_of([Vars({})]) == Cap()


def test_ranking_is_deterministic_held_then_worst_then_inventory_order() -> None:
    nodes = [
        Candidate("n4", ("gpu.xid",), order=3),
        Candidate("n1", ("gpu.xid",), order=0),
        Candidate("n9", ("gpu.xid", "ib.port_state"), order=8),
        Candidate("n7", ("ib.mtu",), held=True, order=6),
    ]
    assert [c.node for c in ranked(nodes)] == ["n7", "n9", "n1", "n4"]
    taken, withheld = split(reversed(nodes), 2)
    assert [c.node for c in taken] == ["n7", "n9"]
    assert [c.node for c in withheld] == ["n1", "n4"]


def test_finding_passes_within_the_cap_and_fails_beyond_it() -> None:
    within = cap_finding([Candidate("n1", ("gpu.xid",))], [], Cap(), 20, "drained")
    assert (within.id, within.host, within.status) == ("quarantine.cap", None, "PASS")
    assert (
        within.message == "1 failing node drained, within the cap: at most 2 of 20 selected nodes "
        "(max_quarantine_pct 10 %, the default)"
    )
    taken = [Candidate("n1", ("gpu.xid",)), Candidate("n2", ("gpu.xid",))]
    withheld = [Candidate("n3", ("gpu.xid",))]
    beyond = cap_finding(taken, withheld, Cap(count=2), 20, "drained")
    assert beyond.status == "FAIL"
    assert beyond.observed == {
        "failing": 3,
        "limit": 2,
        "selected": 20,
        "taken": ["n1", "n2"],
        "withheld": ["n3"],
    }
    assert "3 nodes failed, more than the quarantine cap" in beyond.message
    assert "2 drained, 1 reported only (n3)" in beyond.message
    assert "shared cause" in beyond.message and beyond.remediation


@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        ("max_quarantine", -1, "max_quarantine must be at least 0"),
        ("max_quarantine", "many", "max_quarantine"),
        ("max_quarantine_pct", 120, "max_quarantine_pct must be between 0 and 100"),
        ("collect_bug_report", "sometimes", "true or false"),
        ("bug_report_timeout_s", 0, "bug_report_timeout_s must be between 1 and 3600"),
        ("bug_report_max_bytes", 10, "bug_report_max_bytes must be at least 1024"),
    ],
)
def test_bad_settings_are_refused_with_their_name(name: str, value: object, words: str) -> None:
    problem = first_problem(Vars({name: value}, host="n1"), SETTINGS)
    assert problem is not None and problem[0] == name
    assert words in problem[1]


def test_good_settings_pass() -> None:
    values = {
        "max_quarantine": 3,
        "max_quarantine_pct": 12.5,
        "collect_bug_report": "yes",
        "bug_report_timeout_s": 120,
        "bug_report_max_bytes": 4096,
    }
    assert first_problem(Vars(values, host="n1"), SETTINGS) is None
