"""The quarantine cap and Kubernetes nodes for ``diagnose node-check``, on a real Slurm
(tests/support/slurmbed.py): with ``max_quarantine`` N, N+1 failing nodes each running ``node-check
--drain`` leave N drained and the last one reported, not drained, with the cluster-wide ``quarantine.cap``
finding in its record; and ``node-check --k8s`` in a "pod" on a node (a job step with ``NODE_NAME`` set, as
the downward API sets it) cordons and taints that node in the fake API server of tests/support/kubekit.py,
lifts it once healthy, and withholds beyond the cap.

Nodes are the 8x H100 NDR hosts of tests/support/hostkit.py with mlx5_9 Down planted where a node fails.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.hostkit import PROFILE, healthy_h100, memlock_vars, port_down
from tests.support.kubekit import FakeCluster, FakeNode, parses_with_real_kubectl, real_kubectl
from tests.support.slurmbed import SlurmBed, slurm_bed

pytestmark = pytest.mark.integration

NODE_CHECK = [sys.executable, "-m", "diagnose.cli", "node-check", "--profile", PROFILE, *memlock_vars()]
ANNOTATION = "diagnose.health/quarantine"


def drained(fields: dict[str, str]) -> bool:
    return "DRAIN" in fields["State"].split("+")


def test_n_plus_one_failing_nodes_leave_n_drained_and_one_reported(tmp_path: Path) -> None:
    nodes = [port_down("n1"), port_down("n2"), port_down("n3"), healthy_h100("n4")]
    with slurm_bed(tmp_path / "slurm", nodes) as bed:
        steps = {}
        for name in ("n1", "n2", "n3"):
            record = tmp_path / f"{name}.json"
            steps[name] = bed.srun(
                name, [*NODE_CHECK, "--drain", "-e", "max_quarantine=2", "--json", str(record)]
            )
        assert [steps[n].returncode for n in ("n1", "n2", "n3")] == [1, 1, 1], steps["n3"].stderr
        assert drained(bed.node("n1")) and drained(bed.node("n2"))
        assert not drained(bed.node("n3"))
        line = steps["n3"].stdout
        assert line.startswith("diagnose node-check: FAIL n3: ib.port_state ")
        assert "not drained: quarantine cap, 2 nodes drained by diagnose already, at most 2 of 4" in line
        document = json.loads((tmp_path / "n3.json").read_text())
        cap = [c for c in document["checks"] if c["id"] == "quarantine.cap"]
        assert len(cap) == 1 and cap[0]["status"] == "FAIL" and cap[0]["host"] is None
        assert cap[0]["observed"]["taken"] == ["n1", "n2"] and cap[0]["observed"]["withheld"] == ["n3"]
        assert "shared cause" in cap[0]["message"]
        assert document["quarantine"] == [
            {"scheduler": "slurm", "node": "n3", "step": "drain", "state": "withheld", "by": "diagnose",
             "why": "beyond the quarantine cap", "checks": ["ib.port_state"]},
        ]  # fmt: skip
        first = json.loads((tmp_path / "n1.json").read_text())
        assert [(e["step"], e["state"]) for e in first["quarantine"]] == [("drain", "done")]
        assert not [c for c in first["checks"] if c["id"] == "quarantine.cap"]
        # An admin repairs n1 and resumes it: n3 now fits under the cap.
        bed.resume("n1")
        assert bed.srun("n3", [*NODE_CHECK, "--drain", "-e", "max_quarantine=2"]).returncode == 1
        assert drained(bed.node("n3")) and not drained(bed.node("n1"))


def k8s_step(bed: SlurmBed, cluster: FakeCluster, node: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """node-check --k8s as a pod on ``node`` would run it: NODE_NAME from the downward API, kubectl on PATH."""
    env = {**bed.env, "NODE_NAME": node, "PATH": f"{cluster.folder}:{bed.env['PATH']}"}
    argv = ["srun", "-N1", "-n1", "-w", node, "-t", "5", *NODE_CHECK, "--k8s", *extra]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_node_check_k8s_cordons_lifts_and_keeps_to_the_cap(tmp_path: Path) -> None:
    nodes = [port_down("n1"), port_down("n2"), healthy_h100("n3")]
    with slurm_bed(tmp_path / "slurm", nodes) as bed:
        cluster = FakeCluster(
            bed,  # type: ignore[arg-type]  # no pods: the bed only lends ssh to pods
            tmp_path / "kube",
            [],
            nodes=[FakeNode("n1"), FakeNode("n2"), FakeNode("n3", unschedulable=True)],
        )
        first = k8s_step(bed, cluster, "n1", "-e", "max_quarantine=1")
        assert first.returncode == 1, first.stderr
        assert "node n1: cordon, taint" in first.stdout
        n1: dict[str, Any] = cluster.node("n1")
        assert n1["spec"]["unschedulable"] is True
        assert json.loads(n1["metadata"]["annotations"][ANNOTATION])["checks"] == ["ib.port_state"]
        # n2 fails too, beyond max_quarantine 1: reported, not cordoned.
        second = k8s_step(bed, cluster, "n2", "-e", "max_quarantine=1", "--json", str(tmp_path / "n2.json"))
        assert second.returncode == 1 and "node n2 not cordoned: quarantine cap" in second.stdout
        assert not cluster.node("n2")["spec"].get("unschedulable")
        document = json.loads((tmp_path / "n2.json").read_text())
        assert [c["status"] for c in document["checks"] if c["id"] == "quarantine.cap"] == ["FAIL"]
        # n3, cordoned by an operator and healthy, is left as it is.
        assert k8s_step(bed, cluster, "n3").returncode == 0
        assert cluster.node("n3")["spec"]["unschedulable"] is True
        # n1 repaired: its quarantine is lifted.
        bed.plant("n1", healthy_h100("n1"))
        lifted = k8s_step(bed, cluster, "n1")
        assert lifted.returncode == 0 and "node n1: uncordon, untaint" in lifted.stdout
        n1 = cluster.node("n1")
        assert not n1["spec"].get("unschedulable") and ANNOTATION not in n1["metadata"]["annotations"]
        kubectl = real_kubectl()
        for argv in cluster.calls():
            ok, said = parses_with_real_kubectl(kubectl, ["kubectl", *argv], tmp_path)
            assert ok, (argv, said)
