"""A run's identity: its id, the header its results.json opens with, and the folder it is written to.

``diagnose run``, ``diagnose trace`` and ``diagnose node-check`` all write a results.json, and the history
keys every row by the run id, so ids and folder names are made in this one place (docs/contracts.md: run
ids are ``YYYYMMDDTHHMMSSZ-xxxx``, the default run folder is named after the id). Retention reads the time
back from a dated folder's name with the same format that made it.
"""

from __future__ import annotations

import getpass
import re
import secrets
import socket
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from diagnose import __version__

#: Where a run without ``-o`` or ``--runs-dir`` writes its folder, relative to the working directory.
RUNS_FOLDER = Path("diagnose-runs")
#: The name of a dated folder under ``--runs-dir`` (``2026-11-21T02-00-00Z``): sortable, valid everywhere.
DATED_FORMAT = "%Y-%m-%dT%H-%M-%SZ"


def new_run_id(now: datetime) -> str:
    """UTC time for sorting by eye, plus a random tail: two runs in one second must never share an id
    (the history keys every row by it)."""
    return f"{now.strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(2)}"


def safe_name(name: str) -> str:
    """A host, command or inventory name usable as one path component, whatever the inventory holds."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "_", name).strip(".") or "_"
    return cleaned[:120]


def default_out_dir(run_id: str, source: Path | None) -> Path:
    """A new folder ``./diagnose-runs/<id>-<source>``, created here so that no other run can have it.
    ``source`` names what was assessed (an inventory, a Slurm cluster, ``trace``); None: this machine."""
    stem = safe_name(source.stem) if source else "local"
    folder = RUNS_FOLDER / f"{run_id}-{stem}"
    folder.mkdir(parents=True)
    return folder


def dated_run_dir(root: str | Path, now: datetime | None = None) -> Path:
    """Create ``<root>/<UTC time>/`` (e.g. ``2026-11-21T02-00-00Z``): sortable, and safe on every filesystem.

    Two runs within one second (possible only without the lock) get ``-2``, ``-3``… rather than sharing.
    """
    moment = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    base = Path(root) / moment.strftime(DATED_FORMAT)
    base.parent.mkdir(parents=True, exist_ok=True)
    candidate, attempt = base, 1
    while True:
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            attempt += 1
            candidate = base.with_name(f"{base.name}-{attempt}")


def dated_folder_time(folder: Path) -> datetime | None:
    """The time a :func:`dated_run_dir` folder was made for, read from its name; None for another name."""
    try:
        return datetime.strptime(folder.name[:20], DATED_FORMAT).replace(tzinfo=timezone.utc)
    except ValueError:
        return None


def make_run_dir(run_id: str, source: Path | None, out: str | None, runs_dir: str | None = None) -> Path:
    """The run's folder: a new dated one under ``runs_dir``, else ``out`` (created if missing, reused if
    there), else a new one under ./diagnose-runs/. OSError when it cannot be created."""
    if runs_dir:
        return dated_run_dir(runs_dir)
    if out:
        folder = Path(out)
        folder.mkdir(parents=True, exist_ok=True)
        return folder
    return default_out_dir(run_id, source)


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
