"""Run history: every run's verdict, check results and busbw in an embedded SQLite database.

Nightly runs are only useful against what came before. The database keeps, per run, the hosts and their
versions, every check result and every benchmark row, so a run can be compared with the last good run
(verdict PASS) and with a pinned baseline, and ``diagnose history`` can show a check's or a collective's
trend. The database, not the run folders, is the record: retention may delete folders while the history
of what they measured stays.

One module per job; ``counts`` and ``storage`` are at the bottom and no module imports one above it:

* ``counts`` — a run's counts as the nightly line states them, its regressions apart (pure);
* ``storage`` — the schema and its migrations, opening the database, recording a run, loading a stored run
  back, series keys, pinning a baseline, the references of a run (last good run, baseline);
* ``bands`` — message-size bands and busbw by size, shared by the comparison and the trends;
* ``noise`` — when a busbw change stands out of its series' run-to-run noise (pure);
* ``comparison`` — the comparison rules: snapshots of a run, the findings, ``regressions()``;
* ``trends`` — the tables of ``diagnose history`` and the report's trend data;
* ``retention`` — pruning old runs, and the run folders that folder retention must keep;
* ``durations`` — how long a series' runs took, each stage too, read-only: ``run --check``'s estimate;
* ``stability`` — checks that keep flipping between PASS and FAIL on a host (``history.unstable``);
* ``watch_readings`` — what the watch list reads from a run: a number per physical component and metric,
  keyed by serial, GUID or module serial (pure); ``watch_trend`` — whether one series gets worse (pure);
  ``watch_store`` — the readings night by night, identity (moved, replaced) and the cap; ``watch_list`` —
  ``history.watch`` for each degrading component and ``diagnose history --watch``.

The names below are what the rest of diagnose uses (``from diagnose import history``). The other public
names of ``storage`` and ``bands`` (``open_db``, ``series_key``, ``run_references``, ``busbw_by_size`` ...)
serve the modules of this package; a leading underscore stays private to its own module.
"""

from diagnose.history.comparison import REGRESSION_ID, Regression, regressions
from diagnose.history.retention import PrunedRun, protected_run_dirs, prune
from diagnose.history.stability import UNSTABLE_ID, instability
from diagnose.history.storage import (
    HISTORY_ENV,
    HISTORY_VARIABLE,
    SCHEMA_VERSION,
    check_db_path,
    create_db,
    default_db_path,
    env_db_path,
    find_run,
    inventory_db_path,
    previous_check_observed,
    previous_run_started,
    record_run,
    schema_version,
    set_baseline,
)
from diagnose.history.trends import history_list, history_trend, trend_for_report
from diagnose.history.watch_list import WATCH_ID, WatchFindings, record_watch, watch, watch_table

__all__ = [
    "HISTORY_ENV",
    "HISTORY_VARIABLE",
    "REGRESSION_ID",
    "SCHEMA_VERSION",
    "UNSTABLE_ID",
    "WATCH_ID",
    "PrunedRun",
    "Regression",
    "WatchFindings",
    "check_db_path",
    "create_db",
    "default_db_path",
    "env_db_path",
    "find_run",
    "history_list",
    "history_trend",
    "instability",
    "inventory_db_path",
    "previous_check_observed",
    "previous_run_started",
    "protected_run_dirs",
    "prune",
    "record_run",
    "record_watch",
    "regressions",
    "schema_version",
    "set_baseline",
    "trend_for_report",
    "watch",
    "watch_table",
]
