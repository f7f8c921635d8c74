"""Bounded capture of what a host prints: a runaway command must not take the controller down.

A host's output arrives in chunks of any size. :class:`Capped` keeps the head and the tail of one stream
within a byte limit and counts what it dropped from the middle, so a 50 MiB (or 50 GiB) output costs a
few MiB of memory and its first and last lines — usually the ones that say what went wrong — survive.
:class:`FramedStream` splits one stream of a command batch at its marker lines as the chunks arrive and
gives each command a :class:`Capped` of its own, so one chatty command cannot push another's output out.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

DEFAULT_MAX_OUTPUT_BYTES = 4 * 1024 * 1024
# A marker line is token + kind + key + exit status: far below this. A longer unfinished line is output.
_MARKER_MAX = 512


class Capped:
    """The first and last ``limit // 2`` bytes of a stream, and how many bytes were seen in all."""

    def __init__(self, limit: int = DEFAULT_MAX_OUTPUT_BYTES) -> None:
        self.limit = max(2, limit)
        self._head = bytearray()
        self._head_room = self.limit // 2
        self._tail_room = self.limit - self._head_room
        self._tail: deque[bytes] = deque()
        self._tail_size = 0
        self.total = 0

    def add(self, data: bytes) -> None:
        if not data:
            return
        self.total += len(data)
        room = self._head_room - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if not data:
            return
        self._tail.append(bytes(data))
        self._tail_size += len(data)
        # Whole chunks leave the tail once the rest still fills it: O(1) per chunk, whatever the volume.
        while self._tail and self._tail_size - len(self._tail[0]) >= self._tail_room:
            self._tail_size -= len(self._tail.popleft())

    @property
    def cut(self) -> int:
        """Bytes dropped from the middle."""
        return self.total - len(self._head) - min(self._tail_size, self._tail_room)

    def data(self) -> bytes:
        tail = b"".join(self._tail)
        if len(tail) > self._tail_room:
            tail = tail[len(tail) - self._tail_room :]
        if not self.cut:
            return bytes(self._head) + tail
        note = (
            f"\n[diagnose: {self.cut} bytes cut from the middle of {self.total} bytes of output; "
            f"the first and last {self.limit // 2} bytes are kept (variable max_output_bytes)]\n"
        )
        return bytes(self._head) + note.encode() + tail

    def text(self) -> str:
        return self.data().decode("utf-8", errors="replace")


@dataclass
class Section:
    """One command's part of a framed stream: its output and the tail of its END marker line."""

    body: Capped
    end: str | None = None
    opened: float = 0.0  # monotonic, when its OUT marker arrived
    seconds: float = 0.0  # from its OUT marker to its END marker, as the reader saw them arrive


class FramedStream:
    """One stream of a command batch, split into per-command sections as it arrives.

    A marker is a whole line starting with the batch's random token: ``<token> OUT <key>`` opens a
    section, ``<token> END <key> <tail>`` closes it, ``<token> SID <n>`` names the batch's session. Only a
    marker at the start of a line counts, so no output can forge one. Bytes outside any section are
    dropped.
    """

    def __init__(self, token: str, limit: int = DEFAULT_MAX_OUTPUT_BYTES) -> None:
        self.token = token.encode()
        self.limit = limit
        self.sections: dict[str, Section] = {}
        self.current: str | None = None
        self.since = 0.0  # when the current section opened (monotonic): how long its command has run
        self.session: int | None = None
        self.markers = 0  # how many markers arrived: the batch's progress
        self._pending = b""
        self._mid_line = False

    def feed(self, data: bytes) -> None:
        buf = self._pending + data
        self._pending = b""
        start = 0  # first byte not yet handed on
        while True:
            hit = buf.find(self.token, start)
            while hit > 0 and buf[hit - 1 : hit] != b"\n":
                hit = buf.find(self.token, hit + 1)
            if hit == 0 and self._mid_line:
                hit = buf.find(b"\n" + self.token, 1)
                hit = hit + 1 if hit >= 0 else -1
            if hit < 0:
                break
            newline = buf.find(b"\n", hit)
            if newline < 0:
                self._body(buf[start:hit])
                self._pending = buf[hit:]
                if len(self._pending) > _MARKER_MAX:  # too long for a marker: plain output after all
                    self._body(self._pending)
                    self._pending, self._mid_line = b"", True
                else:
                    self._mid_line = False
                return
            self._body(buf[start:hit])
            self._marker(buf[hit:newline].decode("utf-8", errors="replace"))
            start = newline + 1
            self._mid_line = False
        rest = buf[start:]
        last = rest.rfind(b"\n")
        partial = rest[last + 1 :]
        # Keep a short unfinished line back: it may be the start of a marker split across chunks.
        if len(partial) <= _MARKER_MAX and (last >= 0 or not self._mid_line):
            self._body(rest[: last + 1])
            self._pending = partial
            self._mid_line = False
        else:
            self._body(rest)
            self._mid_line = bool(partial)

    def close(self) -> None:
        """The stream ended: an unfinished last line is output."""
        self._body(self._pending)
        self._pending = b""

    def _body(self, data: bytes) -> None:
        if data and self.current is not None:
            self.sections[self.current].body.add(data)

    def _marker(self, line: str) -> None:
        parts = line.split(" ", 3)
        if len(parts) < 3:
            return
        kind, key = parts[1], parts[2]
        self.markers += 1
        if kind == "OUT":
            now = time.monotonic()
            self.sections[key] = Section(Capped(self.limit), opened=now)
            self.current, self.since = key, now
        elif kind == "END" and key == self.current:
            section = self.sections[key]
            section.end = parts[3] if len(parts) > 3 else ""
            section.seconds = time.monotonic() - section.opened
            self.current = None
        elif kind == "SID" and key.isdigit():
            self.session = int(key)

    def seconds(self, key: str) -> float:
        """How long a completed section's command ran, as its markers arrived (0.0 if it never completed):
        a batch runs its commands one after another, so this is what ``-v`` shows of each."""
        section = self.sections.get(key)
        return section.seconds if section is not None and section.end is not None else 0.0

    def finished(self, key: str) -> tuple[str, str] | None:
        """(output, END tail) of a completed section, None if it never completed.

        The END marker follows a newline of its own (so that output without a final newline cannot hide
        it); that one newline is not the command's.
        """
        section = self.sections.get(key)
        if section is None or section.end is None:
            return None
        text = section.body.text()
        return (text[:-1] if text.endswith("\n") else text), section.end
