"""Interval arithmetic on time spans (start, end), the measure behind overlap and exposed time.

Kernels on several streams overlap each other, so "time spent in communication" is the length of the
union of the communication spans, and "exposed communication" is the part of that union that no compute
span covers. Everything here works on merged lists: sorted, disjoint spans, as :func:`merge` returns.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable

Span = tuple[float, float]


def merge(spans: Iterable[Span]) -> list[Span]:
    """The union of ``spans`` as sorted, disjoint spans (touching spans join; empty ones vanish)."""
    merged: list[Span] = []
    for start, end in sorted(s for s in spans if s[1] > s[0]):
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def total(merged: list[Span]) -> float:
    """Length covered by a merged list."""
    return sum(end - start for start, end in merged)


def clip(merged: list[Span], low: float, high: float) -> list[Span]:
    """The part of a merged list inside [low, high]."""
    first = bisect_right(merged, low, key=lambda span: span[1])  # spans that end by ``low`` are out
    out: list[Span] = []
    for start, end in merged[first:]:
        if start >= high:
            break
        start, end = max(start, low), min(end, high)
        if end > start:
            out.append((start, end))
    return out


def overlap(a: list[Span], b: list[Span]) -> float:
    """Length covered by both of two merged lists (a two-pointer walk: linear in their sizes)."""
    i = j = 0
    covered = 0.0
    while i < len(a) and j < len(b):
        start = max(a[i][0], b[j][0])
        end = min(a[i][1], b[j][1])
        if end > start:
            covered += end - start
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return covered


def uncovered(a: list[Span], b: list[Span]) -> float:
    """Length of ``a`` that ``b`` does not cover."""
    return total(a) - overlap(a, b)
