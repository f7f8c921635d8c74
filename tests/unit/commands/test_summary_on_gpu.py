"""The terminal's summary of two real runs on the lent H100 (tests/fixtures/gpu_runs/h100-2026-11-25), made
again from their results.json: what the operator saw there is what the recorded results say, cause lines
and actions included, and a healthy machine prints no cause."""

from __future__ import annotations

import json
from pathlib import Path

from diagnose.commands.run import interrupted_lines, summary_lines
from diagnose.engine.results import verdict_of
from diagnose.render.render import render
from tests.support.terminal import agrees_with_capture, unwrapped

CAPTURED = Path(__file__).resolve().parents[2] / "fixtures" / "gpu_runs" / "h100-2026-11-25"


def printed(name: str) -> list[str]:
    """The summary lines as the run printed them (the exit code line and the PDF refusal left out)."""
    lines = (CAPTURED / name).read_text().replace(" 1 host(s), ", " 1 host, ").splitlines()  # captured before
    return [
        line for line in lines if line.startswith(("diagnose: PASS", "diagnose: FAIL", "diagnose: 19", "  "))
    ]


def test_the_failing_run_prints_its_two_causes_with_what_to_do() -> None:
    document = json.loads((CAPTURED / "fail_results.json").read_text())
    out = Path("/tmp/run2")
    lines = summary_lines(document, out, [out / "results.json", out / "report.html"])
    assert agrees_with_capture(lines, printed("fail_terminal.txt"))
    causes = unwrapped(lines)[2:4]
    assert [line.split()[2] for line in causes] == ["gpu.topology", "net.port_range"]
    assert all("→" in line for line in causes)


def test_the_healthy_h100_prints_no_cause() -> None:
    document = json.loads((CAPTURED / "results.json").read_text())
    out = Path("/tmp/run1")
    written = [out / name for name in ("results.json", "report.html", "junit.xml", "diagnose.prom")]
    lines = summary_lines(document, out, written)
    assert document["verdict"] == "PASS"
    assert lines == [line for line in printed("terminal.txt") if not line.startswith("  real")]
    assert not any("→" in line for line in lines)


def test_ctrl_c_on_the_h100_kept_what_was_measured_and_the_report_says_so(tmp_path: Path) -> None:
    """SIGINT during the fleet probe (exit 130 after 5.4 s, nothing left on the host): the host checks
    measured before it are in results.json, the verdict rule makes them INCOMPLETE, not PASS (none failed),
    the lines printed are made again from the stop that results.json recorded, and the report calls the run
    interrupted instead of judging it."""
    document = json.loads((CAPTURED / "interrupted_results.json").read_text())
    run = document["run"]
    assert run["interrupted"] is True and len(document["checks"]) == 41
    assert not any(c["status"] in ("FAIL", "ERROR") for c in document["checks"])
    assert verdict_of(document["checks"], document["benchmarks"], run["interrupted"]) == "INCOMPLETE"
    lines = interrupted_lines(
        Path("/root/out/run1/results.json"), run.get("stopped", []), run.get("not_stopped", [])
    )
    assert lines == (CAPTURED / "interrupted_terminal.txt").read_text().splitlines()
    (tmp_path / "results.json").write_text(json.dumps(document))
    (html,) = render(tmp_path / "results.json", {"html"})
    assert "the run was interrupted: hosts or stages are missing" in html.read_text()
