"""`diagnose trace` on the real one-GPU traces of tests/fixtures/traces/patterns/ (an H100; README.md there):
early-profiled DDP stays quiet about DDP's own syncs, a per-step .item() and synchronize() are named, and
DataParallel and a communicator made every step get their own checks, in the terminal, results.json and the
report."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.cli import diagnose
from tests.support.paths import FIXTURES

pytestmark = pytest.mark.e2e

PATTERNS = FIXTURES / "traces" / "patterns"
DDP_SAMPLING = "DDP runtime statistics: cudaEventSynchronize in DistributedDataParallel.forward"


def _trace(tmp_path: Path, name: str, formats: str = "json") -> tuple[int, str, dict]:
    out = tmp_path / name
    done = diagnose(
        "trace", str(PATTERNS / f"{name}_rank0.json.gz"), "--out", str(out), "--format", formats, cwd=tmp_path
    )
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, done.stdout, json.loads((out / "results.json").read_text())


def _statuses(document: dict) -> dict[str, str]:
    return {c["id"]: c["status"] for c in document["checks"]}


def test_early_profiled_ddp_passes_and_shows_ddps_syncs_as_information(tmp_path: Path) -> None:
    code, stdout, document = _trace(tmp_path, "ddp_early_gpu", "json,html")
    assert code == 0 and document["verdict"] == "PASS"
    assert _statuses(document) == {
        "train.overlap": "SKIP", "train.tail": "SKIP", "train.sync": "PASS", "train.input": "SKIP",
        "train.dataparallel": "PASS", "train.communicator": "PASS",
    }  # fmt: skip
    assert re.search(r"^train\.sync\s+PASS\s+user trace: .*not the user's to remove", stdout, re.M)
    assert re.search(r"^train\.dataparallel PASS ", stdout, re.M)  # the id column fits the longest id
    (training,) = document["training"]
    assert training["device"] == "cuda" and training["summary"]["syncs_per_step"] == 0
    assert training["summary"]["framework_sync_causes"] == {DDP_SAMPLING: 16}
    html = (tmp_path / "ddp_early_gpu" / "report.html").read_text()
    chapter = html[html.index('id="training"') :]
    chapter = chapter[: chapter.index("</section>")]
    assert "Host syncs not the user's to remove (information, not judged): 8 per step" in chapter
    assert f"{DDP_SAMPLING} ×16" in chapter and "framework_sync" not in chapter  # words, not raw JSON
    assert "train.dataparallel" in chapter and "train.communicator" in chapter
    for key, title in (
        ("4.5", "DistributedDataParallel, not single-process DataParallel"),
        ("4.6", "Process groups created once, not inside the training loop"),
    ):
        assert re.search(rf'"key">{key}</td>\s*<td>{title}</td>\s*<td><span class="st st-pass">', html)


def test_a_per_step_item_and_synchronize_warn_by_name(tmp_path: Path) -> None:
    code, stdout, document = _trace(tmp_path, "ddp_early_sync_gpu")
    assert code == 0 and _statuses(document)["train.sync"] == "WARN"
    sync = next(c for c in document["checks"] if c["id"] == "train.sync")
    assert sync["observed"]["0"]["sync_causes"] == {
        ".item() (aten::item)": 2,
        "torch.cuda.synchronize() (cudaDeviceSynchronize)": 2,
    }
    assert re.search(
        r"^train\.sync\s+WARN\s+user trace: .*2 host syncs per step in the user's code", stdout, re.M
    )


def test_dataparallel_warns(tmp_path: Path) -> None:
    code, stdout, document = _trace(tmp_path, "dataparallel_gpu")
    assert code == 0 and _statuses(document)["train.dataparallel"] == "WARN"
    assert _statuses(document)["train.communicator"] == "SKIP"
    assert re.search(
        r"^train\.dataparallel WARN\s+user trace: .*single-process nn\.DataParallel", stdout, re.M
    )


def test_a_communicator_per_step_fails_the_run(tmp_path: Path) -> None:
    code, _, document = _trace(tmp_path, "communicator_gpu")
    assert code == 1 and document["verdict"] == "FAIL"
    assert _statuses(document)["train.communicator"] == "FAIL"
    assert _statuses(document)["train.sync"] == "PASS"  # NCCL's init syncs are shown, not judged
    communicator = next(c for c in document["checks"] if c["id"] == "train.communicator")
    assert communicator["observed"]["0"] == {
        "communicator_steps": 3, "communicator_known_steps": 3, "new_communicators": 3,
    }  # fmt: skip
    assert "init_process_group" in communicator["remediation"]
