"""A run's identity: its id, the header its results.json opens with, and the folder it is written to.

``diagnose run``, ``diagnose trace`` and ``diagnose node-check`` all write a results.json, and the history
keys every row by the run id, so ids and folder names are made in this one place (docs/contracts.md: run
ids are ``YYYYMMDDTHHMMSSZ-xxxx``, and every run folder diagnose makes starts with its run's id). Whatever
names a run on the command line — the id, a folder's name or its path — is read back to the id here
(:func:`run_reference`). Retention reads the time back from a folder's name: the id's, or the dated name
older nightly runs were given (``2026-11-21T02-00-00Z``), which stays readable.
"""

from __future__ import annotations

import getpass
import json
import re
import secrets
import socket
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from diagnose import __version__, history
from diagnose.core.errors import ConfigError
from diagnose.core.hosts import safe_name

#: Where a run without ``-o`` or ``--runs-dir`` writes its folder, relative to the working directory.
RUNS_FOLDER = Path("diagnose-runs")
#: The record every run folder holds.
RESULTS_FILE = "results.json"
#: What diagnose writes into a run folder: any of them there means a run was written in it.
RUN_OUTPUTS = (RESULTS_FILE, "report.html", "report.pdf", "junit.xml", "diagnose.prom", "raw")
#: The time part of a run id (``20261121T170330Z``).
ID_TIME_FORMAT = "%Y%m%dT%H%M%SZ"
#: A run id (``20261121T170330Z-cb43``), at the start of a folder's name or alone.
RUN_ID = re.compile(r"(\d{8}T\d{6}Z)-([0-9a-f]{4})(?![0-9a-f])")
#: The name nightly folders had before they were named after their run id (``2026-11-21T02-00-00Z``);
#: retention still reads their time.
DATED_FORMAT = "%Y-%m-%dT%H-%M-%SZ"


def new_run_id(now: datetime) -> str:
    """UTC time for sorting by eye, plus a random tail: two runs in one second must never share an id
    (the history keys every row by it)."""
    return f"{now.astimezone(timezone.utc).strftime(ID_TIME_FORMAT)}-{secrets.token_hex(2)}"


def id_in_name(name: str) -> str | None:
    """The run id a folder's name starts with (``20261121T170330Z-cb43-prod`` → its first 21 characters)."""
    match = RUN_ID.match(name)
    return match.group(0) if match else None


def default_out_dir(run_id: str, source: Path | None) -> Path:
    """A new folder ``./diagnose-runs/<id>-<source>``, created here so that no other run can have it.
    ``source`` names what was assessed (an inventory, a Slurm cluster, ``trace``); None: this machine."""
    stem = safe_name(source.stem) if source else "local"
    folder = RUNS_FOLDER / f"{run_id}-{stem}"
    folder.mkdir(parents=True)
    return folder


def dated_run_dir(root: str | Path, run_id: str) -> Path:
    """Create ``<root>/<run id>/`` (e.g. ``20261121T020000Z-cb43``): sortable by time, safe on every
    filesystem, and named by the id the nightly line, the history and ``diagnose baseline`` use."""
    folder = Path(root) / run_id
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.mkdir()
    return folder


def dated_folder_time(folder: Path) -> datetime | None:
    """The time a run folder was made for, read from its name (a run id's, or an older nightly folder's
    ``2026-11-21T02-00-00Z``); None for another name."""
    run_id = id_in_name(folder.name)
    text, form = (run_id[:16], ID_TIME_FORMAT) if run_id else (folder.name[:20], DATED_FORMAT)
    try:
        return datetime.strptime(text, form).replace(tzinfo=timezone.utc)
    except ValueError:
        return None


def folder_run_id(folder: Path) -> str | None:
    """The id of the run whose results.json lies in ``folder``; None when there is none or it names none."""
    try:
        document = json.loads((folder / RESULTS_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    run = document.get("run") if isinstance(document, dict) else None
    run_id = run.get("id") if isinstance(run, dict) else None
    return str(run_id) if run_id else None


def other_run(folder: Path) -> str | None:
    """What in ``folder`` belongs to a run already written there (``run 20261121T170330Z-cb43``,
    ``report.html``), or None when diagnose wrote nothing there: a folder holding other files (a Slurm
    job's output) is no run, and may take one."""
    found = [name for name in RUN_OUTPUTS if (folder / name).exists()]
    if not found:
        return None
    run_id = folder_run_id(folder)
    return f"run {run_id}" if run_id else ", ".join(found)


@dataclass(frozen=True)
class RunReference:
    """What a run named on the command line turned out to be: its folder on this machine when one was
    found (None: look the id up in the history), and its id when known (None: a folder without a
    readable results.json, or a prefix the history must complete)."""

    folder: Path | None
    run_id: str | None


def run_reference(text: str) -> RunReference:
    """Read a run's name as any command takes it: its id (or the start of it), its folder's name or path,
    or a file in that folder (results.json, report.html: what the nightly line prints).

    A bare name is looked for under ./diagnose-runs/: a folder of that name, else the one folder there
    whose name starts with it (several: ConfigError). Nothing found: the text itself is the id (or prefix)
    to look up in the history, which also knows the folders of nightly runs by name.
    """
    path = Path(text).expanduser()
    if path.is_file() and path.name in RUN_OUTPUTS and (path.parent / RESULTS_FILE).is_file():
        path = path.parent
    if path.is_dir():
        return RunReference(path, folder_run_id(path) or id_in_name(path.name))
    if "/" not in text and text:
        exact = RUNS_FOLDER / text
        found = (
            [exact] if exact.is_dir() else sorted(f for f in _folders(RUNS_FOLDER) if f.name.startswith(text))
        )
        if len(found) == 1:
            return RunReference(found[0], folder_run_id(found[0]) or id_in_name(found[0].name))
        if found:
            names = ", ".join(f.name for f in found[:5])
            raise ConfigError(f"{text!r} names {len(found)} run folders under {RUNS_FOLDER}: {names}")
    return RunReference(None, text if RUN_ID.fullmatch(text) else None)


def find_results(run: str, db: str | None = None) -> Path:
    """The results.json of the run ``run`` names: a results.json, a run folder (its path or name), a run id
    or its start — found under ./diagnose-runs/, else in the history (``db``, else the default one), which
    records each run's folder."""
    path = Path(run).expanduser()
    if path.is_file() and path.name not in RUN_OUTPUTS:  # a results file under a name of its own
        return path
    reference = run_reference(run)
    if reference.folder is not None:
        return reference.folder / RESULTS_FILE
    if path.exists() or "/" in run:
        raise ConfigError(f"{run}: no such results file or run folder")
    database = Path(db) if db else history.default_db_path()
    if not database.is_file():
        raise ConfigError(f"{run}: no such results file, run folder or run id (no history at {database})")
    run_id, folder = history.find_run(database, run)
    if folder is None or not (Path(folder) / RESULTS_FILE).is_file():
        raise ConfigError(f"run {run_id}: its folder {folder or '(none recorded)'} holds no {RESULTS_FILE}")
    return Path(folder) / RESULTS_FILE


def _folders(root: Path) -> list[Path]:
    try:
        return [f for f in root.iterdir() if f.is_dir()]
    except OSError:
        return []


def make_run_dir(run_id: str, source: Path | None, out: str | None, runs_dir: str | None = None) -> Path:
    """The run's folder: a new one under ``runs_dir``, else ``out`` (created if missing; an existing one
    only while no run was written there), else a new one under ./diagnose-runs/.

    A folder holding another run is refused (ConfigError, exit 2) rather than mixed: the new results.json
    beside the old run's reports and evidence would make both unreadable. OSError when it cannot be made.
    """
    if runs_dir:
        return dated_run_dir(runs_dir, run_id)
    if out:
        folder = Path(out)
        folder.mkdir(parents=True, exist_ok=True)
        check_out_dir(folder)
        return folder
    return default_out_dir(run_id, source)


def check_out_dir(folder: Path) -> None:
    """ConfigError (exit 2) when ``--out`` holds another run, naming it and the way out; a missing or
    empty folder, or one holding only other files, may take a run."""
    found = other_run(folder)
    if found is not None:
        raise ConfigError(
            f"--out {folder}: holds another run ({found}); give a new or empty folder, or move that "
            "run away first (--runs-dir makes a new folder for every run)"
        )


def run_header(
    run_id: str,
    started: datetime,
    inventory: Path | None,
    playbook: str,
    profile: str | None,
    argv: list[str],
    limit: str | None = None,
) -> dict[str, Any]:
    """The ``run`` object of results.json (schema 1) as a run starts; ``playbook`` is the playbook's name
    (``trace`` for a user's traces)."""
    return {
        "id": run_id,
        "started": started.isoformat(timespec="seconds"),
        "finished": None,
        "tool_version": __version__,
        "inventory": str(inventory) if inventory else "inventory/local.yaml",
        "playbook": playbook,
        "limit": limit,
        "profile": profile,
        "argv": argv,
        "operator": f"{getpass.getuser()}@{socket.gethostname()}",
    }
