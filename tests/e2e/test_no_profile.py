"""A cluster inventory that names no profile: the run says what that means before and after, and suggests
the profile the hosts' own facts fit (two real sshd hosts playing healthy 8x H100 NDR nodes,
tests/support/hostkit.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import diagnose
from tests.support.hostkit import healthy_h100, memlock_vars
from tests.support.testbed import TestBed

pytestmark = pytest.mark.e2e

PLAYBOOK = """\
name: no-profile
checks: ["host.*", "gpu.topology", "ib.*", "nccl.*"]
"""


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
