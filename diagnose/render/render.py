"""The one entry point: results.json in, the requested report files out.

``diagnose run`` calls it after writing results.json, and ``diagnose report`` calls it on an old one; both
only read results.json and the evidence beside it, so a report can be re-rendered anywhere, any time,
without touching a host.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from diagnose.render.atomic import write_atomic
from diagnose.render.junit import render_junit
from diagnose.render.load import clean_tree, normalize, read_cleaned
from diagnose.render.pdf import PdfUnavailable, render_pdf  # weasyprint itself loads when a PDF is asked
from diagnose.render.prometheus import render_prometheus

FORMATS = ("html", "pdf", "json", "junit", "prom")
#: What a run writes unless told otherwise (`diagnose report` defaults to html,pdf).
DEFAULT_FORMATS = "json,html,pdf"
OUTPUT_NAMES = {"html": "report.html", "pdf": "report.pdf", "junit": "junit.xml", "prom": "diagnose.prom"}


def render(results_path: Path, formats: set[str], out_dir: Path | None = None) -> list[Path]:
    """Write the ``formats`` asked for next to results.json (or into ``out_dir``); return the paths.

    ``json`` is results.json itself, already written by the run, so it is only listed. Evidence paths in
    the results are read relative to the folder holding results.json, wherever the output goes. The PDF
    comes last: :class:`~diagnose.render.pdf.PdfUnavailable` (WeasyPrint's system libraries missing)
    carries the files written before it.
    """
    _check_formats(formats)
    listed = [results_path] if "json" in formats else []
    if not formats - {"json"}:  # nothing to draw: results.json is not read (493 MB at 16,384 hosts)
        return listed
    try:  # the document is ours alone: cleaned without a copy, let go before the PDF's layout
        written = _write(
            read_cleaned(results_path),
            formats,
            out_dir or results_path.parent,
            results_path.parent,
            release=True,
        )
    except PdfUnavailable as exc:
        exc.written = [*listed, *exc.written]
        raise
    return [*listed, *written]


def render_from_dict(
    results: dict[str, Any],
    formats: set[str],
    out_dir: Path,
    evidence_dir: Path | None = None,
    cleaned: bool = False,
) -> list[Path]:
    """Like :func:`render` for results already in memory; ``json`` is ignored here (nothing to list).
    The caller's dict is left as it is unless ``cleaned`` says it went through ``clean_in_place``."""
    _check_formats(formats)
    document = results if cleaned else clean_tree(results)
    return _write(document, formats, out_dir, evidence_dir or out_dir, release=not cleaned)


def _write(
    document: dict[str, Any], formats: set[str], out_dir: Path, evidence_dir: Path, release: bool
) -> list[Path]:
    """The formats written from a cleaned document. ``release``: the document is this renderer's own, and
    is emptied once the HTML, JUnit and Prometheus files are written: the PDF's layout needs only the HTML,
    and at 16,384 hosts the rows are some 200 MiB that WeasyPrint's boxes would otherwise come on top of."""
    results = normalize(document)
    writers: dict[str, Callable[[], bytes]] = {
        "junit": lambda: render_junit(results),
        "prom": lambda: render_prometheus(results),
    }
    written: dict[str, Path] = {}
    html = _html(results, evidence_dir) if formats & {"html", "pdf"} else ""
    if "html" in formats:
        written["html"] = write_atomic(out_dir / OUTPUT_NAMES["html"], html.encode("utf-8"))
    for name in ("junit", "prom"):
        if name in formats:
            written[name] = write_atomic(out_dir / OUTPUT_NAMES[name], writers[name]())
    if "pdf" in formats:  # last: a machine without WeasyPrint's libraries still gets every other format
        if release:
            document.clear()
            results.clear()
        try:
            written["pdf"] = write_atomic(out_dir / OUTPUT_NAMES["pdf"], render_pdf(html, evidence_dir))
        except PdfUnavailable as exc:
            exc.written = [written[n] for n in OUTPUT_NAMES if n in written]
            raise
    return [written[n] for n in OUTPUT_NAMES if n in written]  # listed in one order: html, pdf, junit, prom


def _html(results: dict[str, Any], evidence_dir: Path) -> str:
    from diagnose.render.html import render_html
    from diagnose.render.view import build_report

    return render_html(build_report(results, evidence_dir))


def _check_formats(formats: set[str]) -> None:
    unknown = set(formats) - set(FORMATS)
    if unknown:
        raise ValueError(
            f"unknown report {'format' if len(unknown) == 1 else 'formats'}: {', '.join(sorted(unknown))}; known: {', '.join(sorted(FORMATS))}"
        )
