"""A fake ``kubectl`` for tests: test-bed hosts stand for pods, no API server needed.

:class:`FakeCluster` writes an executable ``kubectl`` (Python) and its state (JSON) into a folder that a
test puts first on the PATH of the diagnose process. It answers the subset diagnose uses:

* ``get pod NAME -o json`` and ``get pods -l SELECTOR -o json``: the captured pod of
  tests/fixtures/k8s/ renamed per pod, with its node, phase and the test bed's address as pod IP;
* ``exec -i POD [-c C] -- /bin/sh -c SCRIPT``: the real ``ssh`` into the test-bed host standing for the
  pod (TestBed.ssh_argv), stdin passed through, exit status kept (``os.execvp``);
* global ``--kubeconfig``, ``--context``, ``-n`` and extra options, as kubectl's own parser takes them;
* nodes (tests/fixtures/k8s/gpu-node.json renamed per node): ``get node NAME -o json``, ``get nodes
  [NAME ...] -o json`` (the found ones, NotFound for the others), ``cordon``/``uncordon``, ``taint node`` (add with ``--overwrite``, remove ``KEY:EFFECT-``),
  ``annotate node`` (``--overwrite``, remove ``KEY-``) and ``patch node --subresource=status
  --type=strategic`` of conditions (merged by type), each changing the state file as the API server would.

Errors are printed in kubectl's words. Every command line is appended to ``calls.jsonl``, so a test can
hand each one to the real kubectl's parser (:func:`real_kubectl`, :func:`parses_with_real_kubectl`).
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.paths import FIXTURES
from tests.support.prerequisites import unavailable
from tests.support.testbed import TestBed, TestHost

FIXTURE = FIXTURES / "k8s" / "rdma-gpu-pod.json"
NODE_FIXTURE = FIXTURES / "k8s" / "gpu-node.json"

SCRIPT = r"""
import fcntl, json, os, re, shlex, sys
if {"cordon", "uncordon", "taint", "annotate", "patch"} & set(sys.argv[1:]):  # one writer at a time, as
    _lock = open((os.environ.get("FAKE_KUBECTL_STATE") or STATE) + ".lock", "w")  # the API server
    fcntl.flock(_lock, fcntl.LOCK_EX)
state = json.load(open(os.environ.get("FAKE_KUBECTL_STATE") or STATE))
argv = sys.argv[1:]
with open(os.path.join(os.path.dirname(STATE), "calls.jsonl"), "a") as log:
    log.write(json.dumps(argv) + "\n")
def fail(text, rc=1):
    sys.stderr.write(text + "\n"); sys.exit(rc)
flags, words, rest, i = {}, [], None, 0
valued = {"--kubeconfig", "--context", "-n", "--namespace", "-l", "--selector", "-o", "-c",
          "--container", "--request-timeout", "--server", "-s", "--cluster", "--user", "--as", "-p",
          "--patch", "--type", "--subresource"}
while i < len(argv):
    a = argv[i]
    if a == "--":
        rest = argv[i + 1:]; break
    name, eq, value = a.partition("=")
    if name in valued:
        if not eq:
            i += 1; value = argv[i]
        flags[name] = value
    elif a.startswith("-"):
        flags[name] = value or True
    else:
        words.append(a)
    i += 1
context = flags.get("--context")
if context is not None and context not in state["contexts"]:
    fail(f"error: context was not found for specified context: {context}")
ns = flags.get("-n") or flags.get("--namespace") or "default"
pods = {p["metadata"]["name"]: p for p in state["pods"] if p["metadata"]["namespace"] == ns}
if words[:2] == ["get", "pod"] and len(words) == 3:
    pod = pods.get(words[2])
    if pod is None:
        fail(f'Error from server (NotFound): pods "{words[2]}" not found')
    print(json.dumps(pod)); sys.exit(0)
if words == ["get", "pods"]:
    selector = flags.get("-l") or flags.get("--selector") or ""
    wanted = {}
    for term in selector.split(","):
        m = re.fullmatch(r"([A-Za-z0-9_./-]+)==?([A-Za-z0-9_.-]*)", term.strip())
        if not m:
            fail(f"error: unable to parse requirement: invalid label selector {selector!r}")
        wanted[m.group(1)] = m.group(2)
    items = [p for p in pods.values()
             if all(p["metadata"].get("labels", {}).get(k) == v for k, v in wanted.items())]
    print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items})); sys.exit(0)
nodes = {n["metadata"]["name"]: n for n in state.get("nodes", [])}
def save():
    with open(os.environ.get("FAKE_KUBECTL_STATE") or STATE, "w") as out:
        json.dump(state, out)
def node_named(name):
    if name not in nodes:
        fail(f'Error from server (NotFound): nodes "{name}" not found')
    if name in state.get("refuse", []):
        fail(f'Error from server (Forbidden): nodes "{name}" is forbidden: User "diagnose" cannot patch '
             'resource "nodes" in API group "" at the cluster scope')
    return nodes[name]
if words[:2] == ["get", "node"] and len(words) == 3 and words[2] in nodes:
    print(json.dumps(nodes[words[2]])); sys.exit(0)
if words[:2] == ["get", "node"] and len(words) == 3:
    fail(f'Error from server (NotFound): nodes "{words[2]}" not found')
if words[:2] == ["get", "nodes"]:
    wanted = words[2:] or list(nodes)
    print(json.dumps({"apiVersion": "v1", "kind": "List", "items": [nodes[n] for n in wanted if n in nodes]}))
    for name in wanted:
        if name not in nodes:
            sys.stderr.write(f'Error from server (NotFound): nodes "{name}" not found\n')
    sys.exit(0 if all(n in nodes for n in wanted) else 1)
if words[:1] in (["cordon"], ["uncordon"]) and len(words) == 2:
    node = node_named(words[1])
    cordon = words[0] == "cordon"
    if bool(node["spec"].get("unschedulable")) == cordon:
        print(f"node/{words[1]} already {words[0]}ed"); sys.exit(0)
    if cordon:
        node["spec"]["unschedulable"] = True
        node["spec"].setdefault("taints", []).append(
            {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": "2024-02-08T11:05:00Z"})
    else:
        node["spec"].pop("unschedulable", None)
        node["spec"]["taints"] = [t for t in node["spec"].get("taints", [])
                                  if t["key"] != "node.kubernetes.io/unschedulable"]
    save(); print(f"node/{words[1]} {words[0]}ed"); sys.exit(0)
if words[:2] == ["taint", "node"] and len(words) == 4:
    node = node_named(words[2])
    taints = node["spec"].setdefault("taints", [])
    spec = words[3]
    if spec.endswith("-"):
        key, _, effect = spec[:-1].partition(":")
        kept = [t for t in taints if not (t["key"] == key and t["effect"] == effect)]
        if len(kept) == len(taints):
            fail(f'error: taint "{spec[:-1]}" not found')
        node["spec"]["taints"] = kept
        save(); print(f"node/{words[2]} untainted"); sys.exit(0)
    m = re.fullmatch(r"([A-Za-z0-9_./-]+)(?:=([A-Za-z0-9_.-]*))?:(NoSchedule|PreferNoSchedule|NoExecute)", spec)
    if not m:
        fail(f'error: invalid taint spec: {spec}')
    same = [t for t in taints if t["key"] == m.group(1) and t["effect"] == m.group(3)]
    if same and "--overwrite" not in flags:
        fail(f"error: node {words[2]} already has {m.group(1)} taint(s) with same effect(s) and --overwrite is false")
    node["spec"]["taints"] = [t for t in taints if t not in same] + [
        {"key": m.group(1), "value": m.group(2) or "", "effect": m.group(3), "timeAdded": "2024-02-08T11:05:00Z"}]
    save(); print(f"node/{words[2]} {'modified' if same else 'tainted'}"); sys.exit(0)
if words[:2] == ["annotate", "node"] and len(words) == 4:
    node = node_named(words[2])
    notes = node["metadata"].setdefault("annotations", {})
    spec = words[3]
    if spec.endswith("-") and "=" not in spec:
        notes.pop(spec[:-1], None)
    else:
        key, _, value = spec.partition("=")
        if key in notes and "--overwrite" not in flags:
            fail(f"error: --overwrite is false but found the following declared annotation(s): '{key}' already has a value ({notes[key]})")
        notes[key] = value
    save(); print(f"node/{words[2]} annotated"); sys.exit(0)
if words[:2] == ["patch", "node"] and len(words) == 3:
    node = node_named(words[2])
    if flags.get("--subresource") != "status" or flags.get("--type") != "strategic":
        fail("fake kubectl: only strategic patches of a node's status are served", 64)
    patch = json.loads(flags.get("-p") or flags.get("--patch"))
    conditions = node["status"].setdefault("conditions", [])
    for new in patch["status"]["conditions"]:
        conditions[:] = [c for c in conditions if c["type"] != new["type"]] + [new]
    save(); print(f"node/{words[2]} patched"); sys.exit(0)
if words[:1] == ["exec"] and len(words) == 2 and rest is not None and "-i" in flags:
    pod = pods.get(words[1])
    if pod is None:
        fail(f'Error from server (NotFound): pods "{words[1]}" not found')
    phase = pod["status"]["phase"]
    if phase in ("Succeeded", "Failed"):
        fail(f"error: cannot exec into a container in a completed pod; current phase is {phase}")
    if phase != "Running":
        fail('error: unable to upgrade connection: container not found ("main")')
    container = flags.get("-c")
    if container is not None and container != "main":
        fail(f"error: container {container} is not valid for pod {words[1]}")
    ssh = state["ssh"][words[1]]
    os.execvp(ssh[0], ssh + [shlex.join(rest)])
fail(f"fake kubectl: unsupported command line {argv!r}", 64)
"""


@dataclass
class FakePod:
    """A pod the fake cluster knows: which test host it enters, on which node, in which phase."""

    name: str
    host: TestHost | None
    node: str
    phase: str = "Running"
    namespace: str = "ml"
    labels: dict[str, str] | None = None
    #: The pod object to serve instead of the default fixture (a fault: no annotation, other resources).
    pod: dict[str, Any] | None = None


@dataclass
class FakeNode:
    """A node the fake cluster knows, as an operator or an earlier run left it."""

    name: str
    unschedulable: bool = False
    taints: list[dict[str, str]] | None = None
    annotations: dict[str, str] | None = None


class FakeCluster:
    """The fake kubectl's folder (put it first on PATH) and the pods it answers for."""

    def __init__(
        self,
        bed: TestBed,
        folder: Path,
        pods: list[FakePod],
        contexts: tuple[str, ...] = (),
        nodes: list[FakeNode] | None = None,
    ) -> None:
        """``nodes``: the nodes' state; by default every pod's node, schedulable and untainted."""
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.state = self.folder / "state.json"
        template = json.loads(FIXTURE.read_text())
        objects, ssh = [], {}
        for pod in pods:
            obj: dict[str, Any] = copy.deepcopy(pod.pod if pod.pod is not None else template)
            obj["metadata"].update(name=pod.name, namespace=pod.namespace)
            if pod.labels is not None:
                obj["metadata"]["labels"] = pod.labels
            obj["spec"]["nodeName"] = pod.node
            obj["status"]["phase"] = pod.phase
            address = pod.host.address if pod.host else "127.0.0.1"
            obj["status"]["podIP"] = address
            obj["status"]["podIPs"] = [{"ip": address}]
            objects.append(obj)
            if pod.host is not None:
                ssh[pod.name] = bed.ssh_argv(pod.host, "")[:-1]
        if nodes is None:
            nodes = [FakeNode(name) for name in dict.fromkeys(pod.node for pod in pods)]
        state = {
            "pods": objects,
            "ssh": ssh,
            "contexts": list(contexts),
            "nodes": [node_object(n) for n in nodes],
        }
        self.state.write_text(json.dumps(state))
        kubectl = self.folder / "kubectl"
        kubectl.write_text(f"#!{sys.executable}\nSTATE = {str(self.state)!r}\n{SCRIPT}")
        kubectl.chmod(0o755)

    def env(self) -> dict[str, str]:
        """The environment of a diagnose process that must find this kubectl first."""
        return {**os.environ, "PATH": f"{self.folder}:{os.environ.get('PATH', '')}"}

    def node(self, name: str) -> dict[str, Any]:
        """The node object as the fake API server holds it now."""
        return next(n for n in json.loads(self.state.read_text())["nodes"] if n["metadata"]["name"] == name)

    def enter(self, bed: TestBed, pod: str, host: TestHost) -> None:
        """From now on ``kubectl exec`` into ``pod`` enters ``host`` (a fault repaired, or planted)."""
        state = json.loads(self.state.read_text())
        state["ssh"][pod] = bed.ssh_argv(host, "")[:-1]
        self.state.write_text(json.dumps(state))

    def refuse(self, *names: str) -> None:
        """From now on, changes to these nodes are Forbidden (RBAC without patch on nodes)."""
        state = json.loads(self.state.read_text())
        state["refuse"] = list(names)
        self.state.write_text(json.dumps(state))

    def calls(self) -> list[list[str]]:
        log = self.folder / "calls.jsonl"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def node_object(node: FakeNode) -> dict[str, Any]:
    """The captured-shape node object (tests/fixtures/k8s/gpu-node.json) as ``node`` says."""
    obj: dict[str, Any] = json.loads(NODE_FIXTURE.read_text())
    obj["metadata"]["name"] = node.name
    obj["metadata"]["labels"]["kubernetes.io/hostname"] = node.name
    obj["metadata"]["annotations"].update(node.annotations or {})
    taints = list(node.taints or [])
    if node.unschedulable:
        obj["spec"]["unschedulable"] = True
        taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
    if taints:
        obj["spec"]["taints"] = taints
    return obj


def real_kubectl() -> str:
    """The real kubectl (Debian's kubernetes-client, or one installed otherwise). Without one the calling
    test fails under CI, which installs it (.ci/install-test-deps), and is skipped elsewhere."""
    for candidate in ("/usr/bin/kubectl", shutil.which("kubectl")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    unavailable("checking command lines with the real kubectl", "no kubectl here (kubernetes-client)")


def parses_with_real_kubectl(kubectl: str, argv: list[str], workdir: Path) -> tuple[bool, str]:
    """Whether the real kubectl accepts ``argv`` (as built by diagnose, argv[0] replaced): it is pointed
    at an unreachable server, so a command line it parses fails on the connection, not on its flags."""
    config = workdir / "kubeconfig"
    contexts = {a.partition("=")[2] for a in argv if a.startswith("--context=")} or {"bed"}
    config.write_text(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: bed\n  cluster:\n    server: https://127.0.0.1:1\n"
        "users:\n- name: bed\n  user: {token: not-a-secret}\ncontexts:\n"
        + "".join(f"- name: {c}\n  context: {{cluster: bed, user: bed}}\n" for c in contexts)
        + f"current-context: {sorted(contexts)[0]}\n"
    )
    words = [a for a in argv[1:] if not a.startswith("--kubeconfig=")]
    done = subprocess.run(
        [kubectl, f"--kubeconfig={config}", "--request-timeout=2s", *words],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "HOME": str(workdir)},
    )
    text = done.stderr + done.stdout
    reached = any(w in text for w in ("connection refused", "127.0.0.1:1", "Unable to connect"))
    return reached and "unknown flag" not in text and "unknown shorthand" not in text, text
