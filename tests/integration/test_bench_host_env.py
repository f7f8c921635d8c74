"""A host's own bench_env reaches that host's ranks and no other's (its GPUs, its NIC names)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diagnose.cli import main
from tests.support.testbed import HostSpec, TestBed

pytestmark = pytest.mark.integration

PLAYBOOK = """name: host-env
description: one tiny all_reduce
checks: [host.reachable]
benchmarks:
  enabled: true
  collectives: [all_reduce]
  min_bytes: 4K
  max_bytes: 4K
  warmup_iters: 1
  iters: 2
  straggler_isolation: false
"""


def run(testbed: TestBed, tmp_path: Path, second_ifname: str) -> dict:
    inventory = testbed.write_inventory(
        tmp_path / f"inv-{second_ifname}.yaml",
        extra_vars={
            "diagnose_profile": "cpu-testbed",
            "bench_backend": "gloo",
            "bench_startup_timeout_s": 60,
        },
        host_vars={
            "node1": {"bench_env": {"GLOO_SOCKET_IFNAME": "lo"}},
            "node2": {"bench_env": {"GLOO_SOCKET_IFNAME": second_ifname}},
        },
    )
    playbook = tmp_path / "host-env.yaml"
    playbook.write_text(PLAYBOOK)
    out = tmp_path / f"out-{second_ifname}"
    main(["run", "-i", str(inventory), "--playbook", str(playbook), "-o", str(out), "--format", "json"])
    (bench,) = json.loads((out / "results.json").read_text())["benchmarks"]
    return bench


def test_each_host_gets_its_own_bench_env(testbed: TestBed, tmp_path: Path) -> None:
    testbed.add_many([HostSpec("node1"), HostSpec("node2")])
    good = run(testbed, tmp_path, "lo")
    assert good["status"] == "PASS" and good["rows"] and good["rows"][0]["wrong"] == 0
    broken = run(testbed, tmp_path, "no-such-if0")
    assert broken["status"] == "ERROR"
    assert "node2" in broken["message"]
