"""The GPU stress stage over real sshd test hosts: the shipped program run for real, on torch CPU.

Each host is a real sshd on loopback in its own namespaces (tests/support/testbed.py). ``diagnose run`` with
a playbook that switches ``benchmarks.stress`` on launches :mod:`diagnose.shipped.stress` with torchrun
over each host's SSH connection, two ranks per host, every host at the same time: the program measures GEMM,
memory copy, the pattern test, the seeded product and a burn-in capped to seconds on these CPU hosts, and
every verdict is a SKIP with its numbers. Then the same stage with a time budget that ends before the
program can finish: its verdicts are ERRORs that say so, and nothing of the launch is left on the hosts.
"""

from __future__ import annotations

import json
import secrets
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from diagnose.benchmarks.setup import BenchContext, choose_setup
from diagnose.benchmarks.stage import Stage
from diagnose.catalog.stage_ids import STRESS
from diagnose.cli import main
from diagnose.connectors import connect
from diagnose.core.model import CheckResult
from diagnose.probes import stress
from tests.support.bedhosts import bench_processes, hosts_of
from tests.support.testbed import HostSpec, TestBed

pytestmark = pytest.mark.integration

PLAYBOOK = """name: stress-testbed
description: the port range and the GPU stress stage, no collective sweep worth the name
checks: [host.reachable, net.port_range]
vars:
  burnin_minutes: 10
benchmarks:
  enabled: true
  collectives: [all_reduce]
  min_bytes: 4K
  max_bytes: 4K
  warmup_iters: 1
  iters: 2
  straggler_isolation: false
  stress: true
"""


def test_diagnose_run_stresses_every_host_and_reports_the_numbers_unjudged(
    testbed: TestBed, tmp_path: Path
) -> None:
    testbed.add_many([HostSpec("node1"), HostSpec("node2")])
    inventory = testbed.write_inventory(
        tmp_path / "inv.yaml",
        extra_vars={
            "diagnose_profile": "cpu-testbed",
            "bench_procs_per_host": 2,
            "bench_startup_timeout_s": 300,
            "ansible_python_interpreter": sys.executable,
        },
    )
    playbook = tmp_path / "stress-testbed.yaml"
    playbook.write_text(PLAYBOOK)
    out = tmp_path / "out"
    main(
        [
            "run",
            "-i",
            str(inventory),
            "--playbook",
            str(playbook),
            "-o",
            str(out),
            "--format",
            "json,html,prom",
        ]
    )
    results = json.loads((out / "results.json").read_text())
    checks = {(c["id"], c["host"]): c for c in results["checks"] if c["id"] in STRESS}
    for name in ("node1", "node2"):
        for check_id in STRESS:
            check = checks[(check_id, name)]
            assert check["status"] == "SKIP", check
            assert check["message"].startswith("CPU host: not judged against a GPU"), check
            assert check["evidence"] == f"raw/{name}/bench.stress-{['node1', 'node2'].index(name)}.out.txt"
        assert "2 ranks: bf16 min" in checks[("gpu.gemm", name)]["message"]
        assert (
            "fp8 not measured (fp8 needs a GPU with FP8 tensor cores (CPU host))"
            in checks[("gpu.gemm", name)]["message"]
        )
        assert "2 ranks, 1 of 10 min of bf16 load" in checks[("gpu.burnin", name)]["message"]
    records = results["stress"]
    stages = {r["host"]: r for r in records if r["metric"] == "stage"}
    assert set(stages) == {"node1", "node2"}
    for stage in stages.values():
        assert stage["status"] == "done" and stage["device"] == "cpu" and stage["gpus"] == 2
        assert set(stage["seconds"]) == {
            "gemm.bf16",
            "gemm.tf32",
            "gemm.fp8",
            "hbm.copy",
            "hbm.triad",
            "memtest",
            "sdc",
            "burnin",
        }
        assert stage["burnin_minutes"] == pytest.approx(stress.CPU_BURNIN_S / 60)
    memtest = [r for r in records if r["metric"] == "memtest"]
    assert len(memtest) == 4 and all(r["mismatches"] == 0 and r["tested_bytes"] > 0 for r in memtest)
    sums = {r["checksum"] for r in records if r["metric"] == "sdc"}
    assert len(sums) == 1, "every rank of every host computed the same bits"
    html = (out / "report.html").read_text()
    assert "GPUs under load: GEMM, HBM, memory test, SDC, burn-in" in html
    assert html.count('<td class="s-host mono">') == 4
    assert not list(Path("/tmp").glob(f"diagnose-{results['run']['id']}*")), "remote folders removed"


def test_a_time_budget_that_runs_out_stops_the_program_and_says_so(testbed: TestBed, tmp_path: Path) -> None:
    """The budget ends a few seconds into the launch: torchrun and torch's import alone take longer, so the
    program is cut whatever the machine's load; a phase that did finish keeps its (CPU: SKIP) verdict."""
    testbed.add_many([HostSpec("node1")])
    hosts = hosts_of(testbed, expected_gpu_count=0, burnin_minutes=10)
    checks: list[CheckResult] = []
    records: list[dict[str, object]] = []
    connections = {h.name: connect(h) for h in hosts}
    plan = SimpleNamespace(collectives=("all_reduce",), stress=True)
    try:
        for connection in connections.values():
            connection.open()
        context = BenchContext(
            hosts,
            connections,
            {},
            plan,
            tmp_path / "out",
            f"it-stress-{secrets.token_hex(3)}",
            checks.append,
            lambda entry: None,
            deadline=time.monotonic() + 3,
            emit_record=lambda section, entry: records.append(entry),
        )
        stress.run(Stage(context), choose_setup(hosts, {}))
    finally:
        for connection in connections.values():
            connection.close()
    by_id = {c.id: c for c in checks}
    assert set(by_id) == set(STRESS)
    assert by_id["gpu.burnin"].status == "ERROR", [(c.id, c.status, c.message) for c in checks]
    for check in checks:
        assert check.status in ("ERROR", "SKIP"), (check.id, check.status, check.message)
        if check.status == "ERROR":
            assert "the run's time budget ran out during the benchmark" in check.message
    (stage,) = [r for r in records if r["metric"] == "stage"]
    assert stage["status"] == "deadline"
    assert bench_processes(testbed, testbed.hosts["node1"]) == []
