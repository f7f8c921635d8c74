"""The campaign certificate: the PDF read back with pdftotext, the HTML escaped and opened in headless Chromium,
an old certificate.json with keys missing, and the PDF's folded form past PDF_HOSTS hosts."""

from __future__ import annotations

import copy
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from diagnose.render import certificate
from diagnose.render.certificate import certificate_html, write_certificate
from diagnose.render.pdf import PdfUnavailable

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
]
RUN_A, RUN_B, RUN_C = "20261127T122328Z-7b33", "20261128T081500Z-c0de", "20261128T140000Z-99aa"
PHASES = ["host", "stress", "burnin", "fleet", "perftest", "collective", "kv"]


def _evidence(verdicts: dict[str, str] | None = None) -> dict[str, Any]:
    verdicts = verdicts or {}
    return {
        phase: {
            "run_id": RUN_A if n < 3 else RUN_B,
            "at": "2026-11-27T12:40:00+00:00" if n < 3 else "2026-11-28T08:30:00+00:00",
            "verdict": verdicts.get(phase, "PASS"),
            "nodes": None,
        }
        for n, phase in enumerate(PHASES)
    }


def _identity(serial: str) -> dict[str, Any]:
    return {
        "gpus": {"00000000:18:00.0": serial, "00000000:2A:00.0": f"{serial[:-1]}9"},
        "hcas": {"mlx5_0/1": "0xb8cef6030033a8f0"},
        "cables": {"mlx5_0/1": "MT2251XZ01234"},
        "firmware": {"HCA mlx5_0": "28.39.1002", "VBIOS 00000000:18:00.0": "96.00.74.00.01"},
        "driver": "580.159.04",
        "nccl": "2.28.9",
    }


def _host(name: str, status: str, serial: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "status": status,
        "evidence": _evidence(),
        "missing": [],
        "cause": None,
        "action": None,
        "burnin_gpu_hours": 16.0,
        "identity": _identity(serial),
    } | extra


CERT: dict[str, Any] = {
    "schema": 1,
    "issued": "2026-11-28T15:00:00+00:00",
    "operator": "A. Lovelace",
    "campaign": {
        "name": "dc3-pod7",
        "created": "2026-11-25T09:00:00+00:00",
        "first_run": "2026-11-25T10:00:00+00:00",
        "last_run": "2026-11-28T14:00:00+00:00",
        "days": 3.2,
        "playbook": "acceptance",
        "inventory": "/path/prod.yaml",
        "runs": 3,
    },
    "verdict": "NOT ACCEPTED",
    "verdict_note": "1 failed; training reference not done",
    "counts": {"hosts": 4, "accepted": 2, "pending": 0, "failed": 1, "repaired": 0, "excluded": 1},
    "gpus": 16,
    "burnin_gpu_hours": 48.0,
    "needs": {"host": PHASES, "cluster": ["full_scale", "training"]},
    "phase_words": {
        "host": "host checks",
        "stress": "GPU stress",
        "burnin": "burn-in",
        "fleet": "fleet probes",
        "perftest": "per-NIC perftest",
        "collective": "collective",
        "kv": "KV transfer",
        "full_scale": "full-scale collective",
        "training": "training reference",
    },
    "hosts": [
        _host("node1", "accepted", "1652823054321"),
        _host(
            "node2",
            "failed",
            "1652823054400",
            evidence={k: v for k, v in _evidence({"burnin": "FAIL"}).items() if k in PHASES[:3]},
            missing=PHASES[3:],
            cause="GPU 3 fell off the bus (Xid 79) under burn-in",
            action="rma_gpu",
        ),
        _host("node3", "accepted", "1652823054500"),
        _host("node4", "excluded", "1652823054600", evidence={}, missing=PHASES, burnin_gpu_hours=0.0),
    ],
    "cluster": {
        "full_scale": {
            "verdict": "PASS",
            "run_id": RUN_C,
            "at": "2026-11-28T14:00:00+00:00",
            "nodes": 2,
            "detail": "all_reduce on 2 nodes, 330.7 GB/s busbw",
            "satisfied": True,
        },
        "training": None,
    },
    "reference": [
        {
            "key": "gemm.bf16|NVIDIA H200",
            "what": "GEMM bf16, NVIDIA H200",
            "value": 701.2,
            "unit": "TFLOP/s",
            "hosts": 2,
            "run_id": RUN_A,
            "at": "2026-11-27T12:40:00+00:00",
        }
    ],
    "excluded": [
        {"host": "node4", "reason": "PSU RMA pending", "by": "ops", "at": "2026-11-26T09:00:00+00:00"}
    ],
    "history": [
        {
            "at": "2026-11-27T12:41:00+00:00",
            "host": "node2",
            "kind": "failed",
            "run_id": RUN_A,
            "text": "burn-in: GPU 3 Xid 79 after 41 min",
        },
        {
            "at": "2026-11-28T09:00:00+00:00",
            "host": None,
            "kind": "reference",
            "run_id": RUN_A,
            "text": "set",
        },
    ],
    "runs": [
        {
            "run_id": RUN_A,
            "started": "2026-11-27T12:23:28+00:00",
            "verdict": "FAIL",
            "hosts": 4,
            "kind": "run",
        },
        {
            "run_id": RUN_B,
            "started": "2026-11-28T08:15:00+00:00",
            "verdict": "PASS",
            "hosts": 2,
            "kind": "run",
        },
        {
            "run_id": RUN_C,
            "started": "2026-11-28T14:00:00+00:00",
            "verdict": "PASS",
            "hosts": 2,
            "kind": "run",
        },
    ],
    "digest": "5d41402abc4b2a76b9719d911017c592aa3c0bbd9fa4b1d66c2f1e2a0d5e6f70",
}


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return write_certificate(copy.deepcopy(CERT), tmp_path_factory.mktemp("certificate"))


def _pdf_text(pdf: Path, *layout: str) -> str:
    return subprocess.run(
        ["pdftotext", *layout, str(pdf), "-"], capture_output=True, text=True, check=True
    ).stdout


def test_writes_the_html_then_the_pdf(written: list[Path]) -> None:
    assert [p.name for p in written] == ["certificate.html", "certificate.pdf"]
    assert written[1].read_bytes().startswith(b"%PDF")


def test_the_pdf_states_verdict_counts_evidence_parts_exclusions_and_history(written: list[Path]) -> None:
    cover = " ".join(_pdf_text(written[1], "-l", "1").split())
    assert "NOT ACCEPTED 1 failed; training reference not done" in cover
    assert "Last run 2026-11-28 14:00:00 UTC (3.2 days) Runs 3 GPUs 16 Burn-in 48.0 GPU-hours" in cover
    assert CERT["digest"] in cover and "Tested by" in cover and "Accepted by" in cover and "Refused" in cover
    text = " ".join(_pdf_text(written[1]).split())
    counts = [" ".join(line.split()) for line in _pdf_text(written[1], "-layout").splitlines()]
    assert "4 2 0 1 0 1" in counts  # hosts, accepted, pending, failed, repaired, excluded: the cover's row
    # node1's line names the run that evidenced its first three phases, and the date
    assert f"node1 · accepted · host checks, GPU stress, burn-in: {RUN_A} 2026-11-27" in text
    assert "node2 · failed" in text and f"burn-in: FAIL {RUN_A}" in text
    assert "cause: GPU 3 fell off the bus (Xid 79) under burn-in · to do: replace the GPU (RMA)" in text
    assert "00000000:18:00.0 1652823054321" in text  # the as-built record, GPU serial by bus id
    assert "node4 · PSU RMA pending · left out by ops" in text
    assert f"node2 · failed · run {RUN_A} · burn-in: GPU 3 Xid 79 after 41 min" in text
    assert f"dc3-pod7 · {RUN_A} · 2026-11-27 12:40:00 UTC" in text  # the reference figure's source
    assert "all_reduce on 2 nodes, 330.7 GB/s busbw" in text and "not run" in text


def test_the_pdf_of_a_small_cluster_lists_every_host_and_part(written: list[Path]) -> None:
    text = " ".join(_pdf_text(written[1]).split())
    for serial in ("1652823054321", "1652823054400", "1652823054500", "1652823054600"):
        assert serial in text
    assert "leaves out the parts" not in text


def test_a_host_name_with_markup_stays_text() -> None:
    cert = copy.deepcopy(CERT)
    cert["hosts"][0]["name"] = "<script>alert('host')</script>"
    cert["history"][0]["text"] = "<img src=x onerror=alert(1)>"
    html = certificate_html(cert)
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(&#39;host&#39;)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


@pytest.mark.parametrize(
    "cert",
    [
        {},
        {key: None for key in CERT},
        {"verdict": "ACCEPTED", "hosts": [{"name": "n1", "evidence": None, "identity": None}], "counts": {}},
        {
            "hosts": [{"name": "n1", "evidence": {"host": None}, "identity": {"gpus": "?"}}, "junk"],
            "runs": [7],
        },
        {
            "cluster": {"full_scale": {"at": 3}},
            "needs": {"cluster": ["full_scale"]},
            "history": [{"at": "x"}],
        },
    ],
)
def test_an_old_or_partial_certificate_renders_what_is_there(cert: dict[str, Any]) -> None:
    html = certificate_html(cert)
    assert "Acceptance certificate: —" in html  # the campaign's name is missing, and says so
    assert "Sign-off" in html and "Tested by" in html


def test_missing_keys_render_as_missing_not_as_none(tmp_path: Path) -> None:
    cert = copy.deepcopy(CERT)
    for key in ("campaign", "counts", "gpus", "digest"):
        del cert[key]
    del cert["hosts"][0]["identity"], cert["hosts"][0]["burnin_gpu_hours"]
    _html, pdf = write_certificate(cert, tmp_path)
    text = " ".join(_pdf_text(pdf).split())
    assert "None" not in text and "NOT ACCEPTED" in text
    assert "First run — " in text and "GPUs —" in text
    assert "node1 · accepted" in text and "burn-in — GPU-h" not in text


def test_past_pdf_hosts_the_pdf_folds_hosts_and_leaves_the_parts_out(monkeypatch: pytest.MonkeyPatch) -> None:
    cert = copy.deepcopy(CERT)
    cert["hosts"][2]["burnin_gpu_hours"] = 15.5
    browser = certificate_html(cert)
    monkeypatch.setattr(certificate, "PDF_HOSTS", 2)
    paged = " ".join(certificate_html(cert, paged=True).split())
    # node1 and node3 read the same but for their names and hours: one line, the hours as a range
    assert "node[1,3] (2) · accepted" in paged and "burn-in 15.5 to 16.0 GPU-h" in paged
    assert "This PDF folds 4 hosts into 3 lines" in paged
    assert "1652823054321" not in paged
    assert "leaves out the parts of 4 hosts: their 16 serials" in paged and CERT["digest"] in paged
    assert "firmware HCA mlx5_0 28.39.1002" in paged  # the versions stay: a few lines for every host
    for serial in ("1652823054321", "1652823054500"):  # the browser's copy keeps every part
        assert serial in browser


def test_without_weasyprint_the_html_is_written_and_named(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def unavailable(html: str, base_dir: Path) -> bytes:
        raise PdfUnavailable("report.pdf not written: no pango")

    monkeypatch.setattr(certificate, "render_pdf", unavailable)
    with pytest.raises(PdfUnavailable) as caught:
        write_certificate(copy.deepcopy(CERT), tmp_path)
    assert caught.value.written == [tmp_path / "certificate.html"]
    assert "node1" in (tmp_path / "certificate.html").read_text()


def _chromium(html: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        return subprocess.run(
            [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *extra, html.as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )


def test_the_browser_shows_the_verdict(tmp_path: Path) -> None:
    html = tmp_path / "certificate.html"
    html.write_text(certificate_html(copy.deepcopy(CERT)), encoding="utf-8")
    shot = tmp_path / "shot.png"
    run = _chromium(
        html, "--enable-logging=stderr", "--v=0", f"--screenshot={shot}", "--window-size=1280,900"
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert [line for line in run.stderr.splitlines() if ":CONSOLE" in line] == []
    dom = _chromium(html, "--dump-dom").stdout
    assert re.search(r'<div class="verdict-word">\s*NOT ACCEPTED\s*</div>', dom)
    image = Image.open(shot).convert("RGB")
    width, height = image.size
    colours = image.crop((0, 0, width, height // 3)).getcolors(maxcolors=width * height) or []
    red = sum(count for count, (r, g, b) in colours if r > 150 and g < 60 and b < 60)
    assert red > 1500, red  # the verdict's letters in the failing colour, not a thin border alone
