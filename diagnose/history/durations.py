"""How long a series' runs took on this machine, for ``diagnose run --check`` to estimate from.

The model of :mod:`diagnose.engine.estimate` stands on figures measured on other machines; a head node
shared with a load average of 60 took 7 min for a run the model put at 2. Earlier runs of the same
inventory and playbook carry the machine's own load, fabric and hosts, so where the history holds some,
their wall times are what a maintenance window is booked by, and the model is what a first run has.

The database is opened read-only: a dry run writes nothing, not even a schema migration, and a database
from before stages were recorded (no ``stages`` column) still gives each run's wall time.
"""

from __future__ import annotations

import json
import sqlite3
import statistics
from dataclasses import dataclass
from pathlib import Path

from diagnose.history.storage import epoch_seconds

#: The newest runs of the series read: enough for a median that one odd night does not move, recent
#: enough that last month's hardware does not speak for this one's.
LAST_RUNS = 10
#: The stage a run records when it measured the collectives and what follows them (the engine's progress
#: stage of that name): a run with it and one without take different times.
BENCHMARKS_STAGE = "benchmarks"


@dataclass(frozen=True)
class PastRuns:
    """The wall seconds of the series' newest finished runs (newest first), and the median seconds of each
    stage over the ``staged`` runs among them that recorded their stages, in the order the runs went."""

    seconds: list[float]
    stages: dict[str, float]
    staged: int

    @property
    def median_s(self) -> float:
        return statistics.median(self.seconds)


def _columns(conn: sqlite3.Connection) -> set[str]:
    return {str(row[1]) for row in conn.execute("PRAGMA table_info(runs)")}


def _interrupted(stages: object) -> bool:
    return isinstance(stages, list) and any(isinstance(s, dict) and s.get("interrupted") for s in stages)


def past_runs(
    db_path: str | Path, series: tuple[str, str], last: int = LAST_RUNS, benchmarks: bool | None = None
) -> PastRuns | None:
    """The newest ``last`` finished runs of ``series`` (inventory, playbook as
    :func:`diagnose.history.storage.series_key` makes it), or None without a database or such a run. A run
    cut short (Ctrl-C, SIGTERM) says nothing of how long a whole one takes and is left out; so, where
    ``benchmarks`` says whether the run to estimate measures them, is a run whose recorded stages differ
    (a ``--skip-benchmarks`` pass took seconds of a run of half an hour)."""
    path = Path(db_path)
    if not path.is_file():
        return None
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    try:
        if "runs" not in {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}:
            return None
        stages_column = "stages" if "stages" in _columns(conn) else "NULL"
        rows = conn.execute(
            f"SELECT started, finished, {stages_column} FROM runs WHERE inventory = ? AND playbook = ?"
            " AND finished IS NOT NULL ORDER BY started_ts DESC",
            series,
        ).fetchall()
    except sqlite3.Error:  # a database locked or damaged: the model's estimate stands alone
        return None
    finally:
        conn.close()
    seconds: list[float] = []
    staged: list[list[dict[str, object]]] = []
    for started, finished, stages_text in rows:
        stages = json.loads(stages_text) if stages_text else None
        begin, end = epoch_seconds(started), epoch_seconds(finished)
        if begin is None or end is None or end < begin or _interrupted(stages):
            continue
        if benchmarks is not None and isinstance(stages, list) and _benchmarked(stages) != benchmarks:
            continue
        seconds.append(end - begin)
        if isinstance(stages, list):
            staged.append([s for s in stages if isinstance(s, dict)])
        if len(seconds) == last:
            break
    if not seconds:
        return None
    return PastRuns(seconds, _stage_medians(staged), len(staged))


def _benchmarked(stages: list[object]) -> bool:
    return any(isinstance(s, dict) and s.get("stage") == BENCHMARKS_STAGE for s in stages)


def _stage_medians(runs: list[list[dict[str, object]]]) -> dict[str, float]:
    by_stage: dict[str, list[float]] = {}
    for stages in reversed(runs):  # oldest first, so a stage new in the latest runs comes last
        for entry in stages:
            value = entry.get("seconds")
            if isinstance(value, (int, float)):
                by_stage.setdefault(str(entry.get("stage")), []).append(float(value))
    return {stage: statistics.median(values) for stage, values in by_stage.items()}
