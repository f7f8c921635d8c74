"""The stage's side of the localization: its variables, the value of a launch, the checks and the record."""

from __future__ import annotations

import pytest

from diagnose.benchmarks.expect import Expectation
from diagnose.benchmarks.setup import Setup
from diagnose.benchmarks.straggler import (
    busbw_of,
    localization_record,
    localize_settings,
    refuse_shared_master,
    straggler_checks,
)
from diagnose.core.errors import ConfigError
from diagnose.core.hosts import Host
from diagnose.core.vars import Vars
from diagnose.localize import Settings, localize
from diagnose.localize.model import edge, ring_edges

TWO = Expectation(340.0, 289.0, 391.0, "two nodes")
NAMES = [f"n{i}" for i in range(12)]


def steady(slow_hosts: dict[str, float], slow_links: dict[tuple[str, str], float], level: float = 340.0):
    """A Measure whose values wobble by a fixed pattern (±1 %), so every run of the test is the same."""
    calls = iter(range(10**6))

    def measure(groups: list[list[str]]) -> list[float | None]:
        out: list[float | None] = []
        for group in groups:
            pace = min(1.0 - slow_hosts.get(h, 0.0) for h in group)
            for link in ring_edges(tuple(group)):
                pace = min(pace, 1.0 - slow_links.get(link, 0.0))
            out.append(level * pace * (1.0 + 0.01 * ((next(calls) % 5) - 2) / 2))
        return out

    return measure


def test_settings_come_from_the_localize_variables() -> None:
    settings = localize_settings(
        Vars(
            {
                "localize_budget_s": "120",
                "localize_concurrency": 8,
                "localize_quorum": 3,
                "localize_repeats": 4,
            }
        )
    )
    assert (settings.budget_s, settings.concurrency, settings.quorum, settings.repeats) == (120.0, 8, 3, 4)
    assert localize_settings(Vars({})) == Settings()
    with pytest.raises(ConfigError, match="repeats"):
        localize_settings(Vars({"localize_repeats": 1}))
    with pytest.raises(ConfigError, match="localize_quorum"):
        localize_settings(Vars({"localize_quorum": "many"}))


def test_a_launch_counts_only_when_it_finished() -> None:
    rows = [{"bytes": 1 << 20, "busbw_gbps": 3.0}, {"bytes": 1 << 30, "busbw_gbps": 250.0}]
    assert busbw_of(rows, "done") == 250.0
    assert busbw_of([{"bytes": 4096, "busbw_gbps": 0.2}], "done") == 0.2  # small sweeps (gloo): the best row
    assert busbw_of(rows, "hung") is None


def test_a_slow_host_is_a_straggler_fail_with_its_measurements() -> None:
    finding = localize(NAMES, steady({"n7": 0.3}, {}), Settings(), clock=iter(range(10**6)).__next__)
    (check,) = straggler_checks(finding, "all_reduce", TWO)
    assert (check.id, check.host, check.status) == ("bench.straggler", "n7", "FAIL")
    assert check.message.startswith("n7 is 30 % slow in all_reduce: slow with 2 distinct partners")
    assert "GB/s = ×0.70 of the healthy" in check.message and "confidence" in check.message
    assert check.observed["deficit_pct"] == pytest.approx(30.0, abs=1.0)
    assert len(check.observed["measurements"]) == 2


def test_a_slow_link_is_a_link_fail_naming_both_ends() -> None:
    finding = localize(
        NAMES, steady({}, {edge("n4", "n5"): 0.25}), Settings(), clock=iter(range(10**6)).__next__
    )
    (check,) = straggler_checks(finding, "all_gather", TWO)
    assert (check.id, check.host, check.status) == ("bench.link", None, "FAIL")
    assert check.message.startswith("the link n4↔n5 is 25 % slow in all_gather: the pair alone is slow")
    assert "while each host is fast with others" in check.message
    assert check.observed["link"] == ["n4", "n5"]


def test_nothing_standing_out_is_a_warning_that_says_where_the_shortfall_is() -> None:
    everywhere = localize(NAMES, steady({}, {}, level=150.0), Settings(), clock=iter(range(10**6)).__next__)
    (check,) = straggler_checks(everywhere, "all_reduce", TWO)
    assert (check.id, check.status) == ("bench.straggler", "WARN")
    assert "cluster-wide" in check.message and "pairs at 150 GB/s" in check.message
    spine = localize(NAMES, steady({}, {}), Settings(), clock=iter(range(10**6)).__next__)
    (check,) = straggler_checks(spine, "all_reduce", TWO)
    assert "only with all nodes together" in check.message


def test_the_record_holds_every_round_and_the_launches() -> None:
    setup = Setup("nccl", 8, [Host(n, vars=Vars({})) for n in NAMES], [])
    settings = Settings()
    finding = localize(NAMES, steady({"n2": 0.2}, {}), settings, clock=iter(range(10**6)).__next__)
    launches = [{"tag": "loc001-n0-n1", "hosts": ["n0", "n1"], "status": "done", "busbw_gbps": 340.0}]
    record = localization_record(finding, settings, "all_reduce", setup, {"nodes": 12}, launches, TWO)
    assert record["finding"]["status"] == "accused"
    assert record["finding"]["accused"][0]["name"] == "n2"
    assert record["finding"]["summary"].startswith("all_reduce: named host n2 (20 % slow)")
    assert record["confidence"] == finding.confidence and record["rounds"] == len(record["steps"])
    first = record["steps"][0]
    assert set(first) >= {"round", "groups", "values", "verdicts", "repeats", "waves", "seconds"}
    assert len(first["groups"]) == len(first["values"]) == len(first["verdicts"])
    assert record["settings"]["quorum"] == 2 and record["launches"] == launches


def test_one_rendezvous_address_for_several_hosts_is_refused_before_any_pair_is_launched() -> None:
    """Four hosts with ``bench_master_addr`` in the group's vars (a lent 2× H200 split in four,
    tests/fixtures/gpu_runs/h200x2-hosts-2026-11-27/shaped4_before_*): the pair led by node3 waited 301 s at
    node1's address for a store nobody opened there, and the search ran out of budget with nothing named."""
    shared = [Host(f"node{i}", vars=Vars({"bench_master_addr": "198.18.0.2"})) for i in range(1, 5)]
    with pytest.raises(ConfigError) as refused:
        refuse_shared_master(shared)
    assert str(refused.value).startswith(
        "bench_master_addr is one value (198.18.0.2) for node1, node2, node3, node4; the search's pair tests"
    )
    assert "set it per host" in str(refused.value)
    own = [Host(f"node{i}", vars=Vars({"bench_master_addr": f"198.18.0.{i + 1}"})) for i in range(1, 5)]
    refuse_shared_master(own)
    refuse_shared_master([Host(f"node{i}") for i in range(1, 5)])  # unset: each host's address


def test_a_search_out_of_budget_warns_with_its_suspects_and_the_evidence_against_each() -> None:
    """Cut short before a quorum, the search still names where to look: a WARN, not a FAIL, that calls
    n7 a suspect and shows the slow pairs against it."""
    finding = localize(
        NAMES, steady({"n7": 0.3}, {}), Settings(budget_s=8.0), clock=iter(range(10**6)).__next__
    )
    assert finding.stopped and not finding.accused
    (check,) = straggler_checks(finding, "all_reduce", TWO)
    assert (check.id, check.status, check.host) == ("bench.straggler", "WARN", None)
    assert "suspects, not accusations: host n7" in check.message
    assert "n7+n8: [" in check.message or "n6+n7: [" in check.message
    (suspect,) = [x for x in check.observed["suspects"] if x["name"] == "n7"]
    assert suspect["kind"] == "host" and suspect["deficit_pct"] > 20
    assert all("n7" in m["hosts"] for m in suspect["measurements"])
