"""Numbers as people read them (diagnose.core.units): one spelling everywhere, one mark for "no number"."""

from __future__ import annotations

from diagnose.core.units import (
    MISSING,
    decimal_bytes,
    duration,
    gbps,
    human_bytes,
    number,
    percent,
    signed,
    significant,
    tokens_label,
)


def test_sizes() -> None:
    assert [human_bytes(n) for n in (12, 8 << 10, 64 << 20, 1 << 30, 3 << 29)] == [
        "12 B",
        "8 KiB",
        "64 MiB",
        "1 GiB",
        "1536 MiB",
    ]
    assert human_bytes(1000) == "1000 B", "a size no unit divides is not rounded"
    assert (decimal_bytes(10_737_418_240), decimal_bytes(335_544_320)) == ("10.74 GB", "335.5 MB")
    assert [tokens_label(n) for n in (512, 1024, 1536, 32768)] == ["512", "1k", "1536", "32k"]


def test_numbers_rates_and_shares() -> None:
    assert (number(1234.5678), number(1234.5678, 1, grouped=True), number(3, 0, unit=" %")) == (
        "1234.57",
        "1,234.6",
        "3 %",
    )
    assert (significant(242.24), significant(0.000123456), gbps(240.87)) == ("242", "0.000123", "240.9 GB/s")
    assert (signed(-10.04, unit=" %"), signed(2.0)) == ("−10.0 %", "+2.0")
    assert (percent(0.37), percent(0.98765, 2)) == ("37 %", "98.77 %")


def test_durations() -> None:
    assert (duration(41.4), duration(521), duration(3600)) == ("41 s", "8 min 41 s", "60 min 00 s")


def test_anything_but_a_number_shows_as_missing() -> None:
    for value in (None, "12", True, [1]):
        shown = (
            number(value),
            significant(value),
            signed(value),
            percent(value),
            gbps(value),
            duration(value),
        )
        assert shown == (MISSING,) * 6
