"""The report of a small run, as a careful operator reads it: the sign-off whole on the first page or the
last, a cover whose profile line has no placeholder dash, no chapter that only says "not measured", and a
GPUs-under-load table whose cells hold the figure, not a paragraph. Each PDF is rendered by WeasyPrint and
read back with pypdf; the fixtures are real runs (two CPU hosts, one CPU host, the lent 4×H200)."""

from __future__ import annotations

import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
from pypdf import PdfReader

from diagnose.render import render
from diagnose.render.view import build_cover
from diagnose.render.view_stress import build_stress
from tests.support.paths import FIXTURES
from tests.support.prerequisites import unavailable

H200X4 = FIXTURES / "gpu_runs" / "h200x4-2026-11-27"
#: The sign-off's lines, in the order they are printed; all of them must land on one page.
#: A short note: "45 % of ref", "3 wrong", "hw_slowdown 12 s"; the old cells ran to some 40 words.
SHORT_NOTE = 30
SIGNOFF_LINES = ("Decision:", "Tested by", "Accepted by", "Reservations / reasons for refusal")


@pytest.fixture(autouse=True)
def weasyprint_imports() -> None:
    """Without Pango these tests cannot draw a PDF: skipped locally, a failure under CI."""
    try:
        import weasyprint  # noqa: F401
    except (ImportError, OSError) as exc:
        unavailable("WeasyPrint", str(exc))


def _render(source: Path, folder: Path, formats: set[str]) -> Path:
    folder.mkdir(parents=True)
    shutil.copy(source, folder / "results.json")
    render(folder / "results.json", formats)
    return folder


def _pages(pdf: Path) -> list[str]:
    return [" ".join((page.extract_text() or "").split()) for page in PdfReader(pdf).pages]


@pytest.mark.parametrize(
    "source",
    [
        FIXTURES / "results" / "cpu_two_hosts.json",
        FIXTURES / "results" / "cpu_two_hosts_interrupted.json",
        FIXTURES / "results" / "cpu_only_local.json",
        H200X4 / "healthy_results.json",
    ],
    ids=lambda p: p.stem,
)
def test_the_sign_off_is_whole_on_the_first_page_or_the_last(source: Path, tmp_path: Path) -> None:
    pages = _pages(_render(source, tmp_path / "run", {"pdf"}) / "report.pdf")
    holding = {line: [i for i, text in enumerate(pages) if line in text] for line in SIGNOFF_LINES}
    assert all(len(found) == 1 for found in holding.values()), holding  # printed once
    (where,) = {found[0] for found in holding.values()}  # one page holds all of it: not split
    assert where in (0, len(pages) - 1), (where, len(pages))
    # a signer who opens the cover learns where to sign when it is not there
    assert ("Sign-off: on the last page." in pages[0]) == (where != 0)


def test_the_cover_of_a_small_run_keeps_its_sign_off(tmp_path: Path) -> None:
    """Two CPU hosts, no profile: the cover pushed the sign-off to page 2 (11 pages); now it holds it."""
    pages = _pages(
        _render(FIXTURES / "results" / "cpu_two_hosts.json", tmp_path / "run", {"pdf"}) / "report.pdf"
    )
    assert all(line in pages[0] for line in SIGNOFF_LINES)
    assert len(pages) <= 8, len(pages)


def test_the_cover_names_a_missing_profile_without_a_placeholder_dash(tmp_path: Path) -> None:
    results = json.loads((FIXTURES / "results" / "cpu_two_hosts.json").read_text())
    assert results["run"]["profile"] is None and results["run"]["profile_note"].startswith(
        "no profile chosen"
    )
    assert build_cover(results).profile.startswith("no profile chosen (diagnose_profile unset)")
    first = _pages(
        _render(FIXTURES / "results" / "cpu_two_hosts.json", tmp_path / "run", {"pdf"}) / "report.pdf"
    )[0]
    assert "Profile no profile chosen" in first and "— —" not in first


def test_chapters_with_nothing_measured_are_left_out_and_named_in_one_line(tmp_path: Path) -> None:
    run = _render(FIXTURES / "results" / "cpu_only_local.json", tmp_path / "run", {"html", "pdf"})
    pages = _pages(run / "report.pdf")
    contents = next(text for text in pages if text.startswith("Contents"))
    assert (
        "Left out, nothing measured in this run: Benchmarks (none ran: checklist items 3.2 and 3.3 not covered); "
        "Inference: KV-cache transfer (every result SKIP); Appendix: evidence excerpts (no finding cites evidence)."
    ) in contents
    headings = [line for text in pages for line in re.findall(r"(?:^| )(\d|A) ([A-Z][^.]*?) \. \. \.", text)]
    assert [title for _n, title in headings] == [
        "Operational checklist",
        "Findings by cause, worst first",
        "Host × check matrix",
        "Fleet: hosts against their peers",
        "GPUs under load: GEMM, HBM, memory test, SDC, burn-in",
        "Environment record",
    ]
    assert not any(text.startswith(("4 Benchmarks", "A Appendix")) for text in pages)
    html = (run / "report.html").read_text()
    assert 'id="benchmarks"' not in html and 'id="inference"' not in html and 'id="appendix"' not in html
    assert len(pages) <= 12, len(pages)  # 15 while each of them took a page


def test_a_run_that_measured_every_chapter_keeps_them(tmp_path: Path) -> None:
    html = (_render(H200X4 / "healthy_results.json", tmp_path / "run", {"html"}) / "report.html").read_text()
    # a PASS cites no evidence: the appendix alone is left out
    assert (
        'data-role="left-out">Left out, nothing measured in this run: Appendix: evidence excerpts '
        "(no finding cites evidence).</p>"
    ) in html
    for chapter in ("benchmarks", "training", "inference", "fleet", "stress", "environment"):
        assert f'<section class="chapter" id="{chapter}">' in html, chapter


class _Cells(HTMLParser):
    """The text of each cell of the first ``table.stress``, by row; its header cells apart."""

    def __init__(self) -> None:
        super().__init__()
        self.inside = False
        self.done = False
        self.rows: list[list[str]] = []
        self.head: list[str] = []
        self.cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table" and ("class", "stress") in attrs and not self.done:
            self.inside = True
        elif self.inside and tag == "tr":
            self.rows.append([])
        elif self.inside and tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "table" and self.inside:
            self.inside, self.done = False, True
        elif self.inside and tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append(" ".join("".join(self.cell).split()))
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data + " ")


def _stress_table(html: str) -> list[list[str]]:
    parser = _Cells()
    parser.feed(html)
    return parser.rows


def test_each_gpu_figure_stands_alone_in_its_cell(tmp_path: Path) -> None:
    """The lent 4×H200: every cell was the figure and about 40 words of reference, floor, clocks, power and
    peers. Now a PASS cell is the figure alone; what a column shares is said once."""
    run = _render(H200X4 / "healthy_results.json", tmp_path / "run", {"html", "pdf"})
    header, *rows = _stress_table((run / "report.html").read_text())
    assert header[:3] == ["host", "GPU", "bf16 TFLOP/s ref 682 · floor 579.7"]
    assert rows[0] == [
        "localhost",
        "GPU 0",
        "670.4",
        "345.0",
        "1258.9",
        "4240.1",
        "4385.9",
        "140.66 GB",
        "fffed372…",
        "1425/1440",
    ]
    assert len(rows) == 4 and all(len(cell.split()) <= 2 for row in rows for cell in row[2:])
    pages = _pages(run / "report.pdf")
    (chapter,) = [text for text in pages if "GPUs under load: GEMM" in text and "judged against" in text]
    assert "localhost GPU 0 670.4 345.0 1258.9 4240.1 4385.9 140.66 GB fffed372… 1425/1440" in chapter
    # said once, under the table: the reference and floor, the spread, the clocks and power
    for once in (
        "bf16 TFLOP/s reference 682.0, floor 579.7, datasheet 989 (information, not judged) "
        "98–102 % of the reference; -1.8 to +1.4 % from the median SM clock 1485–1530 MHz; 444–521 W of 700 W",
        "References measured on: lent 4× NVIDIA H200 (SXM, NV18 all pairs)",
    ):
        assert once in chapter, once
    assert chapter.count("of ref") == 0 and chapter.count("datasheet") == 5  # once per throughput column


def test_a_failing_figure_carries_a_short_note(tmp_path: Path) -> None:
    html = (_render(H200X4 / "hog_results.json", tmp_path / "run", {"html"}) / "report.html").read_text()
    _header, *rows = _stress_table(html)
    gpu0 = rows[0]
    assert gpu0[:4] == ["localhost (shared)", "GPU 0", "305.0 45 % of ref", "157.0 45 % of ref"]
    assert all(len(cell) <= len("1923.3 ") + SHORT_NOTE for cell in gpu0[2:])
    assert all(len(cell.split()) == 1 for row in rows[1:] for cell in row[2:7])  # the others pass


def test_no_passing_cell_has_a_note() -> None:
    view = build_stress(json.loads((H200X4 / "healthy_results.json").read_text()))
    assert view is not None
    assert {cell.note for row in view.rows for cell in row.cells if cell is not None} == {""}


def test_a_cover_too_full_for_the_sign_off_gives_it_to_the_last_page(tmp_path: Path) -> None:
    """Where the sign-off lands is decided on a layout of the cover alone; a profile note of a dozen lines
    leaves the cover no room for it, and the whole document must then carry it at its end."""
    results = json.loads((FIXTURES / "results" / "cpu_two_hosts.json").read_text())
    results["run"]["profile_note"] = "the profile's note runs on and on, " * 40
    source = tmp_path / "long_note.json"
    source.write_text(json.dumps(results))
    pages = _pages(_render(source, tmp_path / "run", {"pdf"}) / "report.pdf")
    holding = {line: [i for i, text in enumerate(pages) if line in text] for line in SIGNOFF_LINES}
    assert all(found == [len(pages) - 1] for found in holding.values()), holding
    assert "Sign-off: on the last page." in pages[0]


def test_the_cover_is_laid_out_from_the_cover_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The layout that decides where the sign-off lands reads the cover's HTML, not the chapters behind it:
    WeasyPrint styles every element it parses, hidden or not, and the chapters are nearly all of them."""
    import weasyprint

    parsed: list[str] = []
    real = weasyprint.HTML

    def recording(*args: object, **kwargs: object) -> object:
        parsed.append(str(kwargs.get("string", "")))
        return real(*args, **kwargs)

    monkeypatch.setattr(weasyprint, "HTML", recording)
    pages = _pages(
        _render(FIXTURES / "results" / "cpu_two_hosts.json", tmp_path / "run", {"pdf"}) / "report.pdf"
    )
    whole, cover = parsed  # the document once, the cover once
    assert 'id="checklist"' in whole and 'id="cover"' in cover
    assert 'id="checklist"' not in cover and 'id="signoff-last"' not in cover
    assert all(line in pages[0] for line in SIGNOFF_LINES)
