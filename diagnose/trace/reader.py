"""Stream the events of a torch.profiler trace (Kineto's Chrome-trace JSON, plain or gzip) one at a time.

A trace of a real job runs to hundreds of MB; ``json.load`` of one takes several times its size in memory
(bench/trace_speed.py measures it). Kineto writes one top-level object whose ``traceEvents`` array holds
every event, with a few small keys around it (``distributedInfo``, ``deviceProperties``, ...). So this
reader walks the top level itself and hands each array element to the standard library's C decoder
(``JSONDecoder.raw_decode``) as soon as it is whole: memory stays at one read window plus what the caller
keeps, and the per-event decode runs at C speed. The Chrome "JSON Array Format" (a bare array of events)
is read the same way.

Any JSON fault is reported as :class:`TraceFormatError` with the file, line and column, because that is
what a user needs to find a truncated or hand-edited trace.
"""

from __future__ import annotations

import codecs
import gzip
import json
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

_CHUNK_BYTES = 1 << 20
# An event larger than this is not a trace event: stop growing the window and report the fault instead of
# reading the rest of a broken file into memory.
_MAX_VALUE_CHARS = 64 << 20
_WHITESPACE = re.compile(r"[ \t\n\r]*")
# The separator between two elements, with the space on both sides: one C-level match per event.
_SEPARATOR = re.compile(r"[ \t\n\r]*([,\]])[ \t\n\r]*")
_GZIP_MAGIC = b"\x1f\x8b"


class TraceFormatError(ValueError):
    """The file is not a readable trace; ``str()`` is one line naming the file and where it went wrong."""

    def __init__(self, path: Path, message: str, line: int | None = None, column: int | None = None) -> None:
        self.path = path
        self.line = line
        self.column = column
        self.message = message
        where = f"{path}:{line}:{column}" if line is not None else str(path)
        super().__init__(f"{where}: {message}")


class _Window:
    """A sliding window of decoded text over the file, with enough bookkeeping to name line and column."""

    def __init__(self, handle: IO[bytes], path: Path) -> None:
        self.handle = handle
        self.path = path
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.text = ""
        self.pos = 0
        self.eof = False
        self.lines_before = 0  # newlines in the text already dropped from the window
        self.column_base = 0  # characters since the last dropped newline, when the window starts mid-line
        self.bytes_read = 0

    def fill(self) -> bool:
        """Drop what was consumed and read one more chunk; False at end of file."""
        if self.eof:
            return False
        dropped = self.text[: self.pos]
        newlines = dropped.count("\n")
        if newlines:
            self.lines_before += newlines
            self.column_base = len(dropped) - dropped.rfind("\n") - 1
        else:
            self.column_base += len(dropped)
        try:
            raw = self.handle.read(_CHUNK_BYTES)
        except (OSError, EOFError, zlib.error) as exc:  # a truncated or corrupt gzip stream
            raise TraceFormatError(self.path, f"cannot read: {exc}") from None
        self.bytes_read += len(raw)
        try:
            chunk = self.decoder.decode(raw, final=not raw)
        except UnicodeDecodeError as exc:
            raise TraceFormatError(
                self.path, f"not UTF-8 text near byte {self.bytes_read - len(raw) + exc.start}"
            ) from None
        self.text = self.text[self.pos :] + chunk
        self.pos = 0
        if not raw:
            self.eof = True
        return bool(raw)

    def where(self, index: int) -> tuple[int, int]:
        """(line, column), both from 1, of a position in the window."""
        before = self.text[:index]
        newlines = before.count("\n")
        if newlines:
            return self.lines_before + newlines + 1, index - before.rfind("\n")
        return self.lines_before + 1, self.column_base + index + 1

    def fault(self, message: str, index: int | None = None) -> TraceFormatError:
        line, column = self.where(self.pos if index is None else index)
        return TraceFormatError(self.path, message, line, column)

    def skip_space(self) -> str:
        """The next significant character ('' at end of file), left unconsumed."""
        while True:
            self.pos = _WHITESPACE.match(self.text, self.pos).end()
            if self.pos < len(self.text):
                return self.text[self.pos]
            if not self.fill():
                return ""

    def expect(self, chars: str, what: str) -> str:
        found = self.skip_space()
        if not found or found not in chars:
            shown = repr(found) if found else "end of file"
            raise self.fault(f"expected {what}, found {shown}")
        self.pos += 1
        return found

    def value(self, decoder: json.JSONDecoder) -> Any:
        """Decode the JSON value at the cursor, reading more of the file until it is whole."""
        self.skip_space()
        while True:
            try:
                value, end = decoder.scan_once(self.text, self.pos)  # raw_decode without its wrapper
            except StopIteration:
                if self.eof or len(self.text) - self.pos > _MAX_VALUE_CHARS:
                    try:
                        decoder.raw_decode(self.text, self.pos)
                    except json.JSONDecodeError as exc:  # the same fault, now with its message
                        raise self.fault(exc.msg, exc.pos) from None
                self.fill()
                continue
            except json.JSONDecodeError as exc:
                if self.eof or len(self.text) - self.pos > _MAX_VALUE_CHARS:
                    raise self.fault(exc.msg, exc.pos) from None
                self.fill()
                continue
            # A number that ends exactly where the window ends may continue in the next chunk.
            if end < len(self.text) or self.eof:
                self.pos = end
                return value
            self.fill()

    def separator(self, closing: str) -> bool:
        """Consume the ',' or ``closing`` after an element (and the space around it); True at ``closing``."""
        found = _SEPARATOR.match(self.text, self.pos)
        if found is not None and found.end() < len(self.text):
            self.pos = found.end()
            return found.group(1) == closing
        return self.expect("," + closing, f"',' or '{closing}'") == closing


class TraceReader:
    """One pass over a trace file: iterate :meth:`events`; the top-level keys land in :attr:`meta`.

    ``meta`` is complete once the iteration has finished (Kineto writes ``distributedInfo`` before the
    events and ``traceName`` after them).
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.meta: dict[str, Any] = {}
        self.bytes_read = 0

    def _open(self) -> IO[bytes]:
        try:
            handle: IO[bytes] = open(self.path, "rb")  # noqa: SIM115 (closed by events())
        except OSError as exc:
            raise TraceFormatError(self.path, f"cannot open: {exc.strerror or exc}") from None
        if handle.read(2) == _GZIP_MAGIC:
            handle.seek(0)
            return gzip.GzipFile(fileobj=handle, mode="rb")  # closing it leaves the file: see events()
        handle.seek(0)
        return handle

    def events(self) -> Iterator[dict[str, Any]]:
        """Every element of ``traceEvents`` in file order, each a dict as JSON gives it."""
        handle = self._open()
        raw = handle.fileobj if isinstance(handle, gzip.GzipFile) else None
        try:
            window = _Window(handle, self.path)
            yield from self._walk(window)
            self.bytes_read = window.bytes_read
        finally:
            handle.close()
            if raw is not None:
                raw.close()

    def _walk(self, window: _Window) -> Iterator[dict[str, Any]]:
        decoder = json.JSONDecoder()
        first = window.expect("{[", "a JSON object (a torch.profiler trace)")
        if first == "[":
            yield from self._array(window, decoder, open_ended=True)
        else:
            yield from self._object(window, decoder)
        if window.skip_space():
            raise window.fault("unexpected text after the end of the trace")

    def _object(self, window: _Window, decoder: json.JSONDecoder) -> Iterator[dict[str, Any]]:
        if window.skip_space() == "}":
            window.pos += 1
            return
        while True:
            if window.skip_space() != '"':
                raise window.fault("expected a key string")
            key = window.value(decoder)
            window.expect(":", "':'")
            if key == "traceEvents":
                window.expect("[", "'[' opening traceEvents")
                yield from self._array(window, decoder)
            else:
                self.meta[key] = window.value(decoder)
            if window.expect(",}", "',' or '}'") == "}":
                return

    def _array(
        self, window: _Window, decoder: json.JSONDecoder, open_ended: bool = False
    ) -> Iterator[dict[str, Any]]:
        """The elements of an array; ``open_ended``: the Chrome "JSON Array Format", whose closing
        bracket (and the text after the last comma) may be missing when the writer died."""
        if window.skip_space() == "]":
            window.pos += 1
            return
        while True:
            if open_ended and window.skip_space() == "":
                return
            event = window.value(decoder)
            if not isinstance(event, dict):
                raise window.fault("the trace event ending here is not a JSON object")
            yield event
            if open_ended and window.skip_space() == "":
                return
            if window.separator("]"):
                return
