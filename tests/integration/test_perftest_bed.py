"""ib.write_bw over real sshd test hosts: perftest servers and clients started over each host's own SSH
connection, paired over loopback TCP, judged and cleaned up.

The hosts are the healthy H100 node of the bed with the perftest stand-in as ``ib_write_bw`` and
``ib_write_lat`` (tests/support/perftest.py): a client really connects to its server's port, so a server
that is not there really fails, and the numbers printed are the captured ConnectX-6 HDR output scaled to
the bed's NDR 400 ports, times the knob of a slow NIC or a slow cable. The stage is the real extra
(:func:`diagnose.probes.perftest.run`) called with the facts the host checks give for that node; the
interrupt test runs ``diagnose run`` in a process of its own and stops it with SIGINT.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from diagnose.benchmarks.setup import BenchContext, Setup
from diagnose.benchmarks.stage import Stage
from diagnose.connectors import connect
from diagnose.core.model import CheckResult
from diagnose.probes import perftest
from tests.support.bedhosts import command_lines, hosts_of, wait_until
from tests.support.paths import REPO
from tests.support.perftest import h100_facts, perftest_host
from tests.support.playbooks import write_playbook
from tests.support.testbed import TestBed, TestHost

pytestmark = pytest.mark.integration

STANDIN = "perftest_standin.py"
VARS = {
    "expected_hca_count": 8,
    "expected_link_layer": "InfiniBand",
    "expected_compute_hcas": ["mlx5_0", "mlx5_1"],
    "perftest_duration_s": 1,
    "perftest_connect_s": 5,
}


class PerftestRun:
    """One run of the extra over the bed's hosts, with every check and record it emitted."""

    def __init__(self, bed: TestBed, tmp_path: Path, **extra: Any) -> None:
        self.hosts = hosts_of(bed, **{**VARS, **extra})
        self.checks: list[CheckResult] = []
        self.records: list[dict[str, Any]] = []
        self.connections = {h.name: connect(h) for h in self.hosts}
        self.context = BenchContext(
            self.hosts,
            self.connections,
            {h.name: h100_facts(h.vars) for h in self.hosts},
            SimpleNamespace(perftest=True, perftest_latency=extra.get("latency", False)),
            tmp_path / "out",
            f"it-perftest-{secrets.token_hex(3)}",
            self.checks.append,
            lambda entry: None,
            emit_record=lambda section, entry: self.records.append({"section": section, **entry}),
        )

    def __call__(self) -> float:
        began = time.monotonic()
        try:
            for connection in self.connections.values():
                connection.open()
            perftest.run(Stage(self.context), Setup("gloo", 1, self.hosts, []))
        finally:
            for connection in self.connections.values():
                connection.close()
        return time.monotonic() - began

    def findings(self) -> list[CheckResult]:
        return [c for c in self.checks if c.status not in ("PASS", "SKIP")]

    def nic(self, host: str, rail: int) -> dict[str, Any]:
        return next(r for r in self.records if r["kind"] == "nic" and (r["host"], r["rail"]) == (host, rail))


def nothing_left(hosts: list[TestHost]) -> bool:
    return not any(command_lines(h, STANDIN) for h in hosts)


def test_a_slow_nic_and_a_slow_cable_are_named_and_healthy_hosts_stay_quiet(
    testbed: TestBed, tmp_path: Path
) -> None:
    hosts = testbed.add_many(
        [
            perftest_host("node1", links={"node2": {"mlx5_0": 0.6}}),
            perftest_host("node2"),
            perftest_host("node3"),
            perftest_host("node4", slow={"mlx5_1": 0.5}),
            perftest_host("node5"),
            perftest_host("node6"),
        ]
    )
    run = PerftestRun(testbed, tmp_path)
    seconds = run()
    findings = run.findings()
    nic = [c for c in findings if c.host is not None]
    assert [(c.host, c.status) for c in nic] == [("node4", "FAIL")], findings
    assert "mlx5_1 (rail 1)" in nic[0].message and "slow with 2 of 2 other partners" in nic[0].message
    [link] = [c for c in findings if c.host is None]
    assert link.status == "FAIL" and link.message.startswith(
        "the link node1 mlx5_0 ↔ node2 mlx5_0 (rail 0) is slow"
    )
    assert "while each host is fast with others" in link.message
    assert run.nic("node4", 1)["verdict"] == "FAIL" and run.nic("node3", 1)["verdict"] == "PASS"
    assert run.nic("node3", 1)["gbps"] == pytest.approx(390.85, abs=0.01)  # 1 MiB: 23296.34 MB/sec × 2
    assert {run.nic(h, r)["memory"] for h in ("node5", "node6") for r in (0, 1)} == {"cuda:0", "cuda:1"}
    readings = [r for r in run.records if r["kind"] == "reading"]
    assert {r["mode"] for r in readings} == {"single", "together", "check"}
    assert all(r["error"] is None for r in readings)
    summary = next(r for r in run.records if r["kind"] == "summary")
    assert summary["rounds"] >= 2 and summary["rails"]["node1"] == ["mlx5_0", "mlx5_1"]
    evidence = run.context.out_dir / readings[0]["evidence"][0]
    assert "BW average[MB/sec]" in evidence.read_text()
    assert nothing_left(hosts)
    assert seconds < 240


def test_a_host_without_perftest_is_a_skip_naming_the_package(testbed: TestBed, tmp_path: Path) -> None:
    testbed.add_many([perftest_host("node1"), perftest_host("node2"), perftest_host("node3", tools=False)])
    run = PerftestRun(testbed, tmp_path, expected_compute_hcas=["mlx5_0"], latency=True)
    run()
    skipped = [c for c in run.checks if c.status == "SKIP"]
    assert {(c.id, c.host) for c in skipped} == {("ib.write_bw", "node3"), ("ib.latency", "node3")}
    assert all("install the perftest package" in c.message and "ib_write_bw" in c.message for c in skipped)
    assert run.findings() == []
    latency = [r for r in run.records if r["kind"] == "latency"]
    assert [(r["hosts"], r["p99_us"]) for r in latency] == [(["node1", "node2"], 2.03)]


def test_a_hanging_server_is_an_error_and_leaves_nothing_running(testbed: TestBed, tmp_path: Path) -> None:
    hosts = testbed.add_many([perftest_host("node1"), perftest_host("node2", hang=True)])
    run = PerftestRun(testbed, tmp_path, expected_compute_hcas=["mlx5_0"], perftest_connect_s=2)
    seconds = run()
    errors = [c for c in run.checks if c.status == "ERROR"]
    assert errors and "node1 mlx5_0 ↔ node2 mlx5_0 (rail 0) not measured" in errors[0].message
    assert "killed by its timeout" in errors[0].message
    assert nothing_left(hosts)
    assert seconds < 120


INTERRUPTED = """name: perftest-interrupt
description: a tiny gloo sweep, then perftest on hosts whose servers hang
checks: [host.reachable, ib.link_rate, gpu.topology, gpu.gpudirect]
benchmarks:
  collectives: [all_reduce]
  min_bytes: 4096
  max_bytes: 4096
  warmup_iters: 1
  iters: 2
  straggler_isolation: false
  perftest: true
"""


def start_diagnose(argv: list[str], cwd: Path) -> subprocess.Popen[str]:
    """``diagnose`` in a process of its own, for a signal to interrupt."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "diagnose.cli", *argv],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_ctrl_c_during_perftest_stops_every_server_and_client(testbed: TestBed, tmp_path: Path) -> None:
    hosts = testbed.add_many([perftest_host("node1", hang=True), perftest_host("node2", hang=True)])
    inventory = testbed.write_inventory(
        tmp_path / "inv.yaml",
        extra_vars={
            "diagnose_profile": "h100-8x-ndr400",
            "bench_backend": "gloo",
            "ansible_python_interpreter": sys.executable,
            "bench_startup_timeout_s": 120,
            "expected_compute_hcas": ["mlx5_0"],
        },
    )
    out = tmp_path / "out"
    playbook = write_playbook(tmp_path, INTERRUPTED)
    proc = start_diagnose(
        ["run", "-i", str(inventory), "--playbook", str(playbook), "-o", str(out), "--format", "json"],
        tmp_path,
    )
    wait_until(lambda: all(command_lines(h, STANDIN) for h in hosts), 240, "perftest to run on both hosts")
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    wait_until(lambda: nothing_left(hosts), 5, "every perftest process to be gone")
    assert json.loads((out / "results.json").read_text())["verdict"] == "INCOMPLETE"


def test_a_port_range_too_narrow_for_the_rails_is_an_error_before_anything_starts(
    testbed: TestBed, tmp_path: Path
) -> None:
    hosts = testbed.add_many([perftest_host("node1"), perftest_host("node2")])
    run = PerftestRun(testbed, tmp_path, perftest_ports="20000-20002")
    run()
    [error] = [c for c in run.checks if c.status == "ERROR"]
    assert "perftest_ports 20000-20002 holds 3 ports" in error.message and "needs 4" in error.message
    assert not [r for r in run.records if r["kind"] == "reading"] and nothing_left(hosts)
