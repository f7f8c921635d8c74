"""An acceptance run of a small cluster reads as a document: `diagnose run` over three real sshd hosts.

Two healthy 8x H100 NDR nodes and one with an InfiniBand port Down (tests/support/hostkit.py) are judged against
the h100-8x-ndr400 profile. The hosts have no GPUs, so ``bench_backend=gloo`` makes the benchmark stage
start a real torchrun on every host over SSH: the collectives are real, their bandwidth is not judged.
Every output format is then read back the way its consumer reads it: the PDF's text, JUnit XML through
an XML parser, the Prometheus textfile line by line, and a re-render from results.json alone, after the
hosts are gone.
"""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from pypdf import PdfReader

from diagnose.shipped.collective_bench import bus_factor
from tests.support.cli import diagnose
from tests.support.hostkit import PROFILE, healthy_h100, memlock_vars, port_down
from tests.support.testbed import TestBed

pytestmark = pytest.mark.e2e

HEALTHY = ("node1", "node2")
FAULTY, FAULT_CHECK = "node3", "ib.port_state"
CABLE = "reseat_or_replace_cable"
COLLECTIVES = ("all_reduce", "all_gather")
# Four sizes per collective and three timed iterations: enough rows to check the arithmetic, and two
# torch imports per host stay affordable on a 2-core machine.
PLAYBOOK = """\
name: cluster-acceptance
description: every check, then a tiny gloo sweep across the hosts
checks: ["*"]
benchmarks:
  enabled: true
  collectives: [all_reduce, all_gather]
  min_bytes: 4K
  max_bytes: 256K
  step_factor: 4
  warmup_iters: 1
  iters: 3
  straggler_isolation: false
"""
GAUGE = {"SKIP": 0, "PASS": 1, "WARN": 2, "ERROR": 3, "FAIL": 4}  # diagnose.prom's HELP line


def run_cluster(tmp_path: Path, inventory: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    playbook = tmp_path / "cluster-acceptance.yaml"
    playbook.write_text(PLAYBOOK)
    return diagnose(
        "run",
        "--inventory",
        str(inventory),
        "--playbook",
        str(playbook),
        "--out",
        str(out),
        "--format",
        "json,html,pdf,junit,prom",
        "-e",
        f"diagnose_profile={PROFILE}",
        "-e",
        "bench_backend=gloo",
        *memlock_vars(),
        *extra,
        cwd=tmp_path,
    )


def by_host(results: dict[str, Any], check_id: str) -> dict[str | None, dict[str, Any]]:
    return {c["host"]: c for c in results["checks"] if c["id"] == check_id}


def assert_benchmarks_are_real_and_consistent(results: dict[str, Any], hosts: list[str]) -> None:
    """Each collective ran with gloo on every host, validated its data, and reports nccl-tests' busbw."""
    benchmarks = {b["collective"]: b for b in results["benchmarks"]}
    assert sorted(benchmarks) == sorted(COLLECTIVES)
    for collective, bench in benchmarks.items():
        assert bench["backend"] == "gloo" and bench["hosts"] == hosts, bench
        assert bench["nodes"] == len(hosts) and bench["ranks"] == len(hosts)
        assert len(bench["rows"]) == 4, bench["rows"]
        factor = bus_factor(collective, bench["ranks"])
        for row in bench["rows"]:
            assert row["wrong"] == 0, row
            # algbw = bytes / time; busbw = algbw × factor (nccl-tests' PERFORMANCE.md), both rounded
            # to 3 decimals by the program, so they agree with the row's own time within that rounding.
            algbw = row["bytes"] / (row["time_us"] * 1e3)
            assert row["algbw_gbps"] == pytest.approx(algbw, abs=6e-4), row
            assert row["busbw_gbps"] == pytest.approx(algbw * factor, abs=6e-4), row
        # Every collective's data is checked on every rank, and gloo's bandwidth is shown, not judged.
        assert bench["status"] == "PASS" and "not judged" in bench["message"], bench["message"]
        assert by_host(results, f"bench.{collective}")[None]["status"] == bench["status"]
    assert by_host(results, "nccl.transport")[None]["status"] == "SKIP"


def test_acceptance_run_of_a_small_cluster_reads_as_a_document(testbed: TestBed, tmp_path: Path) -> None:
    testbed.add_many([healthy_h100(h) for h in HEALTHY] + [port_down(FAULTY)])
    inventory = testbed.write_inventory(tmp_path / "cluster.yaml")
    out = tmp_path / "out"
    done = run_cluster(tmp_path, inventory, out)
    assert done.returncode == 1, done.stderr

    results = json.loads((out / "results.json").read_text())
    assert results["schema"] == 1 and results["verdict"] == "FAIL" and results["run"]["finished"]
    assert results["run"]["profile"] == PROFILE
    assert [(h["name"], h["reachable"]) for h in results["hosts"]] == [
        (name, True) for name in (*HEALTHY, FAULTY)
    ]
    fault = by_host(results, FAULT_CHECK)[FAULTY]
    assert fault["status"] == "FAIL" and "mlx5_9/1 Down/Polling" in fault["message"], fault
    assert fault["remediation"] and fault["evidence"] == f"raw/{FAULTY}/ibstat.txt"
    assert fault["action"] == CABLE
    assert all("action" not in c for c in results["checks"] if c["status"] == "PASS")
    assert "State: Down" in (out / fault["evidence"]).read_text()
    failing = [(c["id"], c["host"]) for c in results["checks"] if c["status"] == "FAIL"]
    assert failing == [(FAULT_CHECK, FAULTY)], "the fault and nothing else fails"
    assert not [c for c in results["checks"] if c["host"] in HEALTHY and c["status"] in ("FAIL", "ERROR")]
    assert_benchmarks_are_real_and_consistent(results, [*HEALTHY, FAULTY])
    assert str(out) in done.stdout and "FAIL" in done.stdout.splitlines()[0]

    pages = [page.extract_text() for page in PdfReader(out / "report.pdf").pages]
    pdf = " ".join(" ".join(pages).split())  # text as read, whatever the line breaks
    assert "VERDICT FAIL" in pdf, pdf[:400]
    assert f"FAIL {FAULT_CHECK}" in pdf and f"{FAULTY} 7 of 8 expected" in pdf
    assert "mlx5_9/1 Down/Polling" in pdf

    junit = ET.parse(out / "junit.xml").getroot()
    cases = {(c.get("classname"), c.get("name")): c for c in junit.iter("testcase")}
    assert cases[(FAULT_CHECK, FAULTY)].find("failure") is not None
    # A port Down/Polling is a cable or transceiver to reseat: the action rides on the failure.
    assert cases[(FAULT_CHECK, FAULTY)].find("properties/property[@name='action']").get("value") == CABLE
    assert cases[(FAULT_CHECK, FAULTY)].find("failure").get("message").endswith(f"(action: {CABLE})")
    assert all(cases[(FAULT_CHECK, h)].find("failure") is None for h in HEALTHY)
    assert [key for key, case in cases.items() if case.find("failure") is not None] == [(FAULT_CHECK, FAULTY)]
    assert junit.get("failures") == "1"

    prom = (out / "diagnose.prom").read_text().splitlines()
    gauge = f'diagnose_check_status{{check="{FAULT_CHECK}",host="{FAULTY}",checklist="1",action="{CABLE}"}}'
    assert f"{gauge} {float(GAUGE['FAIL'])}" in prom
    assert f"diagnose_verdict{{}} {float(GAUGE['FAIL'])}" in prom

    # The report is a function of results.json: with every host gone, it renders again.
    testbed.stop()
    (out / "report.html").unlink()
    measured = (out / "results.json").read_bytes()
    again = diagnose("report", str(out / "results.json"), "--format", "html", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert str(out / "report.html") in again.stdout.split()
    assert (out / "results.json").read_bytes() == measured
    html = (out / "report.html").read_text()
    assert FAULTY in html and FAULT_CHECK in html and "mlx5_9/1 Down/Polling" in html


def test_limit_leaving_out_the_faulty_host_passes(testbed: TestBed, tmp_path: Path) -> None:
    testbed.add_many([healthy_h100(h) for h in HEALTHY] + [port_down(FAULTY)])
    inventory = testbed.write_inventory(tmp_path / "cluster.yaml")
    out = tmp_path / "out"
    done = run_cluster(tmp_path, inventory, out, "--limit", f"all:!{FAULTY}")
    results = json.loads((out / "results.json").read_text())
    assert [h["name"] for h in results["hosts"]] == list(HEALTHY)
    assert not (out / "raw" / FAULTY).exists(), "the excluded host is never touched"
    assert_benchmarks_are_real_and_consistent(results, list(HEALTHY))
    # gloo benchmarks PASS (their bandwidth is not judged), so only a check could fail the run.
    assert [c for c in results["checks"] if c["status"] in ("FAIL", "ERROR")] == []
    assert results["verdict"] == "PASS"
    assert done.returncode == 0, done.stderr
