"""``diagnose history`` and ``diagnose baseline``: the history database read back, and a run pinned as the
reference later runs of its series are compared with. Both raise ConfigError (exit 2) for a database or
run that cannot be used; a run is named as every command names one (:func:`run_reference`)."""

from __future__ import annotations

from pathlib import Path

from diagnose import history
from diagnose.engine.run_ids import run_reference


def database(path: str | None) -> Path:
    """``--history`` when given, else the user's default database (the one nightly runs write)."""
    return Path(path) if path else history.default_db_path()


def history_text(
    path: str | None,
    check: str | None,
    collective: str | None,
    host: str | None,
    limit: int,
    watch: bool = False,
) -> str:
    """The watch list (``--watch``), the trend of a check or a collective's busbw when one is named, else the
    list of recent runs.

    Reading never creates the database: a ``--history`` that names no file is refused (exit 2); the default
    one not made yet only means no nightly run has recorded anything on this account."""
    db = database(path)
    if path is None and not db.is_file():
        return f"no runs recorded yet: no history at {db} (a nightly run, or a run given --history, makes it)"
    if watch:
        return history.watch_table(db)
    if check or collective:
        return history.history_trend(db, check, collective, host, limit)
    return history.history_list(db, limit)


def pin_baseline(path: str | None, run: str) -> str:
    """Pin the run ``run`` names — its id (a unique prefix is enough), its folder's name or path, a file in
    that folder — and return its full id. A folder on this machine names its run by its results.json; a
    name found nowhere here is looked up in the history, by id and by the folder it recorded."""
    reference = run_reference(run)
    if reference.run_id:
        return history.set_baseline(database(path), reference.run_id)
    return history.set_baseline(database(path), str(reference.folder or run))
