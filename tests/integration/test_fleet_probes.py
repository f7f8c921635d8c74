"""Fleet probes over real sshd test hosts: every host probed at the same time, records, verdicts, report.

Each host is a real sshd on loopback in its own namespaces (tests/support/testbed.py); the probes are the real
extra of the benchmark stage, run through ``diagnose run`` with a playbook that switches them on, launching
``fleet_probe.py`` and the collective program with torchrun over each host's own SSH connection. The hosts
have no GPU, so they are gloo hosts: a memory copy per host, and (with two ranks per host) a single-node gloo
all_reduce.

Whether a slow host is named among its peers is a measurement of the machine's CPUs (cgroup shares of two
shared cores, retuned three times after CI failures): it lives in bench/fleet_throttle.py; the verdicts on
given readings are tests/unit/probes/test_fleet_verdicts.py's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from diagnose.cli import main
from tests.support.testbed import HostSpec, TestBed

pytestmark = pytest.mark.integration

PLAYBOOK = """name: fleet-testbed
description: the port range, a tiny gloo sweep, and the fleet probes
checks: [host.reachable, net.port_range]
benchmarks:
  enabled: true
  collectives: [all_reduce]
  min_bytes: 1M
  max_bytes: 1M
  warmup_iters: 1
  iters: 5
  straggler_isolation: false
  fleet_probes: true
"""


def probe_lines(out: Path, host: str) -> list[dict[str, Any]]:
    (path,) = (out / "raw" / host).glob("bench.fleet-*-copy.out.txt")
    return [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]


def test_diagnose_run_probes_every_host_at_once_and_reports_the_fleet(
    testbed: TestBed, tmp_path: Path
) -> None:
    testbed.add_many([HostSpec("node1"), HostSpec("node2"), HostSpec("node3")])
    inventory = testbed.write_inventory(
        tmp_path / "inv.yaml",
        extra_vars={
            "diagnose_profile": "cpu-testbed",
            "bench_procs_per_host": 2,
            "bench_startup_timeout_s": 180,
            "ansible_python_interpreter": sys.executable,
        },
    )
    playbook = tmp_path / "fleet-testbed.yaml"
    playbook.write_text(PLAYBOOK)
    out = tmp_path / "out"
    main(["run", "-i", str(inventory), "--playbook", str(playbook), "-o", str(out), "--format", "json,html"])
    results = json.loads((out / "results.json").read_text())
    records = {(r["host"], r["metric"]): r for r in results["fleet"]}
    spans = []
    for name in ("node1", "node2", "node3"):
        lines = probe_lines(out, name)
        start, done = lines[0], lines[-1]
        assert start["event"] == "start" and start["device"] == "cpu" and done["event"] == "done"
        assert "h2d, d2h: no GPU (CPU host)" in start["not_measured"]
        spans.append((start["time"], done["time"]))
        memcpy = records[(name, "memcpy")]
        assert memcpy["value"] > 0 and memcpy["check"] == "fleet.memcpy" and memcpy["group"] == "CPU host"
        assert memcpy["median"] > 0 and memcpy["fleet_hosts"] == 3 and memcpy["verdict"] in ("PASS", "WARN")
        busbw = records[(name, "busbw.all_reduce")]
        assert busbw["value"] > 0 and busbw["detail"][0]["bytes"] == 1 << 20
    assert max(s for s, _ in spans) < min(d for _, d in spans), "the probes overlapped in time"
    summary = records[(None, "memcpy")]
    assert summary["hosts"] == 3 and summary["weak"] and summary["verdict"] == "PASS"
    checks = {(c["id"], c["host"]): c for c in results["checks"] if c["id"].startswith("fleet.")}
    assert (
        checks[("fleet.h2d", None)]["status"] == "SKIP" and "no GPU" in checks[("fleet.h2d", None)]["message"]
    )
    assert checks[("fleet.busbw", None)]["status"] == "PASS"
    assert "all_reduce single-node busbw over 3 hosts" in checks[("fleet.busbw", None)]["message"]
    html = (out / "report.html").read_text()
    assert "Fleet: hosts against their peers" in html and html.count('<td class="f-host mono">') == 3
    assert not list(Path("/tmp").glob(f"diagnose-{results['run']['id']}*")), "remote folders removed"
