"""A failing run says why on the terminal and on the report's first page: one line per cause, the hosts
folded, what to do (docs/why-it-failed.md)."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import diagnose

pytestmark = pytest.mark.e2e


def _closed_port() -> int:
    """A loopback port nothing listens on: bound, then released."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_refused_and_unresolvable_hosts_are_two_cause_lines(tmp_path: Path) -> None:
    key = tmp_path / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    hosts = "\n".join(
        f"    node0{i}: {{ansible_host: 127.0.0.1, ansible_port: {_closed_port()}}}" for i in range(1, 4)
    )
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(
        f"all:\n  vars:\n    ansible_ssh_private_key_file: {key}\n  hosts:\n{hosts}\n"
        "    node04: {ansible_host: node04.invalid}\n"
    )
    out = tmp_path / "run"
    done = diagnose(
        "run", "-i", str(inventory), "--skip-benchmarks", "-o", str(out), "--format", "json,html",
        "-e", "diagnose_profile=cpu-testbed", cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("diagnose: FAIL — 4 hosts, 4 FAIL") and lines[0].endswith(str(out))
    assert lines[1].startswith("diagnose: ")
    files = lines.index(f"  {out / 'results.json'}")
    starts = [i for i in range(2, files - 1) if lines[i].split()[0] == "FAIL"]
    assert len(starts) == 2, lines  # two causes, each wrapped over its own lines
    refused = " ".join(" ".join(line.split()) for line in lines[starts[0] : starts[1]])
    unresolved = lines[starts[1]]
    assert refused.split()[:3] == ["FAIL", "node[01-03]", "host.reachable"], refused
    assert "refused (no SSH server listening?)" in refused and refused.endswith("→ fix the configuration")
    assert unresolved.split()[:3] == ["FAIL", "node04", "host.reachable"], unresolved
    assert (
        lines[files - 1]
        == f"diagnose: to retest the hosts that failed once repaired: --limit @{out / 'failed.retry'}"
    )
    assert lines[files:] == [f"  {out / 'results.json'}", f"  {out / 'report.html'}"]
    recorded = json.loads((out / "results.json").read_text())
    assert {c["action"] for c in recorded["checks"] if c["status"] == "FAIL"} == {"check_config"}
    html = (out / "report.html").read_text()
    cover = html[html.index('id="cover"') : html.index('id="contents"')]
    assert "Why it did not pass: top causes" in cover and "node[01-03]" in cover
