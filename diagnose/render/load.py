"""Read results.json and its evidence files into plain, printable text.

Everything a report shows comes from hosts and tools we do not control: a host name, an NCCL variable or an
``ibstat`` line may carry markup, quotes, control characters or bytes that are not UTF-8. The templates
escape markup (autoescape), but escaping cannot fix characters that are illegal in the output format
itself: XML 1.0 (JUnit, SVG) forbids most C0 controls, and a lone surrogate cannot be encoded as UTF-8 at
all, so the writer would crash on the one hostile host instead of reporting it. Every string is therefore
cleaned once, here, into text that every renderer can carry: undecodable bytes and control characters
become visible ``\\xNN`` escapes, so the reader sees that something odd was there rather than nothing.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from diagnose.core.model import STATUSES

# C0 controls except tab/newline/CR, DEL, C1 controls, surrogates, and the two XML non-characters.
_BAD_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")
# A string this long in a results field is a dumped log, not a value; the full text stays in raw/.
MAX_FIELD_CHARS = 20_000


def _visible(match: re.Match[str]) -> str:
    char = match.group(0)
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8, kept by surrogateescape
        return f"\\x{code - 0xDC00:02x}"
    if code >= 0xD800:  # any other lone surrogate or non-character has no byte form to show
        return "\ufffd"
    return f"\\x{code:02x}"


def clean_text(text: str, limit: int | None = MAX_FIELD_CHARS) -> str:
    """Text that every output format can carry as-is, cut to ``limit`` characters with a visible note."""
    if _BAD_CHARS.search(text):
        text = _BAD_CHARS.sub(_visible, text)
    if limit is not None and len(text) > limit:
        text = f"{text[:limit]}… [cut: {len(text) - limit} more characters]"
    return text


def clean_tree(value: Any) -> Any:
    """``clean_text`` applied to every string (keys included) of a decoded JSON value, as a copy."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(str(k)): clean_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_tree(v) for v in value]
    return value


def clean_in_place(value: Any, seen: dict[str, str] | None = None) -> Any:
    """``clean_tree`` for a value nobody else holds (just read from results.json): its dicts and lists are
    cleaned where they are, and equal strings become one object.

    At 16,384 hosts results.json holds some 230,000 check rows whose remediation, message, status and
    checklist texts repeat from host to host; decoded, each repeat is a string of its own, and a cleaned
    copy of the tree is a second set of every dict. Sharing the strings and keeping the one tree is most
    of what ``diagnose report`` holds in memory at that size (docs/scale.md).
    """
    seen = {} if seen is None else seen
    if isinstance(value, str):
        return _shared(value, seen)
    if isinstance(value, list):
        for index, item in enumerate(value):
            if isinstance(item, str | dict | list):
                value[index] = clean_in_place(item, seen)
        return value
    if isinstance(value, dict):
        for key in value:
            if seen.get(key) is None and _shared(key, seen) != key:  # a key to clean: the dict rebuilt
                return {clean_text(str(k)): clean_in_place(v, seen) for k, v in value.items()}
        for key, item in value.items():
            if type(item) is str:  # the common case inline: most of a large document's time is here
                known = seen.get(item)
                value[key] = (
                    known if known is not None and len(item) <= MAX_FIELD_CHARS else _shared(item, seen)
                )
            elif isinstance(item, dict | list):
                value[key] = clean_in_place(item, seen)
        return value
    return value


def _shared(text: str, seen: dict[str, str]) -> str:
    """``text`` cleaned, as the one object every equal string shares. A text equal to one already
    cleaned is clean itself (cleaning leaves no bad character), unless cleaning would cut it."""
    if len(text) <= MAX_FIELD_CHARS:
        known = seen.get(text)
        if known is not None:
            return known
    cleaned = clean_text(text)
    return seen.setdefault(cleaned, cleaned)


def normalize(results: dict[str, Any]) -> dict[str, Any]:
    """The shape every renderer relies on: lists of objects where the schema has them, known statuses.

    results.json may come from an interrupted run, an older or newer version, or a hand edit. Entries that
    are not objects are dropped, and a status this version does not know becomes ERROR (never PASS), with
    the original named in the message, so the report is still written and still honest.
    """
    out = dict(results)
    for key in ("hosts", "checks", "benchmarks"):
        value = out.get(key)
        out[key] = [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []
    for key in ("checks", "benchmarks"):  # rows are shared with ``results``; a row changed is a copy
        out[key] = [row if row.get("status") in STATUSES else _unknown_status(row) for row in out[key]]
    if not isinstance(out.get("run"), dict):
        out["run"] = {}
    return out


def _unknown_status(row: dict[str, Any]) -> dict[str, Any]:
    status = row.get("status")
    message = f"[status {status!r} not understood by this report] {row.get('message') or ''}"
    return {**row, "status": "ERROR", "message": message}


def decode_bytes(data: bytes) -> str:
    """UTF-8 where it is UTF-8; other bytes survive as surrogates that ``clean_text`` shows as ``\\xNN``."""
    return data.decode("utf-8", errors="surrogateescape")


def read_results(path: Path) -> dict[str, Any]:
    """results.json as a dict, not yet cleaned (``clean_tree`` does that once, in the renderer).

    Decoding with surrogateescape means a file some other writer produced with raw non-UTF-8 bytes in it
    still loads, and the odd bytes show up in the report where they were.
    """
    data = json.loads(decode_bytes(path.read_bytes()))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: results.json must hold a JSON object, found {type(data).__name__}")
    return data


def read_cleaned(path: Path) -> dict[str, Any]:
    """What ``clean_in_place(read_results(path))`` gives, with a lower peak and in one pass: each object is
    cleaned, and its strings shared, as the decoder builds it, not once the whole tree stands.

    At 16,384 hosts the decoded tree held some 200 MiB before its equal strings were merged, on top of the
    63 MB text being decoded; merged as they come, the reading peaks some 85 MiB lower (docs/scale.md).
    """
    seen: dict[str, str] = {}

    def share(obj: dict[str, Any]) -> dict[str, Any]:
        for key in obj:
            if seen.get(key) is None and _shared(key, seen) != key:  # a key to clean: the object rebuilt
                obj = {clean_text(str(k)): v for k, v in obj.items()}
                break
        for key, item in obj.items():
            if type(item) is str:  # inline, as in clean_in_place: this runs for every string of the file
                known = seen.get(item)
                obj[key] = (
                    known if known is not None and len(item) <= MAX_FIELD_CHARS else _shared(item, seen)
                )
            elif type(item) is list:
                _share_list(item, seen)
        return obj

    data = json.JSONDecoder(object_hook=share).decode(decode_bytes(path.read_bytes()))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: results.json must hold a JSON object, found {type(data).__name__}")
    return data


def _share_list(items: list[Any], seen: dict[str, str]) -> None:
    """The strings of a decoded list and of the lists in it cleaned and shared; its objects were already,
    by the decoder's hook."""
    for index, item in enumerate(items):
        if type(item) is str:
            items[index] = _shared(item, seen)
        elif type(item) is list:
            _share_list(item, seen)


@dataclass(frozen=True)
class Excerpt:
    """The shown part of one evidence file; ``note`` says why it is short or absent."""

    path: str
    text: str | None
    note: str | None


def evidence_target(base_dir: Path, rel: str) -> Path | None:
    """The file an evidence path names, or None when the path would leave the results folder.

    Evidence paths come from results.json, which a report may be re-rendered from long after the run and
    on another machine; a path like ``../../etc/shadow`` or an absolute one must never be read into a
    document that will be passed around.
    """
    if not rel or rel.startswith(("/", "\\")) or ":" in rel.split("/", 1)[0]:
        return None
    base = base_dir.resolve()
    target = (base / rel).resolve()
    return target if target.is_relative_to(base) else None


def _cut_line(line: str, limit: int) -> str:
    return line if len(line) <= limit else f"{line[:limit]} … [line cut: {len(line) - limit} more characters]"


def read_excerpt(
    base_dir: Path, rel: str, max_lines: int = 120, max_chars: int = 12_000, max_line: int = 400
) -> Excerpt:
    """The head of an evidence file, cut with a note; a missing file is reported, not raised.

    Lines are cut too: a single megabyte-long line would otherwise wrap over dozens of PDF pages.
    """
    target = evidence_target(base_dir, rel)
    if target is None:
        return Excerpt(rel, None, "not read: the path leaves the results folder")
    try:
        with target.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            data = handle.read(max_chars * 4)
    except FileNotFoundError:
        return Excerpt(rel, None, "evidence file not found next to results.json")
    except OSError as exc:
        return Excerpt(rel, None, f"evidence file could not be read: {exc.strerror or exc}")
    full = clean_text(decode_bytes(data), limit=None).replace("\r\n", "\n").rstrip("\n")
    text = "\n".join(_cut_line(line, max_line) for line in full.splitlines()[:max_lines])[:max_chars]
    if text == full and len(data) == size:
        return Excerpt(rel, text, None)
    note = f"cut: the first {len(text)} characters of a {size}-byte file are shown; the full output is {rel}"
    return Excerpt(rel, text, note)
