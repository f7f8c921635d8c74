"""End to end through the renderers: real weasyprint PDFs read back, the HTML opened in headless Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from PIL import Image
from pypdf import PdfReader

from diagnose.render import render
from tests.support.paths import FIXTURES

RESULTS = FIXTURES / "results"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _copy_run(name: str, dest: Path) -> Path:
    """A run folder like `diagnose run` leaves: results.json with its raw/ evidence beside it."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(RESULTS / name, dest / "results.json")
    shutil.copytree(RESULTS / "raw", dest / "raw")
    return dest / "results.json"


def _pdf_text(path: Path) -> tuple[int, str]:
    reader = PdfReader(path)
    text = "\n".join(page.extract_text() or "" for page in reader.pages)
    return len(reader.pages), " ".join(text.split())


def _chromium(html: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        return subprocess.run(
            [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *extra, html.as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )


@pytest.fixture(scope="module")
def cluster_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    results = _copy_run("cluster_failures.json", tmp_path_factory.mktemp("cluster"))
    written = render(results, {"html", "pdf", "junit", "prom", "json"})
    assert [p.name for p in written] == [
        "results.json",
        "report.html",
        "report.pdf",
        "junit.xml",
        "diagnose.prom",
    ]
    return results.parent


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("hostile")
    results = _copy_run("hostile.json", base / "run")
    evil = base / "run" / "raw" / "evil"
    evil.mkdir()
    evil_bytes = (
        b"<script>alert('evidence')</script>\n" + b"\xff\xfe\xc3(\x00\x1b[0m\n" + b"L" * 200_000 + b"\n"
    )
    (evil / "out.txt").write_bytes(evil_bytes + b"line\n" * 2000)
    (base / "secret.txt").write_text("TOP SECRET OUTSIDE")
    render(results, {"html", "pdf"}, out_dir=base / "out")
    return base


def test_pdf_reads_as_an_acceptance_document(cluster_run: Path) -> None:
    pages, text = _pdf_text(cluster_run / "report.pdf")
    assert 8 <= pages <= 30
    for expected in (
        "GPU CLUSTER ACCEPTANCE REPORT",
        "inventories/prod-h100-a.yaml",
        "Verdict",
        "FAIL",
        "Accepted by",
        "mlopez@ctl01",
        "h100-8x-ndr400",
        "Operational checklist",
        "KV-cache transfer latency NOT COVERED",
        "mlx5_2 port 1 is Down",
        "Reseat or replace the cable",
        "Host × check matrix",
        "NET/IB",
        "gpu05 (FAIL): gpu05 is slow",
        "Environment record",
        "NCCL_P2P_DISABLE",
        "Appendix: evidence excerpts",
        "Physical state: Polling",
    ):
        assert expected in text, expected
    first = " ".join((PdfReader(cluster_run / "report.pdf").pages[0].extract_text() or "").split())
    assert "Sign-off" in first and "56" in first  # the cover holds the sign-off block and the GPU count


def test_first_page_shows_the_verdict_in_large_red_type(cluster_run: Path, tmp_path: Path) -> None:
    subprocess.run(
        [
            "pdftoppm",
            "-r",
            "60",
            "-png",
            "-f",
            "1",
            "-l",
            "1",
            str(cluster_run / "report.pdf"),
            str(tmp_path / "p"),
        ],
        check=True,
    )
    (png,) = tmp_path.glob("p*.png")
    image = Image.open(png).convert("RGB")
    width, height = image.size
    top = image.crop((0, 0, width, height // 3))
    colours = top.getcolors(maxcolors=width * height) or []
    red = sum(count for count, (r, g, b) in colours if r > 150 and g < 60 and b < 60)
    assert red > 1500, red  # the FAIL glyphs at 54 pt, not a thin border


def test_html_loads_in_chromium_without_console_errors(cluster_run: Path) -> None:
    html = cluster_run / "report.html"
    shot = cluster_run / "report.png"
    run = _chromium(
        html, "--enable-logging=stderr", "--v=0", f"--screenshot={shot}", "--window-size=1280,1800"
    )
    assert run.returncode == 0, run.stderr[-2000:]
    console = [line for line in run.stderr.splitlines() if ":CONSOLE" in line]
    assert console == []
    assert shot.stat().st_size > 20_000
    dom = _chromium(html, "--dump-dom").stdout
    assert "<svg" in dom and "Operational checklist" in dom and "gpu03" in dom


def test_hostile_strings_stay_text_in_the_browser(hostile_run: Path) -> None:
    html = hostile_run / "out" / "report.html"
    run = _chromium(
        html, "--enable-logging=stderr", "--v=0", "--dump-dom", f"--screenshot={hostile_run / 'h.png'}"
    )
    assert [line for line in run.stderr.splitlines() if ":CONSOLE" in line] == []
    dom = run.stdout
    assert "PWNED" not in re.findall(r"<title>(.*?)</title>", dom, re.S)[0]
    # No element came from the data: every tag in the DOM is one the template writes.
    tags = set(re.findall(r"<([a-zA-Z][a-zA-Z0-9-]*)", dom))
    assert not tags & {"script", "img", "iframe", "b", "i", "a" + "udio"}, tags
    assert '&lt;script&gt;alert("host")&lt;/script&gt;' in dom
    assert "bad\\xff\\xfename\\x1b[31m" in dom
    assert "{{ 7*7 }}" in dom  # template syntax in data is not evaluated
    assert "TOP SECRET OUTSIDE" not in dom and "root:x:0:0" not in dom
    assert "not read: the path leaves the results folder" in dom


def test_hostile_strings_stay_text_in_the_pdf(hostile_run: Path) -> None:
    pages, text = _pdf_text(hostile_run / "out" / "report.pdf")
    assert pages < 40  # cut outputs and names keep a hostile run printable
    assert '<script>alert("host")</script>' in text
    assert "<img src=x onerror=alert(1)>.yaml" in text
    assert "<script>alert('evidence')</script>" in text
    assert "[line cut:" in text and "-byte file are shown" in text
    assert "TOP SECRET OUTSIDE" not in text


def test_report_of_a_run_without_evidence_notes_missing_files(tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    shutil.copy(RESULTS / "cluster_failures.json", results)
    (html,) = render(results, {"html"})
    text = html.read_text()
    assert text.count("evidence file not found next to results.json") >= 3
