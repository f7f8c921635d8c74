"""``diagnose report``: the reports of a finished run rendered again from its results.json, no host touched.

Also the rendering step ``diagnose trace`` shares: a renderer that fails leaves results.json complete, so
the failure is handed back (with its traceback) for the CLI to show, never raised past it.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from pathlib import Path

from diagnose.core.errors import ConfigError
from diagnose.engine.results import SCHEMA
from diagnose.engine.run import parse_formats
from diagnose.render.load import read_results
from diagnose.render.render import render


@dataclass
class ReportRequest:
    """A results.json checked readable and of this schema, the formats, and where the reports go."""

    results: Path
    formats: set[str]
    out: Path | None


@dataclass
class Rendered:
    """The files written, or (``written`` None) the traceback of the renderer that failed."""

    written: list[Path] | None
    failure: str = ""


def prepare_report(results: str, out: str | None, formats: str) -> ReportRequest:
    """Check the arguments of ``diagnose report``; a ConfigError (exit 2) says what is wrong with which."""
    chosen = parse_formats(formats)
    path = Path(results)
    if path.is_dir():  # a run folder
        path = path / "results.json"
    if not path.is_file():
        raise ConfigError(f"{results}: no such results file or run folder")
    try:
        document = read_results(path)
    except ValueError as exc:
        raise ConfigError(f"{path}: not a results.json: {str(exc).splitlines()[0]}") from None
    if document.get("schema") != SCHEMA:
        raise ConfigError(f"{path}: results schema {document.get('schema')!r}, this diagnose reads {SCHEMA}")
    folder = Path(out) if out else None
    if folder is not None:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"--out {folder}: cannot create: {exc.strerror or exc}") from None
    return ReportRequest(path, chosen, folder)


def render_reports(results: Path, formats: set[str], out: Path | None = None) -> Rendered:
    """Render ``results`` in ``formats`` (beside it, or into ``out``)."""
    try:
        return Rendered(render(results, formats, out))
    except Exception:
        return Rendered(None, traceback.format_exc())
