"""nccl-tests output (all_reduce_perf and friends) → rows of size, time, algbw, busbw, wrong elements.

nccl-tests has printed its table several ways over the years, and sites run all of them:

* current: ``size count type redop root time algbw busbw #wrong`` (twice: out-of-place, in-place),
  ``#wrong`` an element count or ``N/A`` without validation;
* before ``root`` (≤ 2.13): ``size count type redop time algbw busbw error``, where ``error`` is the
  largest deviation seen (``1e-06``), not a count; all_gather had no ``redop`` column at all, and
  alltoall printed the ``redop`` header over an empty field;
* the oldest: the same without the leading ``#`` on header lines.

The table is therefore read from the right: the header says how many (time, algbw, busbw, error)
groups there are, each data row ends with that many groups, and whatever sits between ``type`` and the
first group is redop and/or root. Launcher prefixes (``[1,0]<stdout>:``) are stripped first. The first
group is out-of-place, the one nccl-tests' first columns show and the one diagnose judges.
"""

from __future__ import annotations

import re
from typing import Any

from diagnose.core.check import ParseError

_PREFIX = re.compile(r"^(?:\[\d+,\d+\]<std(?:out|err)>:)")
_VERSION = re.compile(r"nccl-tests version (\S+)")
_COLLECTIVE = re.compile(r"Collective test starting: (\S+)")
_RANK = re.compile(r"Rank\s+(\d+)\b.*?\bon\s+(\S+)\s+device\s+(\d+)")
_OUT_OF_BOUNDS = re.compile(r"Out of bounds values\s*:\s*(\d+)\s*(OK|FAILED)?")
_AVG_BUSBW = re.compile(r"Avg bus bandwidth\s*:\s*([0-9.eE+-]+|nan|-nan)")
_ERROR_COLUMNS = ("#wrong", "wrong", "error", "res")


def _number(token: str) -> float | None:
    if token in ("N/A", "n/a", "-"):
        return None
    try:
        return float(token.rstrip("*"))
    except ValueError:
        return None


def _header_groups(tokens: list[str]) -> tuple[int, str] | None:
    """(number of metric groups, name of the error column) if the tokens are the column header."""
    names = [t.lower() for t in tokens]
    if "algbw" not in names or "busbw" not in names or "time" not in names:
        return None
    if names[0] not in ("size", "bytes"):
        return None
    groups = names.count("time")
    error_name = next((n for n in names if n in _ERROR_COLUMNS), "#wrong")
    return groups, error_name


def _metrics(tokens: list[str], error_name: str) -> dict[str, Any]:
    time_us, algbw, busbw, error = tokens
    metrics: dict[str, Any] = {
        "time_us": _number(time_us),
        "algbw_gbps": _number(algbw),
        "busbw_gbps": _number(busbw),
    }
    if error_name in ("#wrong", "wrong"):
        value = _number(error)
        metrics["wrong"] = int(value) if value is not None else None
    else:
        # Older tests printed the largest deviation, starred when beyond the type's tolerance.
        metrics["wrong"] = None
        metrics["error"] = _number(error)
        metrics["error_flagged"] = error.endswith("*")
    return metrics


def parse_nccl_tests(text: str) -> dict[str, Any]:
    """Facts of one nccl-tests run: its table (out-of-place first), ranks, hosts and summary lines."""
    facts: dict[str, Any] = {
        "version": None,
        "collective": None,
        "ranks": 0,
        "hosts": [],
        "rows": [],
        "out_of_bounds": None,
        "avg_busbw_gbps": None,
        "error_column": None,
    }
    hosts: list[str] = []
    groups = 0
    error_name = "#wrong"
    for raw in text.splitlines():
        line = _PREFIX.sub("", raw).strip()
        if not line:
            continue
        body = line.lstrip("#").strip()
        if match := _VERSION.search(body):
            facts["version"] = match.group(1)
        if match := _COLLECTIVE.search(body):
            facts["collective"] = match.group(1)
        if body.startswith("Rank") and (match := _RANK.search(body)):
            facts["ranks"] += 1
            if match.group(2) not in hosts:
                hosts.append(match.group(2))
            continue
        if match := _OUT_OF_BOUNDS.search(body):
            facts["out_of_bounds"] = int(match.group(1))
            continue
        if match := _AVG_BUSBW.search(body):
            facts["avg_busbw_gbps"] = _number(match.group(1))
            continue
        tokens = body.split()
        header = _header_groups(tokens)
        if header is not None:
            groups, error_name = header
            facts["error_column"] = error_name
            continue
        if line.startswith("#") or not groups or not tokens[0].isdigit():
            continue
        need = 4 * groups
        if len(tokens) < 3 + need or not tokens[1].isdigit():
            continue
        middle = tokens[2 : len(tokens) - need]
        row: dict[str, Any] = {"bytes": int(tokens[0]), "count": int(tokens[1]), "type": middle[0]}
        extra = middle[1:]
        row["redop"] = next((t for t in extra if not re.fullmatch(r"-?\d+", t)), None)
        row["root"] = next((int(t) for t in extra if re.fullmatch(r"-?\d+", t)), None)
        tail = tokens[len(tokens) - need :]
        row.update(_metrics(tail[:4], error_name))
        if groups > 1:
            row["in_place"] = _metrics(tail[4:8], error_name)
        facts["rows"].append(row)
    facts["hosts"] = hosts
    if groups == 0:
        raise ParseError("no nccl-tests result table (no 'size ... time algbw busbw' header) in the output")
    return facts


def wrong_elements(facts: dict[str, Any]) -> int | None:
    """Wrong elements over the run, from #wrong counts or, for older tests, the out-of-bounds total."""
    counted = [r["wrong"] for r in facts["rows"] if r.get("wrong") is not None]
    if counted:
        return sum(counted)
    if facts.get("out_of_bounds") is not None:
        return facts["out_of_bounds"]
    flagged = [r for r in facts["rows"] if r.get("error_flagged")]
    return len(flagged) if flagged else None
