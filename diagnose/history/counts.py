"""A run's counts as the nightly cron line and ``diagnose history`` both state them.

The nightly line counts with :mod:`diagnose.render.tally` (the one count: each benchmark once, its
``bench.<collective>`` row standing for its entry; a status this version does not know is an ERROR) and
lists the run's ``history.regression`` results apart, since each one repeats a result already counted.
The history must say the same numbers, or a reader comparing the mail with ``diagnose history`` sees two
FAIL counts for one run. The store keeps what the engine recorded in results.json's ``coverage`` (the
tally's counts), less the regressions, and their number beside them; where a document has no ``coverage``
yet (the report's trend, written before the run finishes) or a database stored its counts the old way
(every benchmark twice, regressions as FAILs), :func:`count_rows` counts the rows by the same rule. This
package may not import the renderers, hence the rule's few lines here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from diagnose.catalog.stage_ids import HISTORY_REGRESSION, bench_id
from diagnose.core.model import SHOWN, STATUSES


@dataclass(frozen=True)
class RunCounts:
    """Results per status without the regressions, and the number of regressions."""

    statuses: dict[str, int]
    regressions: int


#: The status :func:`run_counts` gives a PASS that judged no figure (``judged: false``): the tally counts it
#: as shown, apart from every status, and so do these counts.


def _status(value: object) -> str:
    """As the tally counts it: a status this version does not know could not be judged (ERROR)."""
    return value if isinstance(value, str) and value in STATUSES else "ERROR"


def count_rows(checks: Iterable[tuple[Any, Any]], benchmarks: Iterable[tuple[Any, Any]]) -> RunCounts:
    """The counts of (check id, status) rows and (collective, status) benchmark entries: every check row
    but the regressions and the shown, and each entry that no ``bench.<collective>`` row stands for."""
    rows = list(checks)
    ids = {check_id for check_id, _ in rows}
    statuses = dict.fromkeys(STATUSES, 0)
    regressions = 0
    for check_id, status in rows:
        if check_id == HISTORY_REGRESSION:
            regressions += 1
        elif status != SHOWN:
            statuses[_status(status)] += 1
    for collective, status in benchmarks:
        if bench_id(collective) not in ids:
            statuses[_status(status)] += 1
    return RunCounts(statuses, regressions)


def _shown(check: Mapping[str, Any]) -> bool:
    return check.get("judged") is False and check.get("status") == "PASS"


def run_counts(results: Mapping[str, Any]) -> RunCounts:
    """The counts of a results document: the tally's, recorded in its ``coverage`` when the run finished,
    less its regressions; the rows counted by the same rule when it has no ``coverage``."""
    checks = [c for c in results.get("checks") or [] if isinstance(c, dict)]
    benchmarks = [b for b in results.get("benchmarks") or [] if isinstance(b, dict)]
    counted = count_rows(
        ((c.get("id"), SHOWN if _shown(c) else c.get("status")) for c in checks),
        ((b.get("collective"), b.get("status")) for b in benchmarks),
    )
    coverage = results.get("coverage")
    recorded = coverage.get("counts") if isinstance(coverage, dict) else None
    if not isinstance(recorded, dict):
        return counted
    statuses = {s: int(recorded.get(s) or 0) for s in STATUSES}
    for check in checks:
        if check.get("id") == HISTORY_REGRESSION:
            statuses[_status(check.get("status"))] -= 1
    return RunCounts(statuses, counted.regressions)
