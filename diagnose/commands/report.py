"""``diagnose report``: the reports of a finished run rendered again from its results.json, no host touched.

Also the rendering step ``diagnose trace`` shares: a renderer that fails leaves results.json complete, so
the failure is handed back (with its traceback) for the CLI to show, never raised past it.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from pathlib import Path

from diagnose.core.errors import ConfigError
from diagnose.engine.results import SCHEMA, to_json, write_text_atomic
from diagnose.engine.run import parse_formats
from diagnose.engine.run_ids import RESULTS_FILE, find_results, folder_run_id, other_run
from diagnose.render.atomic import write_atomic
from diagnose.render.causes import causes_json
from diagnose.render.load import read_results
from diagnose.render.pdf import PdfUnavailable
from diagnose.render.render import render


@dataclass
class ReportRequest:
    """A results.json checked readable and of this schema, the formats, and where the reports go."""

    results: Path
    formats: set[str]
    out: Path | None


@dataclass
class Rendered:
    """The files written, or (``written`` None) the traceback of the renderer that failed; ``notes``: what
    was not written and why (a PDF without WeasyPrint's libraries), said on stderr."""

    written: list[Path] | None
    failure: str = ""
    notes: list[str] = field(default_factory=list)


def prepare_report(results: str, out: str | None, formats: str, db: str | None = None) -> ReportRequest:
    """Check the arguments of ``diagnose report``; a ConfigError (exit 2) says what is wrong with which.

    ``out`` must not hold another run's record or reports: the new files would sit beside them, each
    set half of a run. It may hold this run's (a report rendered again), and gets a copy of its
    results.json, so that the folder always says which run its reports show."""
    chosen = parse_formats(formats)
    path = find_results(results, db)
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
        _check_out(folder, path, str(document.get("run", {}).get("id")))
    return ReportRequest(path, chosen, folder)


def _check_out(folder: Path, results: Path, run_id: str) -> None:
    """Refuse an ``--out`` holding another run; copy this run's record into one that may take its reports."""
    if folder.resolve() == results.parent.resolve():
        return
    found = other_run(folder)
    if found is not None and folder_run_id(folder) != run_id:
        raise ConfigError(
            f"--out {folder}: holds another run ({found}); give a new or empty folder for run {run_id}'s "
            "reports, or move that run away first"
        )
    try:
        write_atomic(folder / RESULTS_FILE, results.read_bytes())
    except OSError as exc:
        raise ConfigError(f"--out {folder}: cannot write: {exc.strerror or exc}") from None


def render_reports(results: Path, formats: set[str], out: Path | None = None) -> Rendered:
    """Render ``results`` in ``formats`` (beside it, or into ``out``)."""
    try:
        return Rendered(render(results, formats, out))
    except PdfUnavailable as exc:
        return Rendered(exc.written, notes=[str(exc)])
    except Exception:
        return Rendered(None, traceback.format_exc())


def record_causes(request: ReportRequest) -> Path | None:
    """The run's results.json (its copy in ``--out``) with ``causes`` worked out from its rows, so that a run
    recorded before causes existed, or by an older diagnose, gets them too (results.json is always among
    the formats); the file written, or None where it already said the same."""
    target = request.out / RESULTS_FILE if request.out is not None else request.results
    document = read_results(target)
    causes = causes_json(document)
    if document.get("causes") == causes:
        return None
    document["causes"] = causes
    try:
        write_text_atomic(target, to_json(document) + "\n")
    except OSError:  # a run folder that is read-only here still renders; its record stays as it was
        return None
    return target
