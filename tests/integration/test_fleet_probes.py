"""Fleet probes over real sshd test hosts: every host probed at the same time, records, verdicts, report, and
a slow host named among its peers whatever else the machine is running.

Each host is a real sshd on loopback in its own namespaces (tests/support/testbed.py); the probes are the real
extra of the benchmark stage, run through ``diagnose run`` with a playbook that switches them on, launching
``fleet_probe.py`` and the collective program with torchrun over each host's own SSH connection. The hosts
have no GPU, so they are gloo hosts: a memory copy per host, and (with two ranks per host) a single-node gloo
all_reduce.

Timed by the wall clock, four hosts copying on two shared cores measure each other's load, not themselves
(bench/fleet_throttle.py measures that, with cgroup shares). So every host's Python times the probe's copies
by the CPU time its process spent (tests/support/host_clock/sitecustomize.py), as on a machine of its own,
and node4's clock runs ``SLOWDOWN`` times longer: the bed's own fault, a host copying at a fixed fraction of
its speed, which the fleet judge must name while its peers pass. The same clock holds each probe's first
copy until every host's probe has started, so "at once" does not hang on how the shared cores scheduled the
launches. The verdicts on given readings are tests/unit/probes/test_fleet_verdicts.py's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from diagnose.cli import main
from diagnose.probes.fleet_judge import Thresholds, judge
from tests.support.paths import REPO
from tests.support.testbed import HostSpec, TestBed

pytestmark = pytest.mark.integration

HOST_CLOCK = REPO / "tests" / "support" / "host_clock"
SLOWDOWN = 10
#: Half the median: copies timed by CPU time on a shared machine stay well within it (the memory bandwidth
#: is still shared), and a tenth is far beyond it.
MIN_REL_DEV_PCT = 50
HOSTS = ("node1", "node2", "node3", "node4")

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


def clocked(name: str, barrier: Path, slowdown: int = 1) -> HostSpec:
    """A host whose fleet probe times its copies by CPU time, each interval ``slowdown`` times longer, once
    every host's probe has started (``barrier``)."""
    env = {
        "PYTHONPATH": str(HOST_CLOCK),
        "BED_HOST": name,
        "BED_HOST_SLOWDOWN": str(slowdown),
        "BED_PROBE_BARRIER": str(barrier),
        "BED_PROBE_HOSTS": str(len(HOSTS)),
        "OMP_NUM_THREADS": "1",
    }
    return HostSpec(name, env=env)


def probe_lines(out: Path, host: str) -> list[dict[str, Any]]:
    (path,) = (out / "raw" / host).glob("bench.fleet-*-copy.out.txt")
    return [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]


def test_diagnose_run_probes_every_host_at_once_and_names_the_slow_one(
    testbed: TestBed, tmp_path: Path
) -> None:
    barrier = tmp_path / "probes-started"
    barrier.mkdir()
    testbed.add_many([clocked(h, barrier, SLOWDOWN if h == "node4" else 1) for h in HOSTS])
    inventory = testbed.write_inventory(
        tmp_path / "inv.yaml",
        extra_vars={
            "diagnose_profile": "cpu-testbed",
            "bench_procs_per_host": 2,
            "bench_startup_timeout_s": 180,
            "ansible_python_interpreter": sys.executable,
            "fleet_min_rel_dev_pct": MIN_REL_DEV_PCT,
        },
    )
    playbook = tmp_path / "fleet-testbed.yaml"
    playbook.write_text(PLAYBOOK)
    out = tmp_path / "out"
    code = main(
        ["run", "-i", str(inventory), "--playbook", str(playbook), "-o", str(out), "--format", "json,html"]
    )
    results = json.loads((out / "results.json").read_text())
    records = {(r["host"], r["metric"]): r for r in results["fleet"]}
    spans = []
    for name in HOSTS:
        lines = probe_lines(out, name)
        start, done = lines[0], lines[-1]
        assert start["event"] == "start" and start["device"] == "cpu" and done["event"] == "done"
        assert "h2d, d2h: no GPU (CPU host)" in start["not_measured"]
        spans.append((start["time"], done["time"]))
        memcpy = records[(name, "memcpy")]
        assert memcpy["value"] > 0 and memcpy["check"] == "fleet.memcpy" and memcpy["group"] == "CPU host"
        assert memcpy["median"] > 0 and memcpy["fleet_hosts"] == 4
        busbw = records[(name, "busbw.all_reduce")]
        assert busbw["value"] > 0 and busbw["detail"][0]["bytes"] == 1 << 20
    assert sorted(p.name for p in barrier.iterdir()) == list(HOSTS), "every probe read the bed's clock"
    assert max(s for s, _ in spans) < min(d for _, d in spans), "the probes overlapped in time"
    checks = {(c["id"], c["host"]): c for c in results["checks"] if c["id"].startswith("fleet.")}
    named = sorted(host for check_id, host in checks if check_id == "fleet.memcpy" and host)
    assert code == 1 and named == ["node4"], checks
    slow = checks[("fleet.memcpy", "node4")]
    assert slow["status"] == "FAIL" and "against the median" in slow["message"], slow
    assert records[("node4", "memcpy")]["deviation_pct"] < -MIN_REL_DEV_PCT
    assert [records[(h, "memcpy")]["verdict"] for h in HOSTS] == ["PASS", "PASS", "PASS", "FAIL"]
    summary = records[(None, "memcpy")]
    assert summary["hosts"] == 4 and not summary["weak"] and "1 odd host (node4 " in summary["message"]
    # The same copies without the bed's fault: node4's figure times SLOWDOWN is what its clock read before
    # the bed stretched it, so this is the healthy fleet, judged by the same rule, naming nobody.
    healthy = {h: records[(h, "memcpy")]["value"] * (SLOWDOWN if h == "node4" else 1) for h in HOSTS}
    verdict = judge("memcpy", healthy, thresholds=Thresholds(summary["mad_k"], summary["min_rel_dev_pct"]))
    assert not verdict.odd and {h.status for h in verdict.hosts} == {"PASS"}, verdict
    assert (
        checks[("fleet.h2d", None)]["status"] == "SKIP" and "no GPU" in checks[("fleet.h2d", None)]["message"]
    )
    assert checks[("fleet.busbw", None)]["status"] == "PASS"
    assert "all_reduce single-node busbw over 4 hosts" in checks[("fleet.busbw", None)]["message"]
    html = (out / "report.html").read_text()
    assert "Fleet: hosts against their peers" in html and html.count('<td class="f-host mono">') == 4
    assert not list(Path("/tmp").glob(f"diagnose-{results['run']['id']}*")), "remote folders removed"
