"""The one results stream of a run, written to ``results.json`` as results arrive.

Every addition rewrites ``results.json`` atomically (temporary file + rename, at most once a second while
results pour in), so a crash, a kill or Ctrl-C leaves a valid document holding everything measured so far.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from diagnose.core.model import CheckResult, HostRecord

SCHEMA = 1
_MIN_WRITE_INTERVAL_S = 1.0


#: The verdict of a run that was interrupted (Ctrl-C, SIGTERM): whatever it found so far, hosts or stages
#: are missing, so it is never PASS; it exits 130 and its findings stay in the record.
INCOMPLETE = "INCOMPLETE"


def verdict_of(
    checks: list[dict[str, Any]], benchmarks: list[dict[str, Any]], interrupted: bool = False
) -> str:
    """INCOMPLETE if the run was cut short; FAIL if anything failed; ERROR if something could not be
    judged; PASS otherwise (WARN allowed)."""
    if interrupted:
        return INCOMPLETE
    statuses = [c["status"] for c in checks] + [b["status"] for b in benchmarks]
    if "FAIL" in statuses:
        return "FAIL"
    if "ERROR" in statuses:
        return "ERROR"
    return "PASS"


def write_json_atomic(path: Path, document: Any, durable: bool = True) -> None:
    """Replace ``path`` in one rename. ``durable`` also survives a power cut (fsync), which the many
    intermediate writes of a run skip: our own crash is what they guard against."""
    fd, tmp = tempfile.mkstemp(prefix=".results-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(document, handle, indent=1, ensure_ascii=False, default=str)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class ResultsStore:
    """Thread-safe collector of hosts, checks and benchmarks for one run."""

    def __init__(self, path: Path, run: dict[str, Any]) -> None:
        self.path = path
        self.run = run
        self.hosts: dict[str, HostRecord] = {}
        self.checks: list[dict[str, Any]] = []
        self.benchmarks: list[dict[str, Any]] = []
        self.extra: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()  # one writer at a time: the newest document lands last
        self._last_write = 0.0
        self._timer: threading.Timer | None = None
        self._seq = 0
        self._written_seq = 0
        self.flush(force=True)

    def set_host(self, record: HostRecord) -> None:
        with self._lock:
            self.hosts[record.name] = record
        self.flush()

    def add_check(self, result: CheckResult) -> None:
        with self._lock:
            self.checks.append(result.to_dict())
        self.flush()

    def add_checks(self, results: list[CheckResult]) -> None:
        with self._lock:
            self.checks.extend(r.to_dict() for r in results)
        self.flush()

    def replace_check(self, result: CheckResult) -> None:
        """Put ``result`` in place of the earlier result of the same check on the same host (a verdict
        revised by a later stage), or add it if there is none."""
        row = result.to_dict()
        with self._lock:
            for index, old in enumerate(self.checks):
                if old["id"] == row["id"] and old["host"] == row["host"]:
                    self.checks[index] = row
                    break
            else:
                self.checks.append(row)
        self.flush()

    def annotate_benchmarks(self, statuses: tuple[str, ...], note: str) -> None:
        """Append ``note`` to the message of every benchmark whose status is in ``statuses``."""
        with self._lock:
            for entry in self.benchmarks:
                if entry.get("status") in statuses:
                    entry["message"] = f"{entry.get('message') or ''}{note}"
        self.flush(force=True)

    def add_benchmark(self, entry: dict[str, Any]) -> None:
        with self._lock:
            self.benchmarks.append(entry)
        self.flush(force=True)  # benchmarks are few and expensive: never hold one back

    def add_record(self, section: str, entry: dict[str, Any]) -> None:
        """Append ``entry`` to the top-level list ``section`` of results.json (``training``,
        ``inference``, ``localization``, ``fleet``): measurements richer than a check's observed value."""
        with self._lock:
            self.extra.setdefault(section, []).append(entry)
        self.flush(force=True)

    def verdict(self) -> str:
        with self._lock:
            return verdict_of(self.checks, self.benchmarks, bool(self.run.get("interrupted")))

    def document(self) -> dict[str, Any]:
        with self._lock:
            return self._document_locked()

    def _document_locked(self) -> dict[str, Any]:
        document = {
            "schema": SCHEMA,
            "run": dict(self.run),
            "hosts": [h.to_dict() for h in self.hosts.values()],
            "checks": list(self.checks),
            "benchmarks": list(self.benchmarks),
            "verdict": verdict_of(self.checks, self.benchmarks, bool(self.run.get("interrupted"))),
        }
        document.update(self.extra)
        return document

    def flush(self, force: bool = False) -> None:
        """Write results.json now, or soon: callers add results from many threads at once."""
        now = time.monotonic()
        with self._lock:
            wait = _MIN_WRITE_INTERVAL_S - (now - self._last_write)
            if not force and wait > 0:
                if self._timer is None:  # held back now, written within the interval: never lost
                    self._timer = threading.Timer(wait, self.flush, kwargs={"force": True})
                    self._timer.daemon = True
                    self._timer.start()
                return
            self._last_write = now
            document, seq = self._snapshot_locked()
        self._write(document, seq, durable=False)

    def finish(self, **run_fields: Any) -> dict[str, Any]:
        with self._lock:
            self.run.update(run_fields)
            document, seq = self._snapshot_locked()
        self._write(document, seq)
        return document

    def _snapshot_locked(self) -> tuple[dict[str, Any], int]:
        """The document to write now and its sequence number; a pending delayed write becomes moot."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._seq += 1
        return self._document_locked(), self._seq

    def _write(self, document: dict[str, Any], seq: int, durable: bool = True) -> None:
        """Write unless a newer snapshot already landed (a timer's flush may lose the race to finish)."""
        with self._write_lock:
            if seq > self._written_seq:
                write_json_atomic(self.path, document, durable)
                self._written_seq = seq
