"""Interval arithmetic behind overlap and exposed time, on hand-computed cases."""

from __future__ import annotations

import random

from diagnose.trace import intervals


def test_merge_joins_overlapping_and_touching_spans_and_drops_empty_ones() -> None:
    spans = [(5.0, 7.0), (0.0, 2.0), (1.0, 3.0), (3.0, 4.0), (9.0, 9.0), (6.0, 6.5)]
    assert intervals.merge(spans) == [(0.0, 4.0), (5.0, 7.0)]


def test_total_clip_overlap_uncovered() -> None:
    a = intervals.merge([(0, 10), (20, 30)])
    b = intervals.merge([(5, 25)])
    assert intervals.total(a) == 20
    assert intervals.clip(a, 5, 25) == [(5, 10), (20, 25)]
    assert intervals.clip(a, 10, 20) == []
    assert intervals.overlap(a, b) == 10
    assert intervals.uncovered(a, b) == 10
    assert intervals.uncovered(b, a) == 10
    assert intervals.overlap(a, []) == 0


def _covered_points(spans: list[tuple[int, int]]) -> set[int]:
    return {t for start, end in spans for t in range(start, end)}


def test_random_spans_agree_with_counting_unit_cells() -> None:
    """Integer spans measured two ways: the merged arithmetic and a plain count of unit cells."""
    rng = random.Random(14)
    for _ in range(200):
        a = [(s, s + rng.randint(0, 9)) for s in (rng.randint(0, 60) for _ in range(rng.randint(0, 8)))]
        b = [(s, s + rng.randint(0, 9)) for s in (rng.randint(0, 60) for _ in range(rng.randint(0, 8)))]
        ma, mb = intervals.merge(a), intervals.merge(b)
        cells_a, cells_b = _covered_points(a), _covered_points(b)
        assert intervals.total(ma) == len(cells_a)
        assert intervals.overlap(ma, mb) == len(cells_a & cells_b)
        assert intervals.uncovered(ma, mb) == len(cells_a - cells_b)
        assert intervals.total(intervals.clip(ma, 20, 40)) == len({t for t in cells_a if 20 <= t < 40})
