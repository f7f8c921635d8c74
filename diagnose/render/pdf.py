"""The PDF: weasyprint paginating the very HTML string the browser gets, so the two never disagree."""

from __future__ import annotations

from pathlib import Path

from weasyprint import HTML


def render_pdf(html: str, base_dir: Path) -> bytes:
    """PDF bytes of ``html``; ``base_dir`` resolves the relative links to raw/ evidence files."""
    return HTML(string=html, base_url=str(base_dir.resolve()) + "/").write_pdf()
