"""The one results stream of a run, written to ``results.json`` as results arrive.

Every addition rewrites ``results.json`` atomically (temporary file + rename, at most once a second while
results pour in), so a crash, a kill or Ctrl-C leaves a valid document holding everything measured so far.
Each check row is turned into JSON text once, as it is added (the row as it stands then); a rewrite joins
those texts, so a run of thousands of rows costs each rewrite a copy of the file rather than encoding
every row again.

The store is also where every row that is not PASS gets its ``action`` (docs/actions.md): whichever stage
emitted it, a row arriving without one takes what its id declares (:mod:`diagnose.catalog.actions`), and
a PASS row carries none.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from json.encoder import encode_basestring
from pathlib import Path
from typing import Any

from diagnose.catalog.actions import action_of, followed_id
from diagnose.catalog.stage_ids import bench_id
from diagnose.core.model import CheckResult, HostRecord
from diagnose.render.causes import causes_json
from diagnose.render.tally import coverage_of

SCHEMA = 1
_MIN_WRITE_INTERVAL_S = 1.0
# Rewrites may take at most this share of the time while results pour in: once one takes longer than
# 50 ms (a document of very many rows), the next waits twenty times as long as it took, not a second.
_MAX_WRITE_SHARE = 0.05


#: The verdict of a run that was interrupted (Ctrl-C, SIGTERM): whatever it found so far, hosts or stages
#: are missing, so it is never PASS; it exits 130 and its findings stay in the record.
INCOMPLETE = "INCOMPLETE"


def verdict_of(
    checks: list[dict[str, Any]], benchmarks: list[dict[str, Any]], interrupted: bool = False
) -> str:
    """INCOMPLETE if the run was cut short; FAIL if anything failed; ERROR if something could not be
    judged; PASS otherwise (WARN allowed). How much a PASS stands on is the document's ``coverage``
    (:mod:`diagnose.render.tally`), beside the verdict rather than in it, so the words and exit codes
    keep their meaning."""
    if interrupted:
        return INCOMPLETE
    statuses = [c["status"] for c in checks] + [b["status"] for b in benchmarks]
    if "FAIL" in statuses:
        return "FAIL"
    if "ERROR" in statuses:
        return "ERROR"
    return "PASS"


def with_action(result: CheckResult) -> CheckResult:
    """``result`` with the action it records: its emitter's choice where it made one (none on PASS)."""
    result.action = action_of(result.id, result.status, result.message or "", result.action)
    return result


def benchmark_action(entry: dict[str, Any]) -> dict[str, Any]:
    """A benchmark entry with the action of its ``bench.<collective>`` result (absent on PASS)."""
    chosen = entry.pop("action", None)
    action = action_of(
        bench_id(entry.get("collective")), str(entry.get("status")), str(entry.get("message") or ""), chosen
    )
    if action is not None:
        entry["action"] = action
    return entry


def to_json(value: Any) -> str:
    """``value`` as results.json spells it: indented by one space, non-ASCII kept, anything else as str."""
    return json.dumps(value, indent=1, ensure_ascii=False, default=str)


def row_json(row: dict[str, Any]) -> str:
    """A check row's text as it stands in the document's ``checks`` list (two levels deep): :func:`to_json`'s
    text, written by :func:`_indented`."""
    return _indented(row, "\n  ")


def _indented(value: Any, indent: str) -> str:
    """``value`` as :func:`to_json` spells it, placed after ``indent`` (a newline and the spaces of its level).

    ``json`` indents only with its pure-Python encoder, a generator per container level, and the rows of
    the host stage (observed values of nested dicts) made that the largest cost of its main thread. This
    spells strings and numbers with ``json``'s own functions and lays containers out as it does; a dict with
    a key that is not a string, and anything else, is left to :func:`to_json`."""
    if isinstance(value, str):
        return encode_basestring(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float) and math.isfinite(value):
        return float.__repr__(value)
    inner = indent + " "
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        items = f",{inner}".join(_indented(item, inner) for item in value)
        return f"[{inner}{items}{indent}]"
    if isinstance(value, dict) and all(type(key) is str for key in value):
        if not value:
            return "{}"
        items = f",{inner}".join(f"{encode_basestring(k)}: {_indented(v, inner)}" for k, v in value.items())
        return f"{{{inner}{items}{indent}}}"
    return to_json(value).replace("\n", indent)  # JSON escapes newlines inside strings: only layout here


def document_json(document: dict[str, Any], check_rows: list[str]) -> Iterator[str]:
    """``document`` as :func:`to_json` writes it, piece by piece (joined, the very text), its ``checks``
    given as the rows' texts (:func:`row_json`). Written as it comes, the file never exists as one string
    in memory: at 16,384 hosts that string alone would be some 60 MB, on top of the rows it is made of."""
    yield "{\n"
    for position, (key, value) in enumerate(document.items()):
        yield f",\n {to_json(key)}: " if position else f" {to_json(key)}: "
        if key != "checks":
            yield to_json(value).replace("\n", "\n ")
        elif not check_rows:
            yield "[]"
        else:
            yield "[\n  "
            for index, row in enumerate(check_rows):
                yield f",\n  {row}" if index else row
            yield "\n ]"
    yield "\n}"


def write_text_atomic(path: Path, text: str | Iterable[str], durable: bool = True) -> None:
    """Replace ``path`` in one rename with ``text`` (or its pieces, written as they come). ``durable`` also
    survives a power cut (fsync), which the many intermediate writes of a run skip: our own crash is what
    they guard against.

    A lone surrogate (``"\\ud800"`` in a hand-made or hostile results.json decodes to one) has no UTF-8 form:
    it is written as its escape, which inside a JSON string is the same value read back."""
    fd, tmp = tempfile.mkstemp(prefix=".results-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as handle:
            handle.writelines([text] if isinstance(text, str) else text)
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
        self._check_json: list[str] = []  # row_json of each of self.checks, in the same order
        # (id, host) -> the first row of that check on that host: a revised verdict (replace_check) finds
        # its row at once, not by a scan of every row (quadratic over a 16,384-host second snapshot)
        self._index: dict[tuple[Any, Any], int] = {}
        self.benchmarks: list[dict[str, Any]] = []
        self.extra: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()  # one writer at a time: the newest document lands last
        self._last_write = 0.0
        self._interval = _MIN_WRITE_INTERVAL_S
        self._timer: threading.Timer | None = None
        self._seq = 0
        self._written_seq = 0
        self._finished = False
        self.flush(force=True)

    def set_host(self, record: HostRecord) -> None:
        with self._lock:
            self.hosts[record.name] = record
        self.flush()

    def add_check(self, result: CheckResult) -> None:
        self.add_checks([result])

    def add_checks(self, results: list[CheckResult]) -> None:
        for result in results:
            self._follow(result)
        rows = [with_action(r).to_dict() for r in results]
        texts = [row_json(row) for row in rows]  # encoded outside the lock: other hosts keep adding
        with self._lock:
            for row in rows:
                self._index.setdefault((row["id"], row["host"]), len(self.checks))
                self.checks.append(row)
            self._check_json.extend(texts)
        self.flush()

    def _follow(self, result: CheckResult) -> None:
        """A history finding about a check takes the action this run recorded for that check on that host
        (gpu.xid's reboot for an Xid 79, not the check's usual reset)."""
        named = followed_id(result.id, result.status, result.message or "")
        if named is None or result.action is not None:
            return
        with self._lock:
            row = next((r for r in self.checks if r["id"] == named and r["host"] == result.host), None)
        if row is not None and row.get("action") not in (None, "none"):
            result.action = row["action"]

    def replace_check(self, result: CheckResult) -> None:
        """Put ``result`` in place of the earlier result of the same check on the same host (a verdict
        revised by a later stage), or add it if there is none."""
        row = with_action(result).to_dict()
        text = row_json(row)
        with self._lock:
            index = self._index.setdefault((row["id"], row["host"]), len(self.checks))
            if index < len(self.checks):
                self.checks[index] = row
                self._check_json[index] = text
            else:
                self.checks.append(row)
                self._check_json.append(text)
        self.flush()

    def annotate_benchmarks(self, statuses: tuple[str, ...], note: str) -> None:
        """Append ``note`` to the message of every benchmark whose status is in ``statuses``."""
        with self._lock:
            for entry in self.benchmarks:
                if entry.get("status") in statuses:
                    entry["message"] = f"{entry.get('message') or ''}{note}"
        self.flush(force=True)

    def add_benchmark(self, entry: dict[str, Any]) -> None:
        benchmark_action(entry)
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
        """The document as it stands. Once the run has finished it carries its ``coverage`` and its
        ``causes``: each a pass over every row that the many intermediate writes of a large run need not
        pay for (a file cut short lacks them, and the report works them out from the rows)."""
        document = {
            "schema": SCHEMA,
            "run": dict(self.run),
            "hosts": [h.to_dict() for h in self.hosts.values()],
            "checks": list(self.checks),
            "benchmarks": list(self.benchmarks),
            "verdict": verdict_of(self.checks, self.benchmarks, bool(self.run.get("interrupted"))),
        }
        document.update(self.extra)
        if self._finished:
            document["coverage"] = coverage_of(document).to_dict()
            document["causes"] = causes_json(document)
        return document

    def flush(self, force: bool = False) -> None:
        """Write results.json now, or soon: callers add results from many threads at once."""
        now = time.monotonic()
        with self._lock:
            wait = self._interval - (now - self._last_write)
            if not force and wait > 0:
                if self._timer is None:  # held back now, written within the interval: never lost
                    self._timer = threading.Timer(wait, self.flush, kwargs={"force": True})
                    self._timer.daemon = True
                    self._timer.start()
                return
            self._last_write = now
            document, rows, seq = self._snapshot_locked()
        took = self._write(document, rows, seq, durable=False)
        with self._lock:
            self._interval = max(_MIN_WRITE_INTERVAL_S, took / _MAX_WRITE_SHARE)

    def finish(self, **run_fields: Any) -> dict[str, Any]:
        with self._lock:
            self.run.update(run_fields)
            self._finished = True
            document, rows, seq = self._snapshot_locked()
        self._write(document, rows, seq)
        return document

    def _snapshot_locked(self) -> tuple[dict[str, Any], list[str], int]:
        """The document to write now, its check rows' texts and its sequence number; a pending delayed
        write becomes moot."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._seq += 1
        document = self._document_locked()
        if not self._finished:
            # Until the run finishes the file says INCOMPLETE: a run killed outright (SIGKILL, the OOM
            # killer, a power cut) leaves its last snapshot, which must not read as a verdict it never
            # reached. The run itself (document()) still sees the verdict so far.
            document["verdict"] = INCOMPLETE
        return document, list(self._check_json), self._seq

    def _write(self, document: dict[str, Any], rows: list[str], seq: int, durable: bool = True) -> float:
        """Write unless a newer snapshot already landed (a timer's flush may lose the race to finish);
        the seconds the write took."""
        with self._write_lock:
            started = time.monotonic()
            if seq > self._written_seq:
                write_text_atomic(self.path, document_json(document, rows), durable)
                self._written_seq = seq
            return time.monotonic() - started
