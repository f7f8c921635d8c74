"""Progress without a terminal (issue 36, item 1): `diagnose run` under cron, CI or a pipe printed nothing
for minutes while the collectives and probes ran, so nobody could tell a slow stage from a hung one.

A fresh `diagnose run` process (stderr a pipe, as under cron) over two real sshd test hosts, with a short
gloo sweep and the fleet probes (two gloo ranks per host), must write timestamped lines on stderr naming each
stage, its hosts and each step as it starts, in the order they ran, before the summary on stdout; never a
line per measured size.
"""

from __future__ import annotations

import re
import sys
from datetime import datetime
from pathlib import Path

import pytest

from tests.support.cli import diagnose
from tests.support.playbooks import write_playbook
from tests.support.testbed import HostSpec, TestBed

pytestmark = pytest.mark.integration

SWEEP_AND_PROBES = """name: progress
description: a short gloo sweep and the fleet probes
checks: [host.reachable, net.port_range]
benchmarks:
  collectives: [all_reduce]
  min_bytes: 4096
  max_bytes: 65536
  step_factor: 4
  warmup_iters: 1
  iters: 2
  straggler_isolation: false
  fleet_probes: true
"""
STAMPED = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) diagnose: (.+)$")


def test_a_run_without_a_terminal_tells_each_stage_host_and_step_on_stderr(
    testbed: TestBed, tmp_path: Path
) -> None:
    testbed.add_many([HostSpec("node1"), HostSpec("node2")])
    inventory = testbed.write_inventory(
        tmp_path / "inv.yaml",
        extra_vars={
            "diagnose_profile": "cpu-testbed",
            "bench_procs_per_host": 2,
            "bench_startup_timeout_s": 180,
            "ansible_python_interpreter": sys.executable,
        },
    )
    playbook = write_playbook(tmp_path, SWEEP_AND_PROBES)
    out = tmp_path / "out"
    argv = ["run", "-i", str(inventory), "--playbook", str(playbook), "-o", str(out), "--format", "json,html"]
    done = diagnose(*argv, cwd=tmp_path, timeout=400)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    stamped = [m.groups() for m in map(STAMPED.match, done.stderr.splitlines()) if m]
    told = [text for _, text in stamped]
    expected = [
        "host checks on 2 hosts",
        "host checks done in ",
        "benchmarks on node[1-2]",
        "benchmarks on node[1-2]: all_reduce, 4 ranks",
        "fleet probes on node[1-2]",
        "fleet probes on node1: memcpy, 1 rank",
        "fleet probes on node1: all_reduce, 2 ranks",
        "fleet probes done in ",
        "benchmarks done in ",
        "second snapshot on node[1-2]",
        "reports (html, json)",
        "done in ",
    ]
    at = [next((i for i, text in enumerate(told) if text.startswith(e)), None) for e in expected]
    assert None not in at, (
        f"missing {[e for e, i in zip(expected, at, strict=True) if i is None]}:\n{done.stderr}"
    )
    assert at == sorted(at), f"out of order:\n{done.stderr}"
    assert told.count("benchmarks on node[1-2]: all_reduce, 4 ranks") == 1, "one line a step, none a size"
    times = [datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ") for stamp, _ in stamped]
    assert times == sorted(times)
    assert all(not STAMPED.match(line) for line in done.stdout.splitlines()), "stdout keeps the summary only"
    assert done.stdout.startswith("diagnose: "), done.stdout
