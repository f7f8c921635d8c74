"""The pair search that names a slow host; measurements are fed in as the stage would."""

from __future__ import annotations

from diagnose.bench.straggler import StragglerSearch


def run(search: StragglerSearch, speed: dict[str, float]) -> None:
    """Play the search to its end: a pair runs at the pace of its slower host."""
    while pairs := search.next_round():
        hosts = [h for pair in pairs for h in pair]
        assert len(hosts) == len(set(hosts)), "pairs of one round must be disjoint"
        for a, b in pairs:
            search.record((a, b), min(speed[a], speed[b]))


def test_one_slow_host_among_six_is_named() -> None:
    speed = {f"n{i}": 340.0 for i in range(6)}
    speed["n3"] = 120.0
    search = StragglerSearch(list(speed), low_gbps=289.0)
    run(search, speed)
    assert search.slow_hosts() == ["n3"]
    assert not search.cluster_wide()
    assert "n2+n3: 120 GB/s" in search.summary()


def test_odd_host_out_is_measured_too() -> None:
    speed = {"a": 340.0, "b": 340.0, "c": 340.0, "d": 340.0, "e": 90.0}
    search = StragglerSearch(list(speed), low_gbps=289.0)
    run(search, speed)
    assert search.slow_hosts() == ["e"]


def test_two_slow_hosts_in_one_pair_are_both_found() -> None:
    speed = {"a": 340.0, "b": 100.0, "c": 110.0, "d": 340.0, "e": 340.0, "f": 340.0}
    search = StragglerSearch(list(speed), low_gbps=289.0)
    run(search, speed)
    assert search.slow_hosts() == ["b", "c"]


def test_everything_slow_is_cluster_wide_not_a_straggler() -> None:
    speed = {h: 150.0 for h in "abcd"}
    search = StragglerSearch(list(speed), low_gbps=289.0)
    run(search, speed)
    assert search.slow_hosts() == []
    assert search.cluster_wide()


def test_a_failed_pair_counts_as_slow() -> None:
    search = StragglerSearch(["a", "b", "c", "d"], low_gbps=289.0)
    assert search.next_round() == [("a", "b"), ("c", "d")]
    search.record(("a", "b"), 330.0)
    search.record(("c", "d"), None)
    assert search.next_round() == [("a", "c"), ("b", "d")]
    search.record(("a", "c"), 330.0)
    search.record(("b", "d"), None)
    assert search.slow_hosts() == ["d"]
    assert search.next_round() == []
