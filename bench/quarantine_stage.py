"""Quarantine stage bench: how long ``--k8s-cordon`` takes to read, cordon and lift the nodes of a large run.

Every kubectl call is a process start and an API round trip. The bench stands a kubectl in for the API
server with a fixed latency per call (it answers ``get node`` with tests/fixtures/k8s/gpu-node.json renamed,
carrying diagnose's annotation on the nodes an earlier run quarantined, and accepts every change), then runs
:class:`diagnose.quarantine.kubernetes.CordonStage` over a run of N pods on N nodes, a share of them failing
and a share of the healthy ones held from an earlier run (to be lifted). It prints, per case, the kubectl
calls and the stage's wall time three ways: the naive baseline (one ``kubectl get nodes NAME`` per node and
every call one after the other), reads of ``READ_CHUNK`` nodes per call still one call at a time, and the
stage as it runs (chunked reads, ``WORKERS`` nodes at once; a node's own steps stay in order).

    python3 bench/quarantine_stage.py [--nodes 64 512] [--latency 0.05 0.2] [--failing 0.05] [--held 0.05]
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from diagnose.core.hosts import Host  # noqa: E402
from diagnose.core.vars import Vars  # noqa: E402
from diagnose.k8s.nodes import ANNOTATION  # noqa: E402
from diagnose.quarantine.kubernetes import READ_CHUNK, WORKERS, CordonStage  # noqa: E402

NODE = json.loads((ROOT / "tests" / "fixtures" / "k8s" / "gpu-node.json").read_text())


class SlowKubectl:
    """A kubectl whose every call takes ``latency`` seconds; counts the calls."""

    def __init__(self, latency: float, held: set[str]) -> None:
        self.latency, self.held, self.calls = latency, held, 0
        self._lock = threading.Lock()

    def __call__(self, argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
        with self._lock:
            self.calls += 1
        time.sleep(self.latency)
        if "get" in argv:
            names = list(argv[argv.index("nodes") + 1 : argv.index("-o")])
            items = []
            for name in names:
                node = copy.deepcopy(NODE)
                node["metadata"]["name"] = name
                if name in self.held:
                    node["spec"]["unschedulable"] = True
                    node["metadata"]["annotations"][ANNOTATION] = json.dumps({"cordoned": True})
                items.append(node)
            return subprocess.CompletedProcess(
                list(argv), 0, json.dumps({"kind": "List", "items": items}), ""
            )
        return subprocess.CompletedProcess(list(argv), 0, "", "")


def case(
    nodes: int, latency: float, failing: float, held: float, workers: int, chunk: int
) -> tuple[int, float, int]:
    """(kubectl calls, seconds, quarantine records) of one stage."""
    bad = set(range(0, nodes, max(1, round(1 / failing)))) if failing else set()
    healthy = [i for i in range(nodes) if i not in bad]
    held_nodes = {f"node-{i:05d}" for i in healthy[: round(held * nodes)]}
    hosts = [
        Host(f"pod-{i:05d}", ["pods"], Vars({"ansible_connection": "kubectl", "diagnose_k8s_node": f"node-{i:05d}",
                                              "max_quarantine_pct": 100}, host=f"pod-{i:05d}"))
        for i in range(nodes)
    ]  # fmt: skip
    checks = [{"id": "host.reachable", "host": h.name, "status": "PASS"} for h in hosts]
    checks += [{"id": "gpu.xid", "host": f"pod-{i:05d}", "status": "FAIL"} for i in sorted(bad)]
    kubectl = SlowKubectl(latency, held_nodes)
    stage = CordonStage(hosts, "20261125T170000Z-bench", run=kubectl, workers=workers, read_chunk=chunk)
    started = time.monotonic()
    stage.act(checks)
    return kubectl.calls, time.monotonic() - started, len(stage.records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[64, 512])
    parser.add_argument("--latency", type=float, nargs="+", default=[0.05, 0.2])
    parser.add_argument("--failing", type=float, default=0.05, help="share of nodes failing (default 0.05)")
    parser.add_argument(
        "--held", type=float, default=0.05, help="share held from an earlier run, now healthy"
    )
    args = parser.parse_args()
    print(
        f"{'nodes':>6} {'latency':>8} | {'naive: a call per node, one at a time':>38} | "
        f"{f'{READ_CHUNK} nodes per read, one at a time':>32} | {f'{READ_CHUNK} per read, {WORKERS} workers':>26}"
    )
    for nodes in args.nodes:
        for latency in args.latency:
            cells = []
            for workers, chunk in ((1, 1), (1, READ_CHUNK), (WORKERS, READ_CHUNK)):
                calls, seconds, _ = case(nodes, latency, args.failing, args.held, workers, chunk)
                cells.append(f"{calls:>5} calls {seconds:>7.1f} s")
            print(f"{nodes:>6} {latency:>7.2f}s | {cells[0]:>38} | {cells[1]:>32} | {cells[2]:>26}")


if __name__ == "__main__":
    main()
