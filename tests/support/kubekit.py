"""A fake ``kubectl`` for tests: test-bed hosts stand for pods, no API server needed.

:class:`FakeCluster` writes an executable ``kubectl`` (Python) and its state (JSON) into a folder that a
test puts first on the PATH of the diagnose process. It answers the subset diagnose uses:

* ``get pod NAME -o json`` and ``get pods -l SELECTOR -o json``: the captured pod of
  tests/fixtures/k8s/ renamed per pod, with its node, phase and the test bed's address as pod IP;
* ``exec -i POD [-c C] -- /bin/sh -c SCRIPT``: the real ``ssh`` into the test-bed host standing for the
  pod (TestBed.ssh_argv), stdin passed through, exit status kept (``os.execvp``);
* global ``--kubeconfig``, ``--context``, ``-n`` and extra options, as kubectl's own parser takes them.

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

SCRIPT = r"""
import json, os, re, shlex, sys
state = json.load(open(os.environ.get("FAKE_KUBECTL_STATE") or STATE))
argv = sys.argv[1:]
with open(os.path.join(os.path.dirname(STATE), "calls.jsonl"), "a") as log:
    log.write(json.dumps(argv) + "\n")
def fail(text, rc=1):
    sys.stderr.write(text + "\n"); sys.exit(rc)
flags, words, rest, i = {}, [], None, 0
valued = {"--kubeconfig", "--context", "-n", "--namespace", "-l", "--selector", "-o", "-c",
          "--container", "--request-timeout", "--server", "-s", "--cluster", "--user", "--as"}
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


class FakeCluster:
    """The fake kubectl's folder (put it first on PATH) and the pods it answers for."""

    def __init__(
        self, bed: TestBed, folder: Path, pods: list[FakePod], contexts: tuple[str, ...] = ()
    ) -> None:
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
        self.state.write_text(json.dumps({"pods": objects, "ssh": ssh, "contexts": list(contexts)}))
        kubectl = self.folder / "kubectl"
        kubectl.write_text(f"#!{sys.executable}\nSTATE = {str(self.state)!r}\n{SCRIPT}")
        kubectl.chmod(0o755)

    def env(self) -> dict[str, str]:
        """The environment of a diagnose process that must find this kubectl first."""
        return {**os.environ, "PATH": f"{self.folder}:{os.environ.get('PATH', '')}"}

    def calls(self) -> list[list[str]]:
        log = self.folder / "calls.jsonl"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


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
