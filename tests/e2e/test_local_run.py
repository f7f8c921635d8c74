"""The README's first command: `diagnose run` with no inventory assesses this machine, then re-rendering."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pypdf import PdfReader

from diagnose.render.tally import coverage_of
from diagnose.targets.local_machine import no_gpu_reason
from tests.support.cli import diagnose

pytestmark = pytest.mark.e2e


def test_default_run_assesses_localhost_and_reports(tmp_path: Path) -> None:
    done = diagnose("run", "--format", "json,html,pdf,junit,prom", cwd=tmp_path)
    assert done.returncode in (0, 1), done.stderr
    runs = list((tmp_path / "diagnose-runs").iterdir())
    assert len(runs) == 1, "a new timestamped folder under ./diagnose-runs/"
    run_dir = runs[0]
    results = json.loads((run_dir / "results.json").read_text())
    assert results["schema"] == 1 and results["run"]["finished"]
    assert [h["name"] for h in results["hosts"]] == ["localhost"] and results["hosts"][0]["reachable"]
    ids = {c["id"] for c in results["checks"]}
    assert {"host.reachable", "net.port_range", "gpu.topology", "ib.devices", "nccl.version"} <= ids
    if no_gpu_reason() is None:
        assert results["run"]["profile"] == "single-node-nvlink"
    else:  # CI: the first run says plainly that there is no GPU, and passes for what the machine is
        assert (
            results["run"]["profile"] == "cpu-testbed"
            and "judged with the cpu-testbed profile" in done.stdout
        )
        assert results["verdict"] == "PASS", [c for c in results["checks"] if c["status"] != "PASS"]
        coverage = results["coverage"]  # issue 23: a PASS that covers little says so, and still exits 0
        assert coverage["limited"] and coverage == coverage_of(results).to_dict(), coverage
        assert "diagnose: PASS, limited coverage" in done.stdout
        measured = f"PASS on what was measured: {coverage['measured']} of {coverage['total']} results"
        assert f"diagnose: {measured}" in done.stdout and "no GPU" in done.stdout
    for name in ("report.html", "report.pdf", "junit.xml", "diagnose.prom"):
        assert (run_dir / name).stat().st_size > 0, name
    assert f"diagnose-runs/{run_dir.name}" in done.stdout and results["verdict"] in done.stdout
    expected_code = 0 if results["verdict"] == "PASS" else 1
    assert done.returncode == expected_code

    (run_dir / "report.pdf").unlink()
    again = diagnose("report", str(run_dir / "results.json"), "--format", "pdf", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    text = "".join(page.extract_text() for page in PdfReader(run_dir / "report.pdf").pages)
    assert "localhost" in text and results["verdict"] in text
    if results["coverage"]["limited"]:
        assert "PASS on what was measured" in " ".join(text.split())
