"""perftest (linux-rdma/perftest): the result tables of ``ib_write_bw`` and ``ib_write_lat``.

What the tools print is one banner (test name, device, link type, queue pairs), the addresses of both ends,
then a table. Versions and options change the table in ways a parser must survive, all seen in captures:

* the bandwidth unit: ``MB/sec`` (old releases; bytes / 2^20 per second despite the name), ``MiB/sec``
  (newer releases, the same number) or ``Gb/sec`` (``--report_gbits``: bits / 10^9). Every figure is
  returned in Gb/s, so a caller never cares which one the host's perftest printed;
* the same size on several rows: ``--run_infinitely`` prints a row every few seconds, a server and its
  client printing into one file give the table twice. The figure at a size is the median of its rows;
* lines between the rows: "Conflicting CPU frequency values detected" on hosts whose governor is not at
  its maximum (perftest without ``-F``), "WARNING: BW peak won't be measured" (``-D``): kept as
  ``warnings``;
* a run that never measured: "Couldn't connect to <host>:<port>", "Unable to init the socket connection"
  (the server was not there) and their kin are kept as ``errors`` with no rows.

``ib_write_lat`` is read in its iteration form (``-n``): with ``-D`` it prints neither the median nor
the percentiles, so diagnose never runs it that way.

Pure: text in, facts out (:func:`parse_bw`, :func:`parse_lat`); ParseError only for text that is not
perftest's at all.
"""

from __future__ import annotations

import re
import statistics
from typing import Any

from diagnose.core.check import ParseError

#: Gb/s per unit of a bandwidth column: perftest divides bytes by 0x100000 for MB/sec (MiB/sec) and by
#: 125000000 for Gb/sec (src/perftest_parameters.c, format_factor).
GBPS_PER_UNIT = {"Gb/sec": 1.0, "MB/sec": 1048576 / 125e6, "MiB/sec": 1048576 / 125e6}

_BW_HEADER = re.compile(r"#bytes\s+#iterations\s+BW peak\[(?P<unit>[A-Za-z]+/sec)\]\s+BW average\[")
_LAT_HEADER = re.compile(r"#bytes\s+#iterations\s+t_min\[usec\]")
_NUMBER = r"(\d+(?:\.\d+)?)"
_BW_ROW = re.compile(rf"^\s*(\d+)\s+(\d+)\s+{_NUMBER}\s+{_NUMBER}\s+{_NUMBER}\s*$")
_LAT_ROW = re.compile(r"^\s*(\d+)\s+(\d+)" + rf"\s+{_NUMBER}" * 7 + r"\s*$")
_TEST = re.compile(r"^\s*(?P<name>[A-Za-z_ ]+ (?:BW|Latency) Test)\s*$")
_DEVICE = re.compile(r"Device\s*:\s*(?P<value>\S+)")
_LINK = re.compile(r"Link type\s*:\s*(?P<value>\S+)")
_QPS = re.compile(r"Number of qps\s*:\s*(?P<value>\d+)")
_WARNING = re.compile(r"^\s*(WARNING:|Conflicting CPU frequency)")
_ERROR = re.compile(
    r"Couldn't|Unable to|Failed to|failed|No such|not found|ERROR|Error|error|Segmentation|Aborted|Killed"
)
_MARKERS = ("RDMA_", "#bytes", "Waiting for client", "Dual-port", "perftest", "ib_write")


def _banner(lines: list[str]) -> dict[str, Any]:
    """Test name, device, link type and queue pairs from the first banner in the output."""
    found: dict[str, Any] = {"test": None, "device": None, "link_type": None, "qps": None}
    for line in lines:
        for key, pattern in (("device", _DEVICE), ("link_type", _LINK), ("qps", _QPS)):
            match = pattern.search(line)
            if match and found[key] is None:
                found[key] = int(match.group("value")) if key == "qps" else match.group("value")
        match = _TEST.match(line)
        if match and found["test"] is None:
            found["test"] = match.group("name").strip()
    return found


def _notes(lines: list[str]) -> tuple[list[str], list[str]]:
    """(warnings, errors): distinct lines, in the order first seen, with how often a warning repeated."""
    warnings: dict[str, int] = {}
    errors: list[str] = []
    for line in lines:
        text = line.strip()
        if not text:
            continue
        if _WARNING.match(text):
            key = "Conflicting CPU frequency values detected" if text.startswith("Conflicting") else text
            warnings[key] = warnings.get(key, 0) + 1
        elif _ERROR.search(text) and text not in errors:
            errors.append(text)
    shown = [w if n == 1 else f"{w} (×{n})" for w, n in warnings.items()]
    return shown, errors


def _check_perftest(text: str, rows: list[Any], errors: list[str], tool: str) -> None:
    if rows or errors or any(marker in text for marker in _MARKERS):
        return
    raise ParseError(f"no {tool} result table in the output: {text.strip()[:160]!r}")


def _median_at(rows: list[dict[str, Any]], key: str, size: int) -> float:
    return round(float(statistics.median(r[key] for r in rows if r["bytes"] == size)), 3)


def parse_bw(text: str) -> dict[str, Any]:
    """Facts of one ``ib_write_bw`` output (either end's).

    ``rows`` every table row in Gb/s (``peak_gbps`` 0.0 where perftest did not measure the peak);
    ``bytes`` the largest size measured and ``average_gbps`` its figure (the median of its rows), None
    without rows; ``unit`` the unit printed; ``warnings`` and ``errors`` as the module docstring says.
    """
    lines = text.splitlines()
    facts = _banner(lines)
    unit: str | None = None
    rows: list[dict[str, Any]] = []
    for line in lines:
        header = _BW_HEADER.search(line)
        if header:
            unit = header.group("unit")
            continue
        match = _BW_ROW.match(line) if unit else None
        if match and unit in GBPS_PER_UNIT:
            factor = GBPS_PER_UNIT[unit]
            rows.append(
                {
                    "bytes": int(match.group(1)),
                    "iterations": int(match.group(2)),
                    "peak_gbps": round(float(match.group(3)) * factor, 3),
                    "average_gbps": round(float(match.group(4)) * factor, 3),
                    "msg_rate_mpps": float(match.group(5)),
                }
            )
    warnings, errors = _notes(lines)
    _check_perftest(text, rows, errors, "ib_write_bw")
    if unit is not None and unit not in GBPS_PER_UNIT:
        raise ParseError(f"ib_write_bw printed an unknown bandwidth unit {unit!r}")
    largest = max((r["bytes"] for r in rows), default=None)
    facts.update(
        unit=unit,
        rows=rows,
        bytes=largest,
        average_gbps=None if largest is None else _median_at(rows, "average_gbps", largest),
        warnings=warnings,
        errors=errors,
    )
    return facts


def parse_lat(text: str) -> dict[str, Any]:
    """Facts of one ``ib_write_lat`` output.

    ``rows`` every row (times in µs); ``bytes`` the smallest size measured, the latency a fabric is judged
    by, and its ``typical_us`` (perftest's median), ``avg_us``, ``p99_us`` and ``p999_us`` (medians of
    its rows), None without rows.
    """
    lines = text.splitlines()
    facts = _banner(lines)
    names = ("t_min_us", "t_max_us", "typical_us", "avg_us", "stdev_us", "p99_us", "p999_us")
    rows: list[dict[str, Any]] = []
    table = False
    for line in lines:
        if _LAT_HEADER.search(line):
            table = True
            continue
        if table and (match := _LAT_ROW.match(line)):
            values = [float(match.group(i)) for i in range(3, 10)]
            rows.append(
                {
                    "bytes": int(match.group(1)),
                    "iterations": int(match.group(2)),
                    **dict(zip(names, values, strict=True)),
                }
            )
    warnings, errors = _notes(lines)
    _check_perftest(text, rows, errors, "ib_write_lat")
    smallest = min((r["bytes"] for r in rows), default=None)
    summary: dict[str, float | None] = dict.fromkeys(("typical_us", "avg_us", "p99_us", "p999_us"))
    if smallest is not None:
        for key in summary:
            summary[key] = _median_at(rows, key, smallest)
    facts.update(rows=rows, bytes=smallest, **summary, warnings=warnings, errors=errors)
    return facts
