"""A cluster inventory that names no profile: the run says what that means before and after, and suggests
the profile the hosts' own facts fit (two real sshd hosts playing healthy 8x H100 NDR nodes,
tests/support/hostkit.py). It keeps to what it says: hosts without nvidia-smi or NCCL SKIP the GPU checks and
nccl.version as not required and the run ends PASS, while hosts that have GPUs still get their health and
their consistency with each other judged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from diagnose.cli import main
from diagnose.config.profiles import NO_PROFILE_NO_GPU
from tests.support.cli import diagnose
from tests.support.hostkit import (
    captured,
    healthy_h100,
    memlock_vars,
    other_nccl,
    probing_python,
    remap_pending,
)
from tests.support.testbed import HostSpec, Reply, TestBed

pytestmark = pytest.mark.e2e

PLAYBOOK = """\
name: no-profile
checks: ["host.*", "gpu.topology", "ib.*", "nccl.*"]
"""
#: The checks that need a GPU's tool (nvidia-smi) to read anything.
NVIDIA_SMI_CHECKS = (
    "gpu.topology", "gpu.clocks", "gpu.memory", "gpu.nvlink", "gpu.pcie", "gpu.persistence", "gpu.processes",
    "gpu.fabricmanager",
)  # fmt: skip


def cpu_without_nccl(name: str) -> HostSpec:
    """A CI runner: no nvidia-smi, a CPU build of torch (its probe's captured answer), no libnccl in
    `ldconfig -p` (the development machine's capture), no libnccl2 package (dpkg-query's captured answer),
    no rpm."""
    return HostSpec(
        name,
        tools={
            "nvidia-smi": None,
            "python3": probing_python(captured("nccl_version/torch_cpu_build_devbox.txt")),
            "ldconfig": {"-p": Reply(stdout=captured("nccl_version/ldconfig_devbox_no_nccl.txt"))},
            "dpkg-query": {
                "-W libnccl2": Reply(stderr="dpkg-query: no packages found matching libnccl2\n", rc=1)
            },
            "rpm": None,
        },
    )


def run_without_profile(tmp_path: Path, inventory: Path, checks: str) -> tuple[int, dict[str, Any]]:
    """`diagnose run` in this process (so the checks are this tree's), without any profile."""
    (tmp_path / "pb.yaml").write_text(f"name: no-profile\nchecks: {checks}\n")
    out = tmp_path / "out"
    argv = ["run", "-i", str(inventory), "--playbook", str(tmp_path / "pb.yaml"), "-o", str(out)]
    code = main([*argv, "--format", "json", *memlock_vars(), "--quiet"])
    return code, json.loads((out / "results.json").read_text())


def test_no_profile_is_said_and_the_fitting_profile_suggested(testbed: TestBed, tmp_path: Path) -> None:
    testbed.add_many([healthy_h100("node1"), healthy_h100("node2")])
    inventory = testbed.write_inventory(tmp_path / "cluster.yaml")
    (tmp_path / "pb.yaml").write_text(PLAYBOOK)
    out = tmp_path / "out"
    done = diagnose(
        "run", "-i", str(inventory), "--playbook", str(tmp_path / "pb.yaml"), "-o", str(out),
        "--format", "json,html", *memlock_vars(), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    first = done.stderr.splitlines()[0]
    assert first.startswith("diagnose: no profile chosen (diagnose_profile unset): expected values absent"), (
        first
    )

    run = json.loads((out / "results.json").read_text())["run"]
    assert "fabric and GPU-count checks SKIP as not required" in run["profile_note"]
    suggestion = run["profile_suggestion"]
    assert [g["hosts"] for g in suggestion["groups"]] == [["node1", "node2"]]
    assert suggestion["groups"][0]["profile"] == "h100-8x-ndr400", suggestion
    assert "8× NVIDIA H100 80GB HBM3" in suggestion["groups"][0]["hardware"]
    assert f"diagnose: {suggestion['text']}" in done.stdout.splitlines()
    assert suggestion["text"].endswith("-e diagnose_profile=h100-8x-ndr400")
    verdict_line = next(line for line in done.stdout.splitlines() if " host, " in line or " hosts, " in line)
    assert "(no profile chosen" in verdict_line, "the verdict carries the note"

    checks = json.loads((out / "results.json").read_text())["checks"]
    port_state = [c for c in checks if c["id"] == "ib.port_state"]
    assert port_state and all(
        c["status"] == "SKIP" and "no RDMA fabric is required" in c["message"] for c in port_state
    )

    cover = (out / "report.html").read_text().split('id="cover"')[1].split("</section>")[0]
    assert "no profile chosen" in cover and "suggested profile: h100-8x-ndr400" in cover


def test_hosts_without_gpu_tools_or_nccl_skip_what_no_profile_requires(
    testbed: TestBed, tmp_path: Path
) -> None:
    """The note says GPU checks SKIP as not required: a missing nvidia-smi and a missing NCCL are no ERROR
    or FAIL then, and an otherwise healthy cluster ends PASS with exit 0."""
    testbed.add_many([cpu_without_nccl("cpu1"), cpu_without_nccl("cpu2")])
    code, results = run_without_profile(tmp_path, testbed.write_inventory(tmp_path / "cluster.yaml"), '["*"]')
    bad = [
        (c["id"], c["host"], c["status"], c["message"])
        for c in results["checks"]
        if c["status"] in ("FAIL", "ERROR")
    ]
    assert (code, results["verdict"], bad) == (0, "PASS", [])
    by_id: dict[str, list[dict[str, Any]]] = {}
    for check in results["checks"]:
        by_id.setdefault(check["id"], []).append(check)
    for check_id in NVIDIA_SMI_CHECKS:
        assert sorted((c["host"], c["status"], c["message"]) for c in by_id[check_id]) == [
            (host, "SKIP", f"nvidia-smi is not installed on {host}; {NO_PROFILE_NO_GPU}")
            for host in ("cpu1", "cpu2")
        ], check_id
    nccl = by_id["nccl.version"]
    assert [c["status"] for c in nccl] == ["SKIP", "SKIP"]
    assert all("torch has no NCCL" in c["message"] and NO_PROFILE_NO_GPU in c["message"] for c in nccl)


def test_hosts_with_gpus_and_no_profile_still_have_their_health_judged(
    testbed: TestBed, tmp_path: Path
) -> None:
    """Only what is absent is excused: GPUs that answer are judged, and so is their consistency across hosts."""
    testbed.add_many([remap_pending("gpu1"), other_nccl("gpu2")])
    code, results = run_without_profile(
        tmp_path, testbed.write_inventory(tmp_path / "cluster.yaml"), '["gpu.*", "nccl.*", "versions.*"]'
    )
    status = {(c["id"], c["host"]): c["status"] for c in results["checks"]}
    assert code == 1
    assert status[("gpu.memory", "gpu1")] == "FAIL", "4 uncorrectable rows pending remap on GPU 1"
    assert status[("versions.consistency", None)] == "FAIL", "NCCL 2.28.9 on gpu1, 2.27.7 on gpu2"
    assert [status[("gpu.topology", host)] for host in ("gpu1", "gpu2")] == ["PASS", "PASS"]
    assert [status[("nccl.version", host)] for host in ("gpu1", "gpu2")] == ["PASS", "PASS"]
