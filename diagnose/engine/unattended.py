"""What a run needs when nobody watches it: a lock, a time budget, one line for cron mail and retention
(the run folders themselves are named in :mod:`diagnose.engine.run_ids`).

A nightly run starts from cron or a systemd timer. If last night's run still hangs on a host, a second one
must not start beside it (both would benchmark the same GPUs and measure each other); if a host hangs, the
run must still end within its budget; the operator reads one line in a mail, not a log; and the run folders
must not fill the disk over months.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import shutil
import socket
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from diagnose import history
from diagnose.engine.run_ids import RESULTS_FILE, dated_folder_time
from diagnose.render.tally import coverage_of

EXIT_LOCKED = 4


# ---------------------------------------------------------------------------------------------------------
# One run at a time


class LockBusy(Exception):
    """Another run holds the lock. The CLI prints the message and exits with ``exit_code`` (4)."""

    exit_code = EXIT_LOCKED

    def __init__(self, path: Path, holder: Mapping[str, Any] | None) -> None:
        self.path = path
        self.holder = dict(holder or {})
        if self.holder:
            who = f"pid {self.holder.get('pid', '?')} on {self.holder.get('host', '?')}"
            who += f", started {self.holder.get('started', '?')}"
        else:
            who = "a run that is just starting"
        super().__init__(
            f"another diagnose run is in progress ({who}); not starting a second one. "
            f"Lock: {path} (released when that run ends)"
        )


def lock_path(db_path: str | Path) -> Path:
    """The lock sits next to the history database: runs sharing a history are the ones that must not overlap."""
    return Path(f"{db_path}.lock")


class RunLock:
    """An exclusive, non-blocking ``flock`` on a lock file that names its holder.

    The kernel drops the lock when the holding process ends, however it ends, so a crashed or killed run
    never leaves a stale lock behind; the file itself stays (removing it would let two runs lock two
    different files of the same name).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._handle: IO[str] | None = None

    def acquire(self) -> RunLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # "a+" neither truncates nor fails: the holder's note must survive until we own the lock.
        handle = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 - held open for the run's lifetime
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            text = handle.read()
            handle.close()
            try:
                holder = json.loads(text)
            except ValueError:
                holder = None
            raise LockBusy(self.path, holder if isinstance(holder, dict) else None) from None
        note = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "argv": sys.argv,
        }
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps(note) + "\n")
        handle.flush()
        self._handle = handle
        return self

    def release(self) -> None:
        if self._handle is None:
            return
        self._handle.seek(0)
        self._handle.truncate()
        fcntl.flock(self._handle.fileno(), fcntl.LOCK_UN)
        self._handle.close()
        self._handle = None

    def __enter__(self) -> RunLock:
        return self if self._handle is not None else self.acquire()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


def acquire_lock(db_path: str | Path) -> RunLock:
    """Take the run lock of a history database, or raise :class:`LockBusy` at once (never waits)."""
    return RunLock(lock_path(db_path)).acquire()


# ---------------------------------------------------------------------------------------------------------
# Time budget


class Deadline:
    """The run's total time budget, which the engine consults between steps and to cap timeouts.

    ``budget_s=None`` means no budget. Built on a monotonic clock: a clock step at night (NTP) must not end
    or extend a run.
    """

    def __init__(self, budget_s: float | None, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.budget_s = budget_s
        self._end = math.inf if budget_s is None else clock() + budget_s

    def remaining(self) -> float:
        """Seconds left, never negative; ``inf`` without a budget."""
        return max(0.0, self._end - self._clock())

    def expired(self) -> bool:
        return self.remaining() <= 0.0

    def cap(self, timeout_s: float) -> float:
        """A step's timeout, shortened so the step cannot outlive the budget."""
        return min(timeout_s, self.remaining())


# ---------------------------------------------------------------------------------------------------------
# The cron line


def _stem(value: Any) -> str:
    return Path(str(value)).stem if value else ""


def summary_line(
    results: Mapping[str, Any],
    regressions: Iterable[history.Regression],
    report: str | Path | None = None,
    max_listed: int = 3,
) -> str:
    """One line for cron mail: verdict, what failed, the regressions, where the report is.

    e.g. ``diagnose nightly prod: FAIL — 2 FAIL, 1 ERROR, 3 regressions (node07 ib.port_state PASS→FAIL;
    all_reduce ≥64MiB busbw -18%; +1 more), 1 watched (gpu:1652923001234 on node03) — report:
    /srv/nightly/20261121T020000Z-cb43/report.html``: "watched" counts the components on the watch list
    (``history.watch``), named as their series are.
    The regressions are counted apart from the run's other results, which they would otherwise double;
    the rest is counted as everywhere else (:mod:`diagnose.render.tally`): results that judged no figure are
    counted as shown, apart from the passes, and a PASS with limited coverage says so.
    """
    run = results.get("run", {})
    name = " ".join(
        part for part in ("diagnose", _stem(run.get("playbook")), _stem(run.get("inventory"))) if part
    )
    checks = [c for c in results.get("checks", []) if c.get("id") != history.REGRESSION_ID]
    coverage = coverage_of({**results, "checks": checks})
    counts = coverage.counts
    tally = [f"{counts[s]} {s}" for s in ("FAIL", "ERROR", "WARN") if counts[s]]
    if not tally:
        tally = [f"{counts['PASS']} PASS"]
    if coverage.shown:
        tally.append(f"{coverage.shown} shown")
    if results.get("verdict") == "PASS" and coverage.limited:
        tally.append(f"limited coverage ({coverage.measured} of {coverage.total} results measured)")
    found = list(regressions)
    if found:
        listed = [" ".join(r.summary.split()) for r in found[:max_listed]]
        if len(found) > max_listed:
            listed.append(f"+{len(found) - max_listed} more")
        noun = "regression" if len(found) == 1 else "regressions"
        tally.append(f"{len(found)} {noun} ({'; '.join(listed)})")
    else:
        tally.append("no regressions")
    watched = [c for c in results.get("checks", []) if c.get("id") == history.WATCH_ID]
    if watched:
        named = [f"{(c.get('observed') or {}).get('component', '?')} on {c.get('host')}" for c in watched]
        more = [f"+{len(named) - max_listed} more"] if len(named) > max_listed else []
        tally.append(f"{len(watched)} watched ({'; '.join(named[:max_listed] + more)})")
    line = f"{name}: {results.get('verdict', 'ERROR')} — {', '.join(tally)}"
    if report is not None:
        line += f" — report: {report}"
    return line


# ---------------------------------------------------------------------------------------------------------
# Retention of run folders


def diagnose_results(folder: Path) -> dict[str, Any] | None:
    """The folder's results.json if diagnose wrote it (schema, run id, tool version), else None.

    Retention deletes a folder only on this proof: a folder someone pointed ``--out`` at by mistake, or one
    holding anything else, is never ours to remove.
    """
    path = folder / RESULTS_FILE
    if folder.is_symlink() or not folder.is_dir() or path.is_symlink() or not path.is_file():
        return None
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(document, dict) or document.get("schema") != 1:
        return None
    run = document.get("run")
    if (
        not isinstance(run, dict)
        or not run.get("id")
        or "tool_version" not in run
        or "verdict" not in document
    ):
        return None
    return document


def _folder_time(folder: Path, document: Mapping[str, Any]) -> datetime | None:
    started = document["run"].get("started")
    if isinstance(started, str):
        try:
            moment = datetime.fromisoformat(started.replace("Z", "+00:00"))
            return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
        except ValueError:
            pass
    return dated_folder_time(folder)


def prune_run_folders(
    root: str | Path,
    keep_runs: int | None,
    keep_days: float | None,
    protect: Iterable[str | Path] = (),
    now: datetime | None = None,
) -> tuple[list[Path], list[str]]:
    """Delete run folders directly under ``root``: beyond the newest ``keep_runs``, or older than ``keep_days``.

    Only folders holding a results.json written by diagnose count or go; ``protect`` (the current run, the
    pinned baseline, the last good run) is never deleted. Returns the folders removed and, for those that
    could not be (permissions, a busy NFS file), why: a failed clean-up must not fail the night's verdict.
    """
    root_path = Path(root)
    if not root_path.is_dir():
        return [], []
    protected = {Path(p).resolve() for p in protect}
    dated: list[tuple[datetime, Path]] = []
    for folder in root_path.iterdir():
        document = diagnose_results(folder)
        moment = _folder_time(folder, document) if document else None
        if moment is not None:
            dated.append((moment, folder))
    dated.sort(key=lambda item: item[0], reverse=True)
    cutoff = (now or datetime.now(timezone.utc)) - timedelta(days=keep_days) if keep_days else None
    removed, failures = [], []
    for index, (moment, folder) in enumerate(dated):
        if folder.resolve() in protected:
            continue
        if (keep_runs is not None and index >= keep_runs) or (cutoff is not None and moment < cutoff):
            try:
                shutil.rmtree(folder)
            except OSError as exc:
                failures.append(f"{folder}: {exc}")
                continue
            removed.append(folder)
    return removed, failures


@dataclass(frozen=True)
class Retention:
    """What one retention pass removed: run ids forgotten by the history, folders deleted from disk, and
    the folders it could not delete (with the reason), for stderr."""

    pruned_runs: list[history.PrunedRun]
    removed_folders: list[Path]
    failures: list[str]


def retain(
    db_path: str | Path,
    results: Mapping[str, Any],
    runs_root: str | Path,
    current_run_dir: str | Path,
    keep_runs: int | None,
    keep_days: float | None,
    now: datetime | None = None,
) -> Retention:
    """Apply the playbook's ``keep_runs``/``keep_days`` to the history and to the folders under ``runs_root``.

    Call after ``history.record_run``. Both sides keep the pinned baseline and the last good run.
    """
    pruned = history.prune(db_path, results, keep_runs, keep_days, now)
    protect = {*history.protected_run_dirs(db_path), Path(current_run_dir)}
    removed, failures = prune_run_folders(runs_root, keep_runs, keep_days, protect, now)
    return Retention(pruned, removed, failures)
