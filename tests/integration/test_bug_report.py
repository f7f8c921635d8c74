"""``collect_bug_report: true`` over real sshd test hosts: NVIDIA's bug report is run on each host whose
``gpu.*`` check FAILed (never on a healthy one), brought home under raw/<host>/ with its evidence path in
results.json, cut to ``bug_report_max_bytes`` and said so, and a script that hangs is stopped at
``bug_report_timeout_s`` with every process it started, what it wrote so far still brought home.

Hosts are tests/support/hostkit.py's 8x H100 NDR nodes; the Xid 79 fault is hostkit's; the stand-in
``nvidia-bug-report.sh`` (tests/support/bugreport.py) writes a real log's prologue.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from diagnose.core.units import human_bytes
from tests.support.bugreport import HEADER, TOOL, bug_report_tool
from tests.support.hostkit import PROFILE, healthy_h100, xid_79
from tests.support.paths import REPO
from tests.support.testbed import HostSpec, TestBed

pytestmark = pytest.mark.integration

LIMIT = 4096
TIMEOUT_S = 4


def with_tool(spec: HostSpec, script: str) -> HostSpec:
    return replace(spec, tools={**spec.tools, TOOL: script})


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    work = tmp_path_factory.mktemp("bugreport")
    pids = work / "hung.pids"
    with TestBed(work / "bed") as bed:
        hosts = bed.add_many(
            [
                with_tool(xid_79("g-xid"), bug_report_tool()),
                with_tool(xid_79("g-big"), bug_report_tool(filler_bytes=200_000)),
                with_tool(xid_79("g-hang"), bug_report_tool(hang=True, pid_file=pids)),
                with_tool(healthy_h100("g-ok"), bug_report_tool()),
            ]
        )
        inventory = bed.write_inventory(
            work / "hosts.yaml",
            hosts,
            {"diagnose_profile": PROFILE, "collect_bug_report": True, "bug_report_timeout_s": TIMEOUT_S},
            host_vars={"g-big": {"bug_report_max_bytes": LIMIT}},
        )
        playbook = work / "gpu.yaml"
        playbook.write_text("name: gpu\ndescription: xid\nchecks: [host.reachable, gpu.xid]\n")
        out = work / "out"
        done = subprocess.run(
            [sys.executable, "-m", "diagnose.cli", "run", "-i", str(inventory), "--playbook", str(playbook),
             "-o", str(out), "--format", "json"],
            cwd=work, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        results = json.loads((out / "results.json").read_text())
        mine = f"diagnose-bug-report-{results['run']['id']}"  # the hosts share this machine's /tmp
        left = [bed.ssh(h, f"ls /tmp | grep -c {mine} || true").stdout.strip() for h in hosts]
        yield {
            "done": done,
            "results": results,
            "out": out,
            "pids": [int(p) for p in pids.read_text().split()] if pids.exists() else [],
            "left": left,
        }


def entry(run: dict[str, Any], host: str) -> dict[str, Any]:
    found = [e for e in run["results"].get("bug_report", []) if e["host"] == host]
    assert len(found) == 1, (run["results"].get("bug_report"), run["done"].stderr[-2000:])
    return found[0]


def test_failing_gpu_host_gets_its_report_home(run: dict[str, Any]) -> None:
    assert run["done"].returncode == 1, run["done"].stderr[-2000:]
    report = entry(run, "g-xid")
    assert report["state"] == "collected"
    assert report["checks"] == ["gpu.xid"]
    assert report["evidence"] == "raw/g-xid/nvidia-bug-report.log.gz"
    assert report["truncated"] is False and report["bytes"] == report["size"]
    text = gzip.decompress((run["out"] / report["evidence"]).read_bytes()).decode()
    assert text == HEADER.read_text()


def test_no_report_for_a_healthy_host(run: dict[str, Any]) -> None:
    assert {e["host"] for e in run["results"]["bug_report"]} == {"g-xid", "g-big", "g-hang"}
    assert not (run["out"] / "raw" / "g-ok" / "nvidia-bug-report.log.gz").exists()


def test_a_large_report_is_cut_to_the_cap_and_says_so(run: dict[str, Any]) -> None:
    report = entry(run, "g-big")
    assert report["state"] == "truncated" and report["truncated"] is True
    assert report["bytes"] == LIMIT < report["size"]
    assert f"its first {LIMIT} kept (bug_report_max_bytes)" in report["detail"]
    data = (run["out"] / report["evidence"]).read_bytes()
    assert len(data) == LIMIT
    start = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data)  # a cut gzip still reads from the top
    assert start.decode().startswith(HEADER.read_text())


def test_a_hung_script_is_stopped_with_its_children(run: dict[str, Any]) -> None:
    report = entry(run, "g-hang")
    assert report["state"] == "timed_out"
    assert report["detail"] == f"stopped after {TIMEOUT_S} s (bug_report_timeout_s)"
    assert report["seconds"] < TIMEOUT_S + 15
    assert len(run["pids"]) == 2
    for pid in run["pids"]:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    # What it wrote before it hung came home.
    assert gzip.decompress((run["out"] / report["evidence"]).read_bytes()).decode() == HEADER.read_text()


def test_nothing_is_left_on_the_hosts(run: dict[str, Any]) -> None:
    assert run["left"] == ["0", "0", "0", "0"]


def test_ctrl_c_stops_a_running_report(tmp_path: Path) -> None:
    pids = tmp_path / "hung.pids"
    with TestBed(tmp_path / "bed") as bed:
        host = bed.add(with_tool(xid_79("g-int"), bug_report_tool(hang=True, pid_file=pids)))
        inventory = bed.write_inventory(
            tmp_path / "hosts.yaml", [host], {"diagnose_profile": PROFILE, "collect_bug_report": True}
        )
        playbook = tmp_path / "gpu.yaml"
        playbook.write_text("name: gpu\ndescription: xid\nchecks: [host.reachable, gpu.xid]\n")
        out = tmp_path / "out"
        proc = subprocess.Popen(
            [sys.executable, "-m", "diagnose.cli", "run", "-i", str(inventory), "--playbook", str(playbook),
             "-o", str(out), "--format", "json"],
            cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 120
            while not (pids.exists() and len(pids.read_text().split()) == 2):
                assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
                time.sleep(0.2)
            started = time.monotonic()
            proc.send_signal(signal.SIGINT)
            _, stderr = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 130, stderr[-2000:]
        assert time.monotonic() - started < 30  # not the 300 s of bug_report_timeout_s
        for pid in [int(p) for p in pids.read_text().split()]:
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
        # The hosts share this machine's /tmp: only this run's folder is its to remove.
        run_id = json.loads((out / "results.json").read_text())["run"]["id"]
        assert bed.ssh(host, f"ls /tmp | grep -c diagnose-bug-report-{run_id} || true").stdout.strip() == "0"
        assert "everything started on the hosts was stopped" in stderr


def test_the_summary_names_the_reports_that_came_home(run: dict[str, Any]) -> None:
    """diagnose/render/acted.py on the real run: one line, the cut and the timed-out report said."""
    lines = [line for line in run["done"].stdout.splitlines() if "bug report" in line]
    assert lines == [
        "diagnose: bug reports from g-big, g-hang, g-xid: raw/<host>/nvidia-bug-report.log.gz (g-big cut at "
        f"{human_bytes(LIMIT)}; g-hang timed out: partial)"
    ]
