"""The report by cause: the first page's top causes, one finding per cause, what to do per host, one
numbering of the chapters, and observed/expected without JSON blobs; rendered and read back."""

from __future__ import annotations

import html as html_lib
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from diagnose.catalog.actions import action_of
from diagnose.render.load import clean_tree, normalize
from diagnose.render.render import render, render_from_dict
from diagnose.render.view import build_report
from tests.support.paths import FIXTURES

RESULTS = FIXTURES / "results"


def _load(name: str) -> dict[str, Any]:
    return json.loads((RESULTS / name).read_text())


def with_actions(document: dict[str, Any]) -> dict[str, Any]:
    """A recorded run as this version writes it: every row that is not PASS with the action its id
    declares (the fixtures were recorded before results carried one)."""
    for row in document["checks"]:
        action = action_of(row["id"], row["status"], row.get("message") or "")
        if action is not None:
            row["action"] = action
    return document


def _html(document: dict[str, Any], tmp_path: Path) -> str:
    (written,) = render_from_dict(document, {"html"}, tmp_path)
    return written.read_text()


def _hung_host() -> dict[str, Any]:
    """One wedged host: eleven GPU checks whose commands timed out, all one cause."""
    ids = [f"gpu.{name}" for name in ("xid", "memory", "clocks", "pcie", "nvlink", "topology")]
    ids += ["gpu.persistence", "gpu.fabricmanager", "gpu.sxid", "gpu.processes", "gpu.dcgm"]
    checks = [
        {
            "id": check_id,
            "host": "gpu17",
            "checklist": "H",
            "status": "ERROR",
            "message": f"`nvidia-smi -q -x` timed out on gpu17 after {20 + n} s (hung tool or device?)",
            "action": "reboot",
        }
        for n, check_id in enumerate(ids)
    ]
    checks.append(
        {"id": "host.reachable", "host": "gpu17", "checklist": "–", "status": "PASS", "message": "ok"}
    )
    return {
        "run": {"id": "r1"},
        "hosts": [{"name": "gpu17", "reachable": True}],
        "checks": checks,
        "verdict": "ERROR",
    }


def test_one_cause_on_eleven_checks_is_one_finding(tmp_path: Path) -> None:
    report = build_report(normalize(clean_tree(_hung_host())), tmp_path)
    (finding,) = report.findings
    assert len(finding.check_ids) == 11 and finding.where == "1 host: gpu17"
    assert finding.action == "reboot the host" and len(finding.lines) == 6 and finding.more_lines == 5
    html = _html(_hung_host(), tmp_path)
    findings = html[html.index('id="findings"') : html.index('id="matrix"')]
    assert findings.count('<div class="finding ') == 1
    assert "What to do, by host" in findings and "reboot the host" in findings


def test_findings_and_the_cover_say_what_to_do_from_the_recorded_action(tmp_path: Path) -> None:
    report = build_report(normalize(clean_tree(with_actions(_load("cluster_failures.json")))), tmp_path)
    port = next(f for f in report.findings if f.check_id == "ib.port_state")
    assert port.action == "reseat or replace the cable" and port.todo == port.action
    assert [f.status for f in report.top_causes] == ["FAIL"] * 5
    cable = next(a for a in report.actions if a.action == "reseat or replace the cable")
    # the straggler search's accusation of gpu05 is the slow link's consequence, listed under it
    assert cable.hosts == "gpu[03,05]" and cable.check_ids == ["ib.link_rate", "ib.port_state"]
    link = next(f for f in report.findings if f.check_id == "ib.link_rate")
    assert link.consequences == "+2 consequences (bench.straggler, bench.all_reduce)"
    html = _html(with_actions(_load("cluster_failures.json")), tmp_path)
    cover = html[html.index('id="cover"') : html.index('id="contents"')]
    assert "Why it did not pass: top causes" in cover and "and 3 more causes" in cover
    assert "+2 consequences (bench.straggler, bench.all_reduce)" in cover


def test_older_results_without_actions_fall_back_to_the_remediation(tmp_path: Path) -> None:
    report = build_report(normalize(clean_tree(_load("cluster_failures.json"))), tmp_path)
    port = next(f for f in report.findings if f.check_id == "ib.port_state")
    assert port.action is None and port.todo.startswith("Reseat or replace the cable")
    assert report.actions == []
    assert "What to do, by host" not in _html(_load("cluster_failures.json"), tmp_path)


def test_a_passing_run_has_no_cause_on_its_cover(tmp_path: Path) -> None:
    html = _html(_load("h200x2_real_health.json"), tmp_path)
    assert "top causes" not in html and "No check failed, errored or warned." in html
    warned = _load("cluster_failures.json") | {"verdict": "PASS"}
    assert "top causes" not in _html(warned, tmp_path)


def _numbering(html: str) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]:
    contents = re.findall(
        r'<li><a href="#([\w-]+)"><span class="toc-n">([^<]+)</span> ([^<]+)</a></li>', html
    )
    headings = re.findall(r'<section class="chapter[^"]*" id="([\w-]+)">\s*<h2>(\S+) ([^<]+)</h2>', html)
    unescape = html_lib.unescape
    return (
        [(k, n, unescape(t)) for k, n, t in contents],
        [(k, n, unescape(t)) for k, n, t in headings],
    )


@pytest.mark.parametrize(
    "fixture", ["hostile.json", "h200x2_acceptance_extras.json", "cluster_failures.json"]
)
def test_the_contents_and_the_headings_are_one_numbering(fixture: str, tmp_path: Path) -> None:
    contents, headings = _numbering(_html(_load(fixture), tmp_path))
    assert contents == headings and len(contents) >= 6
    numbers = [n for _key, n, _title in contents]
    # the appendix only where a finding cites evidence: the PASS of the extras cites none
    cites = fixture != "h200x2_acceptance_extras.json"
    appendix = ["A"] if cites else []
    assert numbers == [*map(str, range(1, len(numbers) + 1 - len(appendix))), *appendix]
    assert (contents[-1][2] == "Appendix: evidence excerpts") == cites


def test_the_extras_chapters_are_numbered_in_turn(tmp_path: Path) -> None:
    contents, _ = _numbering(_html(_load("h200x2_acceptance_extras.json"), tmp_path))
    keys = [key for key, _n, _t in contents]
    assert keys[:5] == ["checklist", "findings", "matrix", "benchmarks", "training"]
    assert keys[-1] == "environment" and "appendix" not in keys  # no finding cites evidence


def test_observed_and_expected_are_no_json_blobs(tmp_path: Path) -> None:
    document = _load("h200x2_acceptance_extras.json")
    tail = next(c for c in document["checks"] if c["id"] == "train.overlap")
    tail.update(status="FAIL", message="overlap below the floor")
    document["verdict"] = "FAIL"
    html = _html(document, tmp_path)
    findings = html[html.index('id="findings"') : html.index('id="matrix"')]
    assert "backward (ms)" in findings and "min overlap ratio 0.7" in findings
    assert "backward_ms" not in findings and "&#34;min_overlap_ratio&#34;" not in findings


def _first_page(tmp_path: Path, document: dict[str, Any]) -> tuple[Image.Image, str]:
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.json").write_text(json.dumps(document))
    shutil.copytree(RESULTS / "raw", run / "raw")
    render(run / "results.json", {"pdf"})
    pdf = run / "report.pdf"
    subprocess.run(
        ["pdftoppm", "-png", "-r", "60", "-f", "1", "-l", "1", str(pdf), str(tmp_path / "p")], check=True
    )
    (png,) = tmp_path.glob("p*.png")
    text = subprocess.run(
        ["pdftotext", "-f", "1", "-l", "1", "-layout", str(pdf), "-"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return Image.open(png).convert("L"), " ".join(text.split())


def test_the_first_page_of_a_failing_run_shows_its_top_causes_and_the_sign_off(tmp_path: Path) -> None:
    image, text = _first_page(tmp_path, with_actions(_load("cluster_failures.json")))
    width, height = image.size
    inked = sum(image.histogram()[:128])
    assert inked > 0.02 * width * height, inked  # not a blank page
    for expected in (
        "Why it did not pass: top causes",
        "reseat or replace the cable",
        "ib.port_state",
        "gpu07",
        "and 3 more causes",
        "Sign-off",
        "Accepted by",
    ):
        assert expected in text, expected
