"""A default run on two real sshd hosts whose benchmark Python cannot import torch: one cause, not one per
benchmark. The hosts' ``bench_python`` is this machine's Python started with ``-S`` (no site-packages, so
no torch), which is how a host with torch in another environment than the one named looks."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from diagnose.cli import main
from tests.support.testbed import HostSpec, TestBed

pytestmark = pytest.mark.integration


def python_without_torch(folder: Path) -> Path:
    bare = folder / "python-without-torch"
    bare.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    bare.chmod(0o755)
    return bare


def test_torch_missing_on_both_hosts_is_one_cause_with_one_fix(
    testbed: TestBed, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bare = python_without_torch(tmp_path)
    testbed.add_many([HostSpec("node1"), HostSpec("node2")])
    inventory = testbed.write_inventory(
        tmp_path / "inventory.yaml",
        extra_vars={"ansible_python_interpreter": sys.executable, "bench_python": str(bare)},
    )
    out = tmp_path / "out"
    assert main(["run", "-i", str(inventory), "-o", str(out), "--format", "json"]) == 1
    printed = capsys.readouterr().out
    causes = json.loads((out / "results.json").read_text())["causes"]
    assert [(c["check"], c["hosts"], c["status"]) for c in causes] == [
        ("host.torch", ["node1", "node2"], "ERROR")
    ]
    under = {c["id"] for c in causes[0]["consequences"]}
    assert {"bench.all_reduce", "train.overlap", "infer.kv_transfer", "fleet.memcpy"} <= under
    assert causes[0]["message"].startswith("torch cannot be imported by ")
    assert "torch not importable (ModuleNotFoundError)" in causes[0]["message"]
    assert printed.count("or point bench_python") == 1, printed


def test_a_lone_cpu_machine_without_torch_loses_no_verdict_and_still_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's first command on a fresh machine without GPU nor torch: its stress and memory-copy
    programs would only have shown that they run, so torch's absence is a SKIP with its fix, not an ERROR."""
    bare = python_without_torch(tmp_path)
    out = tmp_path / "out"
    assert main(["run", "-o", str(out), "--format", "json", "-e", f"bench_python={bare}"]) == 0
    capsys.readouterr()
    document = json.loads((out / "results.json").read_text())
    (torch,) = [c for c in document["checks"] if c["id"] == "host.torch"]
    assert torch["status"] == "SKIP", torch
    assert torch["message"].startswith("torch cannot be imported by ")
    assert "no verdict is lost" in torch["message"] and "pip install torch" in torch["message"]
    assert document["causes"] == []
