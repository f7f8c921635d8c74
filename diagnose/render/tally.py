"""Results counted once: how many of each status, and how much of the run was measured (its coverage).

The terminal's summary, the report's cover, the Prometheus textfile, JUnit's test cases, the nightly cron
line and results.json's ``coverage`` all count with :func:`results_of`, so one run shows one set of numbers.
A *result* is a row of ``checks``. Each benchmark entry already stands in ``checks`` as its
``bench.<collective>`` row (the benchmark stage writes both), so counting ``benchmarks`` too would count it
twice; an entry without such a row (an older or hand-made file) is a result of its own.

Coverage (docs/contracts.md, "Verdict and coverage"): a result is *measured* when a rule reached a verdict
on it (PASS, WARN or FAIL); SKIP was not measured (not applicable here, for the reason its message gives);
ERROR could not be judged. A PASS row marked ``judged: false`` showed that something works and judged no
figure (the ranks exchanged data over gloo on CPU hosts; two hosts compared without a floor): it is *shown*,
counted apart, neither a PASS nor measured. Items of the operational checklist that no check of the run answers (NOT
COVERED) are not results of the run and are not counted here; the report states them beside the coverage.
A PASS whose measured share is under :data:`LIMITED_BELOW` is a PASS with limited coverage: it still exits 0,
and every place that shows the verdict says "on what was measured".

Counting is not judging: :func:`coverage_of` is a pure function of the rows, so ``diagnose report`` gives an
old results.json without ``coverage`` the same numbers the run would have recorded. The module sits with the
renderers, which read results.json only and may import nothing of the engine; the engine records the same
count through it when a run ends.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from diagnose.catalog.stage_ids import bench_id
from diagnose.core.model import STATUSES

#: The statuses of a result a rule reached a verdict on.
MEASURED = ("PASS", "WARN", "FAIL")
#: A PASS with fewer than this share of its results measured is a PASS with limited coverage.
LIMITED_BELOW = 0.5
OTHER = "other"
#: Why a result was skipped, in a few words, from words of its message (compared in lower case); the first
#: cause that matches is taken. Order matters: "one host without GPU ... no fabric to measure" is a missing
#: GPU, not a missing fabric; "no NVSwitch fabric" is NVLink's; a profile's name (single-node-nvlink) is
#: no cause. Plain substrings, not patterns: a large cluster skips tens of thousands of rows.
SKIP_CAUSES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "no GPU",
        (
            "expects no gpu",
            "without gpu",
            "no gpu on",
            "no nvidia gpu",
            "nvidia-smi is not installed",
            "cpu host",
        ),
    ),
    ("not a pod", ("not a kubernetes pod", "no pod")),
    ("one rank", ("one rank",)),
    ("one host", ("one host", "fewer than two hosts", "no fleet")),
    ("no NVLink", ("no nvlink", "nvlink not judged", "nvswitch")),
    ("no fabric", ("rdma", "no hca", "/dev/infiniband", "fabric", "expected_hca_count")),
    ("tool missing", ("not installed", "command not found", "no time daemon", "no cpufreq")),
    ("not configured", ("not configured", "not enabled", "disabled", "(set ")),
)


def check_rows(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of ``checks`` that are objects (a hand-edited or hostile file may hold anything else)."""
    return [row for row in document.get("checks") or [] if isinstance(row, dict)]


def orphan_benchmarks(document: dict[str, Any]) -> list[dict[str, Any]]:
    """Benchmark entries no ``bench.<collective>`` row of ``checks`` stands for, each as a result of its own."""
    ids = {row.get("id") for row in check_rows(document)}
    return [
        {"id": bench_id(entry.get("collective")), "host": None, **entry}
        for entry in document.get("benchmarks") or []
        if isinstance(entry, dict) and bench_id(entry.get("collective")) not in ids
    ]


def results_of(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's results: every check row, then each benchmark entry no check row stands for."""
    return check_rows(document) + orphan_benchmarks(document)


def status_of(result: dict[str, Any]) -> str:
    """A result's status as counted: one this version does not know could not be judged (ERROR)."""
    status = result.get("status")
    return status if status in STATUSES else "ERROR"


def shown_only(result: dict[str, Any]) -> bool:
    """A PASS that judged no figure (``judged: false``): shown, not counted as a PASS."""
    return result.get("judged") is False and status_of(result) == "PASS"


def skip_cause(message: object) -> str:
    """The short cause of a SKIP (``no GPU``, ``no fabric``, ...), :data:`OTHER` when none matches."""
    text = str(message or "").lower()
    return next((cause for cause, words in SKIP_CAUSES if any(w in text for w in words)), OTHER)


@dataclass
class Coverage:
    """How much of a run was measured; :meth:`to_dict` is results.json's ``coverage``."""

    counts: dict[str, int]  # every status of STATUSES, zeros included; PASS only what was judged
    by_reason: dict[str, int] = field(default_factory=dict)  # skipped results per cause, most first
    shown: int = 0  # PASS rows that judged no figure (``judged: false``)

    @property
    def total(self) -> int:
        return sum(self.counts.values()) + self.shown

    @property
    def measured(self) -> int:
        return sum(self.counts[s] for s in MEASURED)

    @property
    def skipped(self) -> int:
        return self.counts["SKIP"]

    @property
    def unjudged(self) -> int:
        return self.counts["ERROR"]

    @property
    def limited(self) -> bool:
        return self.measured < LIMITED_BELOW * self.total or self.total == 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "measured": self.measured,
            "total": self.total,
            "skipped": self.skipped,
            "unjudged": self.unjudged,
            "shown": self.shown,
            "by_reason": dict(self.by_reason),
            "counts": dict(self.counts),
            "limited": self.limited,
            "limited_below": LIMITED_BELOW,
        }


def coverage_of(document: dict[str, Any]) -> Coverage:
    """The counts and coverage of a results document (recorded or in progress)."""
    results = results_of(document)
    shown = sum(1 for r in results if shown_only(r))
    counts = Counter(status_of(r) for r in results if not shown_only(r))
    causes = Counter(skip_cause(r.get("message")) for r in results if status_of(r) == "SKIP")
    ordered = sorted(causes.items(), key=lambda kv: (kv[0] == OTHER, -kv[1], kv[0]))
    return Coverage({s: counts.get(s, 0) for s in STATUSES}, dict(ordered), shown)


def tally_text(coverage: Coverage, order: tuple[str, ...] = ("FAIL", "ERROR", "WARN", "PASS", "SKIP")) -> str:
    """``2 FAIL, 30 PASS, 3 shown, 9 SKIP``: the non-zero counts, worst first; the shown beside PASS."""
    parts = []
    for status in order:
        if coverage.counts.get(status):
            parts.append(f"{coverage.counts[status]} {status}")
        if status == "PASS" and coverage.shown:
            parts.append(f"{coverage.shown} shown")
    return ", ".join(parts)


def skipped_text(coverage: Coverage) -> str:
    """``47 skipped: no GPU 27, no fabric 8`` (empty when nothing was skipped)."""
    if not coverage.skipped:
        return ""
    causes = ", ".join(f"{cause} {n}" for cause, n in coverage.by_reason.items())
    return f"{coverage.skipped} skipped: {causes}"


def verdict_label(verdict: str, coverage: Coverage) -> str:
    """The verdict as it is shown: ``PASS`` or, with limited coverage, ``PASS, limited coverage``."""
    return f"{verdict}, limited coverage" if verdict == "PASS" and coverage.limited else verdict


def share_text(coverage: Coverage) -> str:
    """The measured share as a whole percentage rounded down (49.9 % reads 49 %, never "50 %" while limited)."""
    return f"{coverage.measured * 100 // max(coverage.total, 1)} %"


def coverage_line(verdict: str, coverage: Coverage) -> str:
    """One line saying what the verdict stands on.

    ``PASS on what was measured: 5 of 52 results (9 %, limited coverage: under 50 %); 47 skipped: no GPU 26,
    no fabric 8`` for a PASS with limited coverage; ``39 of 42 results measured (92 %); 3 skipped: no
    fabric 3`` otherwise.
    """
    counted = f"{coverage.measured} of {coverage.total} results"
    if verdict == "PASS" and coverage.limited:
        limit = f"limited coverage: under {LIMITED_BELOW * 100:.0f} %"
        head = f"PASS on what was measured: {counted} ({share_text(coverage)}, {limit})"
    elif verdict == "INCOMPLETE":
        head = f"{counted} measured before the run was cut short ({share_text(coverage)})"
    else:
        head = f"{counted} measured ({share_text(coverage)})"
    parts = [head, skipped_text(coverage)]
    if coverage.shown:
        parts.append(f"{coverage.shown} shown working, no figure judged")
    if coverage.unjudged:
        parts.append(f"{coverage.unjudged} could not be judged (ERROR)")
    return "; ".join(p for p in parts if p)
