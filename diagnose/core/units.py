"""Units as people read them, shared by the benchmark stage and the reports.

One definition, so that a size reads the same in a check's message, results.json and the report's tables
and plots ("1 GiB", never "1073741824 B" in one place and "1.0 GB" in another).
"""

from __future__ import annotations


def human_bytes(nbytes: int) -> str:
    """A byte count in the largest binary unit that divides it exactly: 1 GiB, 64 MiB, 8 KiB, 12 B.

    Sweep sizes are powers of two, so this is exact for them; a size that no unit divides is shown in
    bytes rather than rounded, since a rounded size could name a row that was never measured.
    """
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift} {unit}"
    return f"{nbytes} B"
