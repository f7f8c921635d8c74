"""The soak's rounds in time, and where a restarted controller goes on."""

from __future__ import annotations

from diagnose.campaign.soak import Soak


def test_rounds_fall_every_interval_within_the_hours() -> None:
    soak = Soak(1000.0, hours=0.34, interval_minutes=10)
    assert soak.rounds == 2
    assert [soak.due(n) for n in (1, 2)] == [1000.0, 1600.0]
    assert Soak(0.0, hours=1, interval_minutes=20).rounds == 3
    assert Soak(0.0, hours=0.1, interval_minutes=60).rounds == 1  # a soak shorter than its interval: once


def test_a_restart_goes_on_with_the_first_round_not_finished() -> None:
    soak = Soak(0.0, hours=1, interval_minutes=20)
    assert soak.next_round(set()) == 1
    assert soak.next_round({1}) == 2
    assert soak.next_round({1, 3}) == 2
    assert soak.next_round({1, 2, 3}) is None
    assert Soak.of(soak.to_dict()) == soak
