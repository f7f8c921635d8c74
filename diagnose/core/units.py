"""Numbers as people read them: sizes, rates, durations, shares; shared by the stages and the reports.

One definition, so that a size reads the same in a check's message, results.json and the report's tables
and plots ("1 GiB", never "1073741824 B" in one place and "1.0 GB" in another), and so that every table
shows a missing or non-numeric value the same way (:data:`MISSING`) instead of "None" or "nan GB/s".
"""

from __future__ import annotations

from typing import Any

#: What a cell shows when the results hold no number there (absent, null, a string, a boolean).
MISSING = "—"


def is_number(value: Any) -> bool:
    """Whether ``value`` is a number worth formatting; booleans are not, though Python counts them as ints."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def human_bytes(nbytes: int) -> str:
    """A byte count in the largest binary unit that divides it exactly: 1 GiB, 64 MiB, 8 KiB, 12 B.

    Sweep sizes are powers of two, so this is exact for them; a size that no unit divides is shown in
    bytes rather than rounded, since a rounded size could name a row that was never measured.
    """
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift} {unit}"
    return f"{nbytes} B"


def decimal_bytes(nbytes: int) -> str:
    """A size that is no power of two (a request's KV cache) in decimal units: 10.74 GB, 335.5 MB.

    Such sizes never divide exactly, so they are rounded, in the units bandwidths (GB/s) are quoted in.
    """
    return f"{nbytes / 1e9:.2f} GB" if nbytes >= 1e9 else f"{nbytes / 1e6:.1f} MB"


def tokens_label(tokens: int) -> str:
    """A request length as ``kv_request_tokens`` spells it (k = 1024 tokens): 4096 → ``4k``; 1536 stays."""
    return f"{tokens // 1024}k" if tokens >= 1024 and tokens % 1024 == 0 else str(tokens)


def number(value: Any, digits: int = 2, *, grouped: bool = False, unit: str = "") -> str:
    """``value`` with ``digits`` decimals (thousands grouped on request) and ``unit`` after it; else MISSING."""
    if not is_number(value):
        return MISSING
    return f"{value:,.{digits}f}{unit}" if grouped else f"{value:.{digits}f}{unit}"


def significant(value: Any, digits: int = 3, unit: str = "") -> str:
    """``value`` to ``digits`` significant digits (0.000123, 45.6, 1.23e+04), for figures of any scale."""
    return f"{value:.{digits}g}{unit}" if is_number(value) else MISSING


def signed(value: Any, digits: int = 1, unit: str = "") -> str:
    """A deviation with its sign always shown, and a true minus sign (−10.0 %), so it never reads as a dash."""
    return f"{value:+.{digits}f}{unit}".replace("-", "−") if is_number(value) else MISSING


def percent(fraction: Any, digits: int = 0) -> str:
    """A share given as a fraction (0.37) as a percentage: ``37 %``."""
    return f"{100 * fraction:.{digits}f} %" if is_number(fraction) else MISSING


def gbps(value: Any, digits: int = 1) -> str:
    """A bandwidth in GB/s, the unit nccl-tests and the profiles quote: ``240.9 GB/s``."""
    return number(value, digits, unit=" GB/s")


def duration(seconds: Any) -> str:
    """Seconds as a reader says them: ``41 s``, ``8 min 41 s``."""
    if not is_number(seconds):
        return MISSING
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


def bus_factor(collective: str, ranks: int) -> float:
    """nccl-tests' correction from algorithm to bus bandwidth over ``ranks`` ranks (its doc/PERFORMANCE.md):
    2(n−1)/n for all_reduce, (n−1)/n for reduce_scatter, all_gather and all_to_all, 1 for broadcast and
    sendrecv. busbw = algbw × this factor is what the profiles' expected values are quoted in.

    The controller's copy; the shipped benchmark program keeps its own, since it imports nothing of the
    package, and a test holds both to nccl-tests' figures.
    """
    if collective == "all_reduce":
        return 2.0 * (ranks - 1) / ranks
    if collective in ("reduce_scatter", "all_gather", "all_to_all"):
        return (ranks - 1) / ranks
    if collective in ("broadcast", "sendrecv"):
        return 1.0
    raise ValueError(f"unknown collective {collective!r}")


def noun_for(count: int, noun: str, plural: str | None = None) -> str:
    """``noun`` in the number ``count`` takes (``rank`` for one, ``ranks`` for 0 or 2), for a noun that
    precedes a list (``ranks 0, 1``); ``plural`` is for nouns that do not take a plain ``s`` (``process``)."""
    return noun if count == 1 else plural or f"{noun}s"


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """A count with its noun in the number it takes: ``1 host``, ``2 hosts``, ``0 hosts``, ``1 process``.

    Messages are read as sentences; ``1 hosts`` or ``2 host(s)`` reads as a template that was never filled.
    """
    return f"{count} {noun_for(count, noun, plural)}"
