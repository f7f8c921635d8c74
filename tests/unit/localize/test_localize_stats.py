"""The numbers under the search: Student's t, the pooled noise of repeats, the healthy reference."""

from __future__ import annotations

import math

import pytest

from diagnose.localize.stats import Noise, critical_z, reference, t_quantile, t_tail


@pytest.mark.parametrize(
    ("q", "dof", "table"),
    [(0.975, 5, 2.571), (0.99, 10, 2.764), (0.995, 3, 5.841), (0.999, 30, 3.385), (0.975, 10**6, 1.960)],
)
def test_t_quantiles_match_the_table(q: float, dof: int, table: float) -> None:
    assert t_quantile(q, dof) == pytest.approx(table, rel=0.02)


def test_t_tail_inverts_the_quantile() -> None:
    for dof in (4, 12, 200):
        assert t_tail(t_quantile(0.999, dof), dof) == pytest.approx(0.001, rel=0.25)
    assert t_tail(math.inf, 5) == 0.0


def test_more_tests_and_fewer_repeats_raise_the_critical_value() -> None:
    assert critical_z(0.01, 64, 200) > critical_z(0.01, 4, 200) > critical_z(0.01, 1, 200)
    assert critical_z(0.01, 8, 4) > critical_z(0.01, 8, 400)


def test_noise_is_pooled_around_each_groups_own_mean() -> None:
    """A slow group repeated is as steady as a fast one: the spread is within groups, not between."""
    noise = Noise()
    noise.add([math.log(v) for v in (100.0, 102.0, 98.0)])
    noise.add([math.log(v) for v in (50.0, 51.0, 49.0)])
    assert noise.dof == 4
    assert noise.sigma(0.001) == pytest.approx(0.02, rel=0.05)
    assert Noise().sigma(0.005) == 0.005


def test_reference_stays_healthy_when_most_groups_are_slow() -> None:
    means = [math.log(v) for v in (100.0, 80.0, 79.0, 81.0)]
    ref = reference(means, [0.01] * 4, join_z=3.0)
    assert math.exp(ref.center) == pytest.approx(100.0)


def test_reference_ignores_one_fast_outlier_among_many() -> None:
    values = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2, 99.8, 130.0]
    ref = reference([math.log(v) for v in values], [0.01] * len(values), join_z=3.0)
    assert math.exp(ref.center) == pytest.approx(100.0, rel=0.01)
    assert ref.members == 7


def test_reference_keeps_the_spread_of_healthy_groups_beyond_the_noise() -> None:
    values = [100.0, 104.0, 96.0, 102.0, 98.0, 103.0, 97.0, 101.0, 99.0]
    ref = reference([math.log(v) for v in values], [0.005] * len(values), join_z=4.0)
    assert 0.01 < ref.spread < 0.05
