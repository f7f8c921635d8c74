"""A machine without Pango (WeasyPrint's system libraries) still gets its verdict and every other format.

The stand-in is a `weasyprint` package ahead of the real one on PYTHONPATH that fails to import the way
WeasyPrint does where `libpango-1.0-0` is missing: its installation banner on stdout, then cffi's OSError
from dlopen (the message as cffi words it).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support.cli import diagnose
from tests.support.paths import REPO

pytestmark = pytest.mark.e2e

FIXTURE = REPO / "tests" / "fixtures" / "results" / "cpu_only_local.json"
NO_PANGO = """
print("\\n-----\\n\\nWeasyPrint could not import some external libraries. Please carefully follow the "
      "installation steps before reporting an issue:\\n"
      "https://doc.courtbouillon.org/weasyprint/stable/first_steps.html#installation\\n\\n-----\\n")
raise OSError(
    "cannot load library 'libpango-1.0-0': libpango-1.0-0: cannot open shared object file: No such file "
    "or directory.  Additionally, ctypes.util.find_library() did not manage to locate a library called "
    "'libpango-1.0-0'"
)
"""


@pytest.fixture
def no_pango(tmp_path: Path) -> Path:
    """A folder whose `weasyprint` fails like one on a machine without Pango."""
    stand_in = tmp_path / "no-pango"
    (stand_in / "weasyprint").mkdir(parents=True)
    (stand_in / "weasyprint" / "__init__.py").write_text(NO_PANGO)
    return stand_in


def pango_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    (line,) = [ln for ln in stderr.splitlines() if "report.pdf" in ln]
    assert line.startswith("diagnose: report.pdf not written: WeasyPrint cannot load its system libraries")
    assert "cannot load library 'libpango-1.0-0'" in line
    assert "apt install libpango-1.0-0 libpangoft2-1.0-0" in line and "dnf install pango" in line
    return line


def test_run_writes_the_other_formats_prints_the_verdict_and_exits_with_its_code(
    tmp_path: Path, no_pango: Path
) -> None:
    out = tmp_path / "run"
    done = diagnose(
        "run", "--skip-benchmarks", "-o", str(out), "--format", "json,html,pdf,junit,prom",
        cwd=tmp_path, before=[no_pango],
    )  # fmt: skip
    pango_line(done.stderr)
    verdict = json.loads((out / "results.json").read_text())["verdict"]
    assert done.returncode == (0 if verdict == "PASS" else 1), done.stderr
    assert done.stdout.startswith(f"diagnose: {verdict}"), done.stdout
    assert "WeasyPrint could not import" not in done.stdout  # its banner does not break the summary
    assert sorted(p.name for p in out.iterdir() if p.is_file()) == [
        "diagnose.prom", "failed.retry", "junit.xml", "report.html", "results.json",
    ]  # fmt: skip
    assert "report.pdf" not in done.stdout


def test_report_renders_the_rest_and_says_what_brings_pdf_support(tmp_path: Path, no_pango: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    shutil.copy(FIXTURE, folder / "results.json")
    done = diagnose("report", str(folder), "--format", "html,pdf,junit", cwd=tmp_path, before=[no_pango])
    assert done.returncode == 0, done.stderr
    pango_line(done.stderr)
    assert done.stdout.split() == [str(folder / "report.html"), str(folder / "junit.xml")]
    assert not (folder / "report.pdf").exists()
