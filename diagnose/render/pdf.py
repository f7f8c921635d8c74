"""The PDF: weasyprint paginating the very HTML string the browser gets, so the two never disagree.

WeasyPrint loads the system's Pango, GObject and HarfBuzz libraries when it is imported; on a machine
without them the import raises OSError (after printing a banner on stdout). A machine that cannot draw a
PDF has still measured its cluster, so that is no failed run: :class:`PdfUnavailable` says which system
packages bring PDF support, and the renderer writes every other format (docs/contracts.md, exit codes).
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

from diagnose.core.install_hint import package_command

#: The system packages that bring WeasyPrint's libraries, as its installation guide names them.
INSTALL_HINT = (
    "install Pango: apt install libpango-1.0-0 libpangoft2-1.0-0 (Debian, Ubuntu) or dnf install pango "
    "(Fedora, RHEL)"
)


class PdfUnavailable(Exception):
    """WeasyPrint cannot run here; the message says why and what to install. ``written`` is what the
    renderer wrote of the other formats before it gave up on the PDF."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.written: list[Path] = []


#: Shown when the cover cannot hold the sign-off whole: the cover's copy gives way to the one at the very end
#: (reports/report.html.j2), and the cover says where it went. WeasyPrint takes it as a user stylesheet,
#: which the document's own rules outweigh unless it says !important.
SIGNOFF_LAST = """
.cover .signoff { display: none !important; }
.cover .signoff-pointer { display: block !important; margin-top: 10pt; font-weight: bold; }
.signoff-last { display: block !important; }
"""


#: Lays out the cover alone: the sign-off's place is decided on it before the whole document is laid out once.
#: The cover ends in a page break, so its first page is the same whatever follows it.
COVER_ONLY = "body > :not(#cover) { display: none !important; }"
#: Where the template's cover ends. The cover's layout reads the HTML up to here only: WeasyPrint matches every
#: selector against every element it parses, hidden or not, and the chapters after the cover are nearly all
#: of a large run's elements (a quarter of the PDF's time at 16,384 hosts went to the cover's own layout).
COVER_END = "<!-- end of cover -->"

#: Print rules that change no page but what the layout costs. A table in automatic layout measures the widest
#: and narrowest line of every cell first, and a cell that may break anywhere (host lists, a benchmark's
#: straggler lines) is measured at every character: at 16,384 hosts the six benchmark tables took half of the
#: PDF's layout time (docs/scale.md). Their header column has a set width, so a fixed layout gives the same
#: columns without measuring.
LAYOUT = "table.kv { table-layout: fixed; }"


def _on_one_page(document: Any, first: str, last: str) -> int | None:
    """The page that holds both anchors, or None. Both are looked up: ``break-inside: avoid`` keeps a block
    whole only where a page can hold it, so its first line's page alone would not prove it whole."""
    pages = {name: index for index, page in enumerate(document.pages) for name in page.anchors}
    if first in pages and pages.get(last) == pages[first]:
        return int(pages[first])
    return None


def render_pdf(html: str, base_dir: Path) -> bytes:
    """PDF bytes of ``html``; ``base_dir`` resolves the relative links to raw/ evidence files.
    PdfUnavailable when WeasyPrint or the libraries it loads are missing.

    The sign-off must be whole on the first page or on the last, where a signer looks for it: a cover too
    full to hold it (a long profile note, many stages, five causes) gives it to the end instead. Where it
    lands is found on a layout of the cover alone, so that the whole document (some 86 pages at 16,384
    hosts) is laid out once, not once more whenever the cover is too full."""
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # its banner would break the summary on stdout
            from weasyprint import CSS, HTML

            page = HTML(string=html, base_url=str(base_dir.resolve()) + "/")
            sheets = [CSS(string=LAYOUT)]
            if 'id="signoff"' in html:
                cover_html = html.partition(COVER_END)[0]
                cover = HTML(string=cover_html, base_url=page.base_url).render(
                    stylesheets=[*sheets, CSS(string=COVER_ONLY)]
                )
                if _on_one_page(cover, "signoff", "signoff-end") != 0:
                    sheets.append(CSS(string=SIGNOFF_LAST))
            return bytes(page.render(stylesheets=sheets).write_pdf())
    except ImportError as exc:
        raise PdfUnavailable(
            f"report.pdf not written: the weasyprint package is missing ({exc}); "
            f"{package_command('weasyprint')}, or leave pdf out of --format"
        ) from None
    except OSError as exc:  # a library WeasyPrint loads with dlopen: Pango, GObject, HarfBuzz, fontconfig
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise PdfUnavailable(
            f"report.pdf not written: WeasyPrint cannot load its system libraries ({reason}); "
            f"{INSTALL_HINT}, or leave pdf out of --format"
        ) from None
