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


def render_pdf(html: str, base_dir: Path) -> bytes:
    """PDF bytes of ``html``; ``base_dir`` resolves the relative links to raw/ evidence files.
    PdfUnavailable when WeasyPrint or the libraries it loads are missing."""
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # its banner would break the summary on stdout
            from weasyprint import HTML

            return HTML(string=html, base_url=str(base_dir.resolve()) + "/").write_pdf()
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
