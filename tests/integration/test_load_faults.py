"""The host checks of a GPU under load end to end over real sshd hosts: a foreign process, memory held by
one the host cannot see, and DCGM's diagnostics.

Two healthy 8x H100 NDR nodes of tests/support/hostkit.py whose dcgmi passes level 3, and one node each of
tests/support/loadkit.py: the lent H100's matmul process on GPU 3 (gpu-shared), GPU 3's memory held by a
process no listing shows (gpu-held), GPU 3 failing DCGM's diagnostic test with faulty memory (dcgm-fail),
and a dcgmi that never returns (dcgm-hung, budget 4 s). One ``diagnose run`` with the acceptance playbook's
values (foreign_processes_status FAIL, level 3) judges them; a second, short gloo sweep on a healthy node
and the shared one shows the benchmark marked.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from diagnose.cli import main
from tests.support.hostkit import PROFILE, healthy_h100, memlock_vars
from tests.support.loadkit import (
    DCGM_PASS,
    HELD_MIB,
    dcgm_fail,
    dcgm_hang,
    dcgm_pass,
    dcgmi_reply,
    foreign_process,
    gpu_bus_id,
    memory_holder,
    with_dcgmi,
)
from tests.support.testbed import TestBed

pytestmark = pytest.mark.integration

HEALTHY = ("node1", "node2")
CHECKS = ("host.reachable", "gpu.topology", "gpu.processes", "gpu.dcgm")
HUNG_BUDGET_S = 4
PLAYBOOK = (
    "name: load\ndescription: issue 24's host checks with the acceptance playbook's values\n"
    f"checks: [{', '.join(CHECKS)}]\n"
    "vars:\n  foreign_processes_status: FAIL\n  dcgm_diag_level: 3\n"
)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    work = tmp_path_factory.mktemp("load")
    with TestBed(work / "bed") as bed:
        hosts = [dcgm_pass(h) for h in HEALTHY]
        hosts += [with_dcgmi(foreign_process("gpu-shared"), 3, dcgmi_reply(DCGM_PASS))]
        hosts += [with_dcgmi(memory_holder("gpu-held"), 3, dcgmi_reply(DCGM_PASS))]
        hosts += [dcgm_fail("dcgm-fail"), dcgm_hang("dcgm-hung")]
        bed.add_many(hosts)
        inventory = bed.write_inventory(
            work / "inventory.yaml", host_vars={"dcgm-hung": {"dcgm_diag_timeout_s": HUNG_BUDGET_S}}
        )
        playbook = work / "load.yaml"
        playbook.write_text(PLAYBOOK)
        out = work / "out"
        argv = ["run", "--inventory", str(inventory), "--playbook", str(playbook), "--out", str(out)]
        argv += [
            "--skip-benchmarks",
            "--format",
            "json,html",
            "-e",
            f"diagnose_profile={PROFILE}",
            *memlock_vars(),
        ]
        started = time.monotonic()
        code = main(argv)
        yield {
            "code": code,
            "results": json.loads((out / "results.json").read_text()),
            "out": out,
            "seconds": time.monotonic() - started,
        }


def results_for(run: dict[str, Any], check_id: str) -> dict[str | None, dict[str, Any]]:
    return {c["host"]: c for c in run["results"]["checks"] if c["id"] == check_id}


def test_healthy_hosts_pass_both(run: dict[str, Any]) -> None:
    assert run["code"] == 1
    for host in HEALTHY:
        assert (
            results_for(run, "gpu.processes")[host]["message"]
            == f"no compute process on the 8 GPUs of {host}"
        )
        dcgm = results_for(run, "gpu.dcgm")[host]
        assert dcgm["status"] == "PASS", dcgm["message"]
        assert (
            dcgm["message"] == f"dcgmi diag -r 3 on {host} (DCGM 4.2.3, 4 tests on 8 GPUs): every test passed"
        )


def test_a_foreign_process_fails_the_sign_off_naming_gpu_pid_name_and_memory(run: dict[str, Any]) -> None:
    result = results_for(run, "gpu.processes")["gpu-shared"]
    assert result["status"] == "FAIL"
    assert result["message"] == (
        f"gpu-shared: 1 compute process diagnose did not start, on 1 of its 8 GPUs (GPU 3 ({gpu_bus_id(3)}): "
        "pid 461 python3, 1002 MiB); measurements on this host are not a sign-off"
    )
    assert result["observed"][0]["pid"] == 461 and result["remediation"]
    assert results_for(run, "gpu.dcgm")["gpu-shared"]["status"] == "PASS"


def test_memory_held_by_a_process_the_host_cannot_see_fails_the_sign_off(run: dict[str, Any]) -> None:
    """No process listed and the GPU idle, but 70 GB of GPU 3 in use: a holder outside the host's pid
    namespace (a leaked container, a killed job's orphan), named with the GPU and the amount."""
    result = results_for(run, "gpu.processes")["gpu-held"]
    assert result["status"] == "FAIL"
    assert result["message"].startswith(
        f"gpu-held: GPU 3 ({gpu_bus_id(3)}) {HELD_MIB} MiB of 81559 MiB held before diagnose started "
        "anything, by no process this host can see"
    )
    assert result["observed"] == [
        {
            "bus_id": gpu_bus_id(3),
            "gpu": "3",
            "utilization_pct": 0,
            "held_mib": HELD_MIB,
            "memory_total_mib": 81559,
        }
    ]
    assert "gpu-held" in {c["hosts"][0] for c in run["results"]["causes"] if c["check"] == "gpu.processes"}


def test_a_failing_dcgm_test_names_the_gpu(run: dict[str, Any]) -> None:
    result = results_for(run, "gpu.dcgm")["dcgm-fail"]
    assert result["status"] == "FAIL"
    assert result["message"].endswith(
        "diagnostic Fail on GPU 3 (error 52: Found 12 faulty memory elements on GPU 3 Run a field diagnostic on "
        "the GPU.)"
    )
    assert result["observed"]["rc"] == 226
    assert results_for(run, "gpu.processes")["dcgm-fail"]["status"] == "PASS"


def test_a_hung_dcgmi_is_stopped_at_its_budget_and_named(run: dict[str, Any]) -> None:
    result = results_for(run, "gpu.dcgm")["dcgm-hung"]
    assert result["status"] == "ERROR"
    assert result["message"].startswith(
        f"dcgmi hung at level 3 on dcgm-hung: stopped after {HUNG_BUDGET_S} s"
    )
    # The host stays reachable and its other checks answered: only dcgmi was stopped.
    assert results_for(run, "host.reachable")["dcgm-hung"]["status"] == "PASS"
    assert results_for(run, "gpu.processes")["dcgm-hung"]["status"] == "PASS"
    assert run["seconds"] < 60


def test_dcgm_runs_last_and_leaves_its_frame_as_evidence(run: dict[str, Any]) -> None:
    evidence = results_for(run, "gpu.dcgm")["dcgm-fail"]["evidence"]
    assert evidence == "raw/dcgm-fail/dcgm_diag.txt"
    text = (run["out"] / evidence).read_text()
    assert text.startswith("# level 3 budget 1800\n") and text.endswith("# rc 226\n")
    apps = (run["out"] / "raw/gpu-shared/compute_apps.txt").read_text()
    assert "461, python3, 1002 MiB" in apps


GLOO = (
    "name: shared\ndescription: a short gloo sweep beside a foreign process\n"
    "checks: [host.reachable, gpu.processes]\n"
    "benchmarks:\n  collectives: [all_reduce]\n  min_bytes: 4096\n  max_bytes: 16384\n"
    "  step_factor: 4\n  warmup_iters: 1\n  iters: 2\n"
    "vars:\n  foreign_processes_status: WARN\n"
)


def test_a_benchmark_with_a_shared_host_is_marked(testbed: TestBed, tmp_path: Path) -> None:
    testbed.add_many([healthy_h100("node1"), foreign_process("gpu-shared")])
    inventory = testbed.write_inventory(
        tmp_path / "inv.yaml",
        extra_vars={"ansible_python_interpreter": sys.executable, "bench_startup_timeout_s": 120},
    )
    playbook = tmp_path / "shared.yaml"
    playbook.write_text(GLOO)
    out = tmp_path / "out"
    main(["run", "-i", str(inventory), "--playbook", str(playbook), "-o", str(out), "--format", "json,html"])
    results = json.loads((out / "results.json").read_text())
    warned = results_for({"results": results}, "gpu.processes")
    assert warned["gpu-shared"]["status"] == "WARN"
    assert warned["gpu-shared"]["message"].endswith("measurements on this host are marked shared_gpu")
    (bench,) = results["benchmarks"]
    assert sorted(bench["hosts"]) == ["gpu-shared", "node1"]
    assert bench["shared_gpu"] is True and bench["shared_gpu_hosts"] == ["gpu-shared"]
    html = (out / "report.html").read_text()
    assert "held GPUs of gpu-shared (see gpu.processes): these figures describe a shared GPU" in html
