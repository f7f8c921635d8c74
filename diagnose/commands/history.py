"""``diagnose history`` and ``diagnose baseline``: the history database read back, and a run pinned as the
reference later runs of its series are compared with. Both raise ConfigError (exit 2) for a database or
run id that cannot be used."""

from __future__ import annotations

from pathlib import Path

from diagnose import history


def database(path: str | None) -> Path:
    """``--history`` when given, else the user's default database (the one nightly runs write)."""
    return Path(path) if path else history.default_db_path()


def history_text(
    path: str | None, check: str | None, collective: str | None, host: str | None, limit: int
) -> str:
    """The trend of a check or a collective's busbw when one is named, else the list of recent runs."""
    db = database(path)
    if check or collective:
        return history.history_trend(db, check, collective, host, limit)
    return history.history_list(db, limit)


def pin_baseline(path: str | None, run_id: str) -> str:
    """Pin the run ``run_id`` names (a unique prefix is enough); returns its full id."""
    return history.set_baseline(database(path), run_id)
