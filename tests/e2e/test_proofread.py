"""Messages proofread as sentences: the terminal summary, ``--check`` and the report of real runs never show a
value as Python writes it (``None``, ``True``, ``False``), ``only nothing``, a count of one with a plural noun
(``1 hosts``), a count placeholder (``host(s)``) or ``exit None``.

The fixtures were recorded by older versions, whose messages said ``1 host(s)``; the report and the summary
show recorded messages verbatim, so every string of the document is taken out of what is shown before the
scan: what is left is what diagnose composes now.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from diagnose.commands.run import summary_lines
from diagnose.render.html import render_html
from diagnose.render.load import clean_tree, normalize
from diagnose.render.view import build_report
from tests.support.cli import diagnose
from tests.support.paths import REPO
from tests.support.terminal import unwrapped

pytestmark = pytest.mark.e2e

FIXTURES = sorted(
    [
        *(REPO / "tests/fixtures/results").glob("*.json"),
        *(REPO / "tests/fixtures/gpu_runs").glob("*/*results.json"),
    ]
)
NOUNS = (
    "host|node|GPU|rank|check|result|device|pair|link|NIC|HCA|port|size|step|row|column|error|run|pass|word|"
    "event|process|file|collective|group|item|cause|consequence|rail|round|measurement|test|regression|"
    "sample|rule|layer|token|block|command|batch|set|hour|minute|second|day|night|failure|warning|skip"
)
WRONG = re.compile(
    rf"\b(?:None|True|False)\b|\bonly nothing\b|(?<![\d.,-])\b1 (?:{NOUNS})(?:s|es)\b|\w+\((?:s|es)\)"
)
# A cell of a table or a line of text: the terminal's columns are two spaces or more apart, an action follows →.
CELL = re.compile(r"\s{2,}|\x00|\n| → ")


def recorded(document: Any) -> Iterator[str]:
    """Every string of the document, keys left out."""
    if isinstance(document, str):
        yield document
    elif isinstance(document, dict):
        for value in document.values():
            yield from recorded(value)
    elif isinstance(document, list):
        for value in document:
            yield from recorded(value)


def composed(text: str, document: Any = None) -> list[str]:
    """The cells of ``text`` that no recorded string holds: a recorded sentence is taken out where it is
    embedded, and a cell (a column of the summary, a line of the report) that is part of one (cut with …,
    or shown without its ``host: `` prefix) is dropped."""
    strings = sorted(set(recorded(document)), key=len, reverse=True)
    for string in strings:
        if len(string) >= 8 and " " in string.strip():
            text = text.replace(string, "\x00")
    haystack = "\x00".join(strings)
    cells = (cell.strip().removesuffix("…").strip() for cell in CELL.split(text))
    return [cell for cell in cells if cell and not (len(cell) >= 8 and cell in haystack)]


def wrong_words(text: str, document: Any = None) -> list[str]:
    return [f"{m.group(0)!r} in {cell!r}" for cell in composed(text, document) for m in WRONG.finditer(cell)]


def visible(page: str) -> str:
    """The report's text as a reader sees it: no script, style, comment, tag or attribute."""
    page = re.sub(r"(?is)<(script|style)\b.*?</\1>", "\n", page)
    page = re.sub(r"(?s)<!--.*?-->|<[^>]*>", "\n", page)
    return html.unescape(page)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_summary_and_the_report_of_a_real_run_read_as_sentences(path: Path) -> None:
    document = json.loads(path.read_text())
    out = Path("/tmp/run")
    summary = "\n".join(unwrapped(summary_lines(document, out, [out / "results.json", out / "report.html"])))
    page = visible(render_html(build_report(normalize(clean_tree(document)), path.parent)))
    assert wrong_words(summary, document) == []
    assert wrong_words(page, document) == []


BED = """\
[bed]
bed1 ansible_host=127.0.0.1 ansible_port=2201
bed2 ansible_host=127.0.0.1 ansible_port=2202

[bed:vars]
ansible_user=diag
diagnose_profile=cpu-testbed
"""


@pytest.mark.parametrize("inventory", ["local", "bed"])
def test_check_reads_as_sentences(tmp_path: Path, inventory: str) -> None:
    argv = ["run", "--check"]
    if inventory == "bed":
        (tmp_path / "bed.ini").write_text(BED)
        argv += ["-i", str(tmp_path / "bed.ini")]
    done = diagnose(*argv, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    # the commands are shown as the hosts run them (a shell line, a Python program): code, not words
    words = re.sub(r"(?ms)^commands on .*?^$", "", done.stdout)
    assert "\nbenchmark sweep" in words and "[ibstat]" not in words
    assert wrong_words(words) == [], words


def test_the_scan_sees_what_older_versions_composed() -> None:
    """The scan itself: composed words are caught, recorded ones (whole, cut or without their host) are not."""
    document = {"checks": [{"message": "gpu01: 1 GPUs, expected 2"}]}
    assert wrong_words("FAIL  1 hosts  gpu01  1 GPUs, expected 2", document) == ["'1 hosts' in '1 hosts'"]
    assert wrong_words("3 round(s), gloo_only False, exit None, 1 passes, 11 hosts, 1 ms") == [
        "'round(s)' in '3 round(s), gloo_only False, exit None, 1 passes, 11 hosts, 1 ms'",
        "'False' in '3 round(s), gloo_only False, exit None, 1 passes, 11 hosts, 1 ms'",
        "'None' in '3 round(s), gloo_only False, exit None, 1 passes, 11 hosts, 1 ms'",
        "'1 passes' in '3 round(s), gloo_only False, exit None, 1 passes, 11 hosts, 1 ms'",
    ]
