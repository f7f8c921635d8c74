"""The PDF's layout where a new user saw it break (issue 36, item 10): a real run's report rendered by
WeasyPrint, read back with pypdf and pdftotext. The host × check matrix of a run with forty checks must set
each column header as one whole check id (it was one letter a line), and the checklist's NOT COVERED badge
must stay inside its column (it ran over the next column's dash)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from pypdf import PdfReader

from diagnose.render import render
from diagnose.render.view_findings import build_matrix
from tests.support.paths import FIXTURES
from tests.support.prerequisites import unavailable


@pytest.fixture(autouse=True)
def weasyprint_imports() -> None:
    """WeasyPrint needs Pango from the system: where it does not import, these tests are skipped, but
    under CI they fail (a skip there would pass a suite that never drew a PDF)."""
    try:
        import weasyprint  # noqa: F401
    except (ImportError, OSError) as exc:
        unavailable("WeasyPrint", str(exc))


def _pdf_of(fixture: str, folder: Path) -> Path:
    folder.mkdir(parents=True)
    shutil.copy(FIXTURES / "results" / fixture, folder / "results.json")
    render(folder / "results.json", {"pdf"})
    return folder / "report.pdf"


def test_matrix_headers_read_as_whole_check_ids(tmp_path: Path) -> None:
    ids = set(build_matrix(json.loads((FIXTURES / "results" / "cpu_only_local.json").read_text())).columns)
    assert len(ids) > 30, "a run with more columns than fit across a page"
    pages = [
        p.extract_text() or "" for p in PdfReader(_pdf_of("cpu_only_local.json", tmp_path / "run")).pages
    ]
    matrix = next(p for p in pages if "rows with trouble come first" in p)
    lines = {line.strip() for line in matrix.splitlines()}
    assert ids <= lines, sorted(ids - lines)


def test_not_covered_badge_stays_in_its_column(tmp_path: Path) -> None:
    pdf = _pdf_of("cluster_failures.json", tmp_path / "run")
    text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True)
    rows = [line for line in text.stdout.splitlines() if re.match(r"\s*\d+\.\d+\s.*NOT COVERED", line)]
    assert len(rows) > 5, "the fixture has items no check answers"
    for row in rows:
        # the next column (hosts not passing: a dash) begins after a gap, not on the badge's last letter
        assert re.search(r"NOT COVERED {3,}\S", row), row
