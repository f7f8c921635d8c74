"""``diagnose run --k8s-cordon``: cordon and taint the Kubernetes nodes whose pods' checks FAIL, lift what
an earlier run set on the nodes that pass again, all within the quarantine cap.

A pod is a host of the run; its node is ``spec.nodeName`` (read before the run by
:func:`diagnose.targets.k8s_pods.attach_pods` into ``diagnose_k8s_node``). A node is failing when a check FAILed on
one of its pods, counting only checks that judge the node: a pod that could not be entered
(``host.reachable``), a pod spec short of RDMA resources (``k8s.*``) or an environment the job set
(``nccl.env``) says nothing about the node under it. A node is healthy when every pod on it was reached and
none of its checks FAILed or could not be judged (ERROR): only then is a quarantine lifted. Whatever was
done, kept, left to the operator or withheld by the cap is recorded, one entry per step, in results.json's
``quarantine`` list, and the cap's verdict is the cluster-wide ``quarantine.cap`` result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import partial
from typing import Any

from diagnose.core.errors import ConfigError
from diagnose.core.hosts import Host
from diagnose.core.model import CheckResult
from diagnose.core.vars import Vars
from diagnose.k8s import nodes as k8s_nodes
from diagnose.k8s.kubectl import K8sError, Runner, run_kubectl
from diagnose.parsers.pod import NODE_VARIABLE
from diagnose.quarantine.cap import (
    FAILED,
    KEPT,
    WITHHELD,
    Candidate,
    cap_finding,
    cap_of,
    record,
    split,
)

SCHEDULER = "kubernetes"
#: Checks about the pod rather than the node under it: they never cordon a node.
NOT_THE_NODE = ("host.reachable", "nccl.env")
NOT_THE_NODE_PREFIXES = ("k8s.",)
UNJUDGED = ("ERROR",)
WORKERS = 8
#: Node names per ``kubectl get nodes`` call: one process and round trip for many nodes, on a line far
#: below the argument limit.
READ_CHUNK = 100


def judges_the_node(check_id: str) -> bool:
    return check_id not in NOT_THE_NODE and not check_id.startswith(NOT_THE_NODE_PREFIXES)


@dataclass
class NodeFindings:
    """One node of the run: its pods (hosts) in inventory order, the node-judging checks that FAILed on
    them, and whether every pod was reached and judged (the condition for lifting)."""

    node: str
    order: int
    hosts: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    judged: bool = True

    @property
    def healthy(self) -> bool:
        return self.judged and not self.failed


def node_findings(hosts: Sequence[Host], checks: Iterable[Mapping[str, Any]]) -> dict[str, NodeFindings]:
    """The run's kubectl hosts grouped by node, with their results (pure)."""
    by_node: dict[str, NodeFindings] = {}
    node_of: dict[str, NodeFindings] = {}
    for host in hosts:
        node = host.vars.str(NODE_VARIABLE)
        if host.connection != "kubectl" or not node:
            continue
        entry = by_node.setdefault(node, NodeFindings(node, len(by_node)))
        entry.hosts.append(host.name)
        node_of[host.name] = entry
    for row in checks:
        entry = node_of.get(str(row.get("host")))
        if entry is None:
            continue
        status, check_id = row.get("status"), str(row.get("id"))
        if check_id == "host.reachable" and status != "PASS":
            entry.judged = False
        elif status == "FAIL" and judges_the_node(check_id) and check_id not in entry.failed:
            entry.failed.append(check_id)
        elif status in UNJUDGED:
            entry.judged = False
    return by_node


def check_cordon_request(hosts: Sequence[Host]) -> None:
    """``--k8s-cordon`` needs pods to act through: a run without any is refused before it starts (exit 2)
    rather than ending without a word about the nodes it was asked to guard."""
    if not any(h.connection == "kubectl" for h in hosts):
        raise ConfigError("--k8s-cordon: no host of the run is a pod (ansible_connection: kubectl)")


def _message(run_id: str, findings: NodeFindings) -> str:
    pods = ", ".join(findings.hosts)
    if findings.failed:
        return f"diagnose run {run_id}: FAIL {', '.join(findings.failed)} (pods {pods})"
    return f"diagnose run {run_id}: all checks passed (pods {pods})"


@dataclass
class CordonStage:
    """One pass over the run's nodes. ``run`` and ``clock`` are injectable for tests."""

    hosts: Sequence[Host]
    run_id: str
    run: Runner = run_kubectl
    clock: Callable[[], str] = lambda: datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    records: list[dict[str, Any]] = field(default_factory=list)
    #: Nodes read and changed at once: each kubectl call is a process and an API round trip (about 0.1 s),
    #: and a node's own steps stay in order (bench/quarantine_stage.py measures the difference).
    workers: int = WORKERS
    read_chunk: int = READ_CHUNK

    def act(self, checks: Iterable[Mapping[str, Any]]) -> CheckResult | None:
        """Quarantine, lift or withhold per node; the ``quarantine.cap`` result (None: no pod on a node)."""
        findings = node_findings(self.hosts, checks)
        if not findings:
            return None
        first = next(h for h in self.hosts if h.connection == "kubectl")
        target = k8s_nodes.cluster_target(first.vars)
        states = self._read(target, list(findings))
        failing = [
            Candidate(f.node, tuple(f.failed), states[f.node] is not None and states[f.node].ours is not None, f.order)
            for f in findings.values()
            if f.failed
        ]  # fmt: skip
        cap = cap_of(h.vars for h in self.hosts)
        taken, withheld = split(failing, cap.limit(len(findings)))
        for candidate in withheld:
            self._withhold(findings[candidate.node], states[candidate.node])
        jobs: list[Callable[[], None]] = [
            partial(self._quarantine, target, findings[c.node], states[c.node]) for c in taken
        ]
        for entry in findings.values():
            state = states[entry.node]
            if entry.healthy and state is not None:
                jobs.append(partial(self._lift, target, entry, state))
        self._each(jobs)
        self.records.sort(key=lambda r: findings[r["node"]].order if r["node"] in findings else -1)
        return cap_finding(taken, withheld, cap, len(findings), "cordoned and tainted")

    def _each(self, jobs: list[Callable[[], None]]) -> None:
        """Run the per-node jobs ``workers`` at a time (the records are put in node order afterwards)."""
        if not jobs:
            return
        with ThreadPoolExecutor(max_workers=max(1, min(self.workers, len(jobs)))) as pool:
            list(pool.map(lambda job: job(), jobs))

    def act_alone(self, findings: NodeFindings, values: Vars) -> CheckResult | None:
        """``node-check --k8s``: one node, judged by the pod on it, against the cap over the whole cluster
        (every node of ``kubectl get nodes`` is selected; those carrying diagnose's annotation are held).
        The ``quarantine.cap`` result only when this node was withheld."""
        target = k8s_nodes.cluster_target(values)
        try:
            cluster = k8s_nodes.list_nodes(target, self.run)
        except K8sError as exc:
            self.records.append(record(SCHEDULER, findings.node, "read", FAILED, detail=str(exc)))
            return None
        state = next((s for s in cluster if s.name == findings.node), None)
        if state is None:
            self.records.append(record(SCHEDULER, findings.node, "read", FAILED, detail="no such node"))
            return None
        if findings.healthy:
            self._lift(target, findings, state)
            return None
        if not findings.failed:
            return None
        cap = cap_of([values])
        holders = [
            Candidate(s.name, (), True) for s in cluster if s.ours is not None and s.name != state.name
        ]
        if state.ours is None and len(holders) >= cap.limit(len(cluster)):
            self._withhold(findings, state)
            mine = Candidate(state.name, tuple(findings.failed))
            return cap_finding(holders, [mine], cap, len(cluster), "cordoned and tainted")
        self._quarantine(target, findings, state)
        return None

    def _read(self, target: Any, names: list[str]) -> dict[str, k8s_nodes.NodeState | None]:
        """Every node of the run, ``read_chunk`` names per kubectl call; one that cannot be read is
        None (recorded as a failed read: neither cordoned nor lifted)."""
        size = max(1, self.read_chunk)
        chunks = [names[i : i + size] for i in range(0, len(names), size)]

        def one(chunk: list[str]) -> dict[str, k8s_nodes.NodeState]:
            try:
                return k8s_nodes.read_nodes(target, chunk, self.run)
            except K8sError as exc:
                self.records.extend(
                    record(SCHEDULER, name, "read", FAILED, detail=str(exc)) for name in chunk
                )
                return {}

        found: dict[str, k8s_nodes.NodeState] = {}
        with ThreadPoolExecutor(max_workers=max(1, min(self.workers, len(chunks)))) as pool:
            for answer in pool.map(one, chunks):
                found.update(answer)
        failed = {r["node"] for r in self.records if r["step"] == "read"}
        for name in names:
            if name not in found and name not in failed:
                self.records.append(record(SCHEDULER, name, "read", FAILED, detail=f"node {name} not found"))
        return {name: found.get(name) for name in names}

    def _log(self, findings: NodeFindings, step: k8s_nodes.Step, state: str, detail: str = "") -> None:
        why = ", ".join(findings.failed) if findings.failed else "checks passed"
        self.records.append(
            record(
                SCHEDULER, findings.node, step.step, state, by=step.by, why=why,
                detail=detail or step.detail, hosts=findings.hosts, checks=findings.failed,
            )
        )  # fmt: skip

    def _carry_out(self, target: Any, findings: NodeFindings, steps: list[k8s_nodes.Step]) -> None:
        """The steps in order; the first refused one stops the rest (they are recorded as not done)."""
        refused: str | None = None
        for step in steps:
            if refused is not None:
                self._log(findings, step, FAILED, f"{step.detail}: not tried after an earlier step failed")
                continue
            refused = k8s_nodes.apply(target, step, self.run)
            self._log(
                findings,
                step,
                FAILED if refused else step.state,
                f"{step.detail}: {refused}" if refused else "",
            )

    def _quarantine(self, target: Any, findings: NodeFindings, state: k8s_nodes.NodeState | None) -> None:
        if state is None:
            return
        steps = k8s_nodes.quarantine_steps(
            state, findings.failed, self.run_id, self.clock(), _message(self.run_id, findings)
        )
        self._carry_out(target, findings, steps)

    def _withhold(self, findings: NodeFindings, state: k8s_nodes.NodeState | None) -> None:
        if state is not None and state.ours is not None:
            self._log(findings, k8s_nodes.Step("cordon", "as an earlier run left it, beyond the cap"), KEPT)
            return
        for step, detail in (("taint", k8s_nodes.TAINT_KEY), ("cordon", "unschedulable")):
            self._log(findings, k8s_nodes.Step(step, f"{detail}: beyond the quarantine cap"), WITHHELD)

    def _lift(self, target: Any, findings: NodeFindings, state: k8s_nodes.NodeState) -> None:
        steps = k8s_nodes.lift_steps(state, _message(self.run_id, findings), self.clock())
        self._carry_out(target, findings, steps)
