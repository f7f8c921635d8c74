"""Taking a Kubernetes node out of scheduling when its pod's checks FAIL, and back when they pass again.

The rule is ownership by annotation, as Slurm's is by reason text (:mod:`diagnose.slurm.drain`). Before
diagnose cordons or taints a node it writes ``diagnose.health/quarantine`` on it: JSON saying whether
diagnose cordoned it (a node already unschedulable — an operator's ``kubectl cordon``, a drain for
maintenance — is *not* cordoned by diagnose, and says so), the taint it set, the run and the checks. A later
healthy run lifts only what that annotation says diagnose set: an operator's cordon stays, an operator's
taint is never touched (diagnose only ever writes the taint key ``diagnose.health/unhealthy``), and a node
without the annotation is left exactly as it is. The annotation is written first and removed last, so a
run cut short in between never leaves a cordon that no later run would own.

Beside the annotation the node gets a condition, ``DiagnoseHealthy`` (False with the failed checks, True
once lifted), which ``kubectl describe node`` and node dashboards show with the kubelet's own.

:func:`node_state`, :func:`quarantine_steps` and :func:`lift_steps` are pure (a node object in, the kubectl
command lines out); :func:`read_nodes`, :func:`list_nodes` and :func:`apply` are the only I/O, argv lists
through :func:`diagnose.k8s.kubectl.run_kubectl`, so nothing from a node or a check reaches a shell.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from diagnose.k8s.kubectl import KUBECTL_TIMEOUT_S, K8sError, Runner, run_kubectl
from diagnose.k8s.target import KubectlTarget, first_error_line

TAINT_KEY = "diagnose.health/unhealthy"
TAINT_EFFECT = "NoSchedule"
ANNOTATION = "diagnose.health/quarantine"
CONDITION = "DiagnoseHealthy"
FAILED_REASON, PASSED_REASON = "ChecksFailed", "ChecksPassed"
#: A taint value is a label value: 63 characters of letters, digits, ``-_.``, alphanumeric at both ends.
_LABEL_VALUE_LIMIT = 63
_NOT_LABEL = re.compile(r"[^A-Za-z0-9_.-]+")
#: A condition's message, as ``kubectl describe node`` shows it on one line.
MESSAGE_LIMIT = 300


@dataclass(frozen=True)
class NodeState:
    """What the node says now: cordoned or not, its taints (key, value, effect), diagnose's annotation
    (parsed; None when absent or unreadable) and its ``DiagnoseHealthy`` condition."""

    name: str
    unschedulable: bool
    taints: tuple[tuple[str, str, str], ...] = ()
    ours: Mapping[str, Any] | None = None
    condition: Mapping[str, Any] | None = None

    @property
    def our_taint(self) -> tuple[str, str, str] | None:
        return next((t for t in self.taints if t[0] == TAINT_KEY and t[2] == TAINT_EFFECT), None)


def node_state(node: Mapping[str, Any]) -> NodeState:
    """The parts of a ``kubectl get node -o json`` object that decide what diagnose may do (pure)."""
    metadata = node.get("metadata") if isinstance(node.get("metadata"), Mapping) else {}
    spec = node.get("spec") if isinstance(node.get("spec"), Mapping) else {}
    status = node.get("status") if isinstance(node.get("status"), Mapping) else {}
    taints = tuple(
        (str(t.get("key", "")), str(t.get("value", "") or ""), str(t.get("effect", "")))
        for t in spec.get("taints") or []
        if isinstance(t, Mapping)
    )
    annotations = metadata.get("annotations") if isinstance(metadata.get("annotations"), Mapping) else {}
    ours: Mapping[str, Any] | None = None
    if ANNOTATION in annotations:
        try:
            parsed = json.loads(str(annotations[ANNOTATION]))
        except ValueError:
            parsed = {}
        ours = parsed if isinstance(parsed, Mapping) else {}
    condition = next(
        (c for c in status.get("conditions") or [] if isinstance(c, Mapping) and c.get("type") == CONDITION),
        None,
    )
    return NodeState(str(metadata.get("name", "")), bool(spec.get("unschedulable")), taints, ours, condition)


def taint_value(check: str) -> str:
    """A check id as a taint value: ``gpu.xid`` stays, ``custom.site::test_fan`` becomes
    ``custom.site_test_fan`` (label values hold no ``:``), cut to 63 characters."""
    value = _NOT_LABEL.sub("_", check)[:_LABEL_VALUE_LIMIT].strip("-_.")
    return value or "failed"


@dataclass(frozen=True)
class Step:
    """One thing done to a node (``argv`` after kubectl's global options), or left alone (``argv`` empty:
    ``state`` says kept or left, ``by`` whose it is)."""

    step: str  # taint, cordon, annotate, condition; untaint, uncordon, unannotate
    detail: str
    argv: tuple[str, ...] = ()
    by: str = "diagnose"
    state: str = "done"


def _condition_patch(healthy: bool, reason: str, message: str, now: str, since: str | None) -> str:
    condition = {
        "type": CONDITION,
        "status": "True" if healthy else "False",
        "reason": reason,
        "message": message[:MESSAGE_LIMIT],
        "lastHeartbeatTime": now,
        "lastTransitionTime": since or now,
    }
    return json.dumps({"status": {"conditions": [condition]}}, separators=(",", ":"))


def _condition_step(state: NodeState, healthy: bool, reason: str, message: str, now: str) -> Step:
    """The condition as a strategic merge patch of the status subresource (conditions merge by type);
    its transition time moves only when its status does."""
    wanted = "True" if healthy else "False"
    old = state.condition or {}
    since = (
        str(old["lastTransitionTime"])
        if old.get("status") == wanted and old.get("lastTransitionTime")
        else None
    )
    patch = _condition_patch(healthy, reason, message, now, since)
    argv = ("patch", "node", state.name, "--subresource=status", "--type=strategic", "-p", patch)
    return Step("condition", f"{CONDITION}={wanted} {reason}", argv)


def quarantine_steps(
    state: NodeState, checks: Sequence[str], run_id: str, now: str, message: str
) -> list[Step]:
    """Annotate, taint, cordon (unless someone else had), set the condition: in that order."""
    taint = f"{TAINT_KEY}={taint_value(checks[0] if checks else '')}:{TAINT_EFFECT}"
    previous = state.ours or {}
    cordoned_by_us = bool(previous.get("cordoned")) if state.ours is not None else not state.unschedulable
    note = {
        "cordoned": cordoned_by_us,
        "taint": taint,
        "run": run_id,
        "checks": list(checks),
        "since": str(previous.get("since") or now),
    }
    text = json.dumps(note, separators=(",", ":"))
    steps = [Step("annotate", f"{ANNOTATION} (cordoned by diagnose: {'yes' if cordoned_by_us else 'no'})",
                  ("annotate", "node", state.name, "--overwrite", f"{ANNOTATION}={text}"))]  # fmt: skip
    current = state.our_taint
    if current is not None and f"{current[0]}={current[1]}:{current[2]}" == taint:
        steps.append(Step("taint", taint, state="kept"))
    else:
        steps.append(Step("taint", taint, ("taint", "node", state.name, taint, "--overwrite")))
    if not state.unschedulable:
        steps.append(Step("cordon", "unschedulable", ("cordon", state.name)))
    elif cordoned_by_us:
        steps.append(Step("cordon", "unschedulable since an earlier run", state="kept"))
    else:
        steps.append(
            Step("cordon", "already unschedulable before diagnose came", by="operator", state="left")
        )
    steps.append(_condition_step(state, False, FAILED_REASON, message, now))
    return steps


def lift_steps(state: NodeState, message: str, now: str) -> list[Step]:
    """What a healthy run undoes: only what the annotation says diagnose set, the annotation last.
    Nothing for a node without it (an operator's cordon is reported as left alone)."""
    if state.ours is None:
        if state.unschedulable:
            return [Step("uncordon", "unschedulable, not by diagnose", by="operator", state="left")]
        return []
    steps = [_condition_step(state, True, PASSED_REASON, message, now)]
    if state.unschedulable and state.ours.get("cordoned"):
        steps.append(Step("uncordon", "schedulable again", ("uncordon", state.name)))
    elif state.unschedulable:
        steps.append(Step("uncordon", "cordoned before diagnose came: stays", by="operator", state="left"))
    taint = state.our_taint
    if taint is not None:
        spec = f"{TAINT_KEY}:{TAINT_EFFECT}-"
        steps.append(
            Step("untaint", f"{taint[0]}={taint[1]}:{taint[2]}", ("taint", "node", state.name, spec))
        )
    steps.append(Step("unannotate", ANNOTATION, ("annotate", "node", state.name, f"{ANNOTATION}-")))
    return steps


# ----------------------------------------------------------------------------------------------- the I/O


def cluster_target(values: Mapping[str, Any]) -> KubectlTarget:
    """kubectl's global options (binary, kubeconfig, context, extra args) from a host's variables, without
    the namespace: nodes belong to no namespace."""
    return replace(KubectlTarget.of(values, ""), namespace=None)


def _json(target: KubectlTarget, argv: list[str], run: Runner) -> Any:
    done = run([*target.base(), *argv], KUBECTL_TIMEOUT_S)
    if done.returncode != 0:
        said = first_error_line(done.stderr) or f"exit code {done.returncode}"
        raise K8sError(f"kubectl {' '.join(argv[:3])}: {said}")
    try:
        return json.loads(done.stdout)
    except ValueError:
        raise K8sError(f"kubectl {' '.join(argv[:3])} printed no JSON") from None


def read_nodes(
    target: KubectlTarget, names: Sequence[str], run: Runner = run_kubectl
) -> dict[str, NodeState]:
    """Several nodes in one call (``kubectl get nodes A B C -o json``): those the API server has, by name.
    kubectl prints the nodes it found even when another name is unknown (and exits 1), so a missing node
    is left out of the answer rather than failing the others; K8sError when nothing could be read."""
    done = run([*target.base(), "get", "nodes", *names, "-o", "json"], KUBECTL_TIMEOUT_S)
    try:
        listing = json.loads(done.stdout) if done.stdout.strip() else None
    except ValueError:
        listing = None
    if not isinstance(listing, Mapping):
        said = first_error_line(done.stderr) or f"exit code {done.returncode}"
        raise K8sError(f"kubectl get nodes: {said}")
    items = listing.get("items") if listing.get("kind") == "List" else [listing]
    states = [node_state(item) for item in items or [] if isinstance(item, Mapping)]
    return {state.name: state for state in states if state.name in names}


def list_nodes(target: KubectlTarget, run: Runner = run_kubectl) -> list[NodeState]:
    """Every node of the cluster (node-check's cap counts the ones diagnose holds out)."""
    listing = _json(target, ["get", "nodes", "-o", "json"], run)
    items = listing.get("items") if isinstance(listing, Mapping) else None
    return [node_state(item) for item in items or [] if isinstance(item, Mapping)]


def apply(target: KubectlTarget, step: Step, run: Runner = run_kubectl) -> str | None:
    """Carry out one step (nothing for a kept or left one); None, or kubectl's reason it was refused."""
    if not step.argv:
        return None
    try:
        done = run([*target.base(), *step.argv], KUBECTL_TIMEOUT_S)
    except K8sError as exc:
        return str(exc)
    if done.returncode != 0:
        return first_error_line(done.stderr) or f"kubectl exited {done.returncode}"
    return None
