"""Hosts judged without a profile (docs/dry-run.md): what no profile asks for may be absent, what a host
shows is still judged. Issue 36, item 5: a run whose note said GPU checks SKIP as not required ERRORed on a
missing nvidia-smi and FAILed on a missing NCCL."""

from __future__ import annotations

import json
from typing import Any

import pytest

from diagnose.checks import (
    gpu_clocks,
    gpu_memory,
    gpu_nvlink,
    gpu_pcie,
    gpu_persistence,
    gpu_processes,
    gpu_topology,
    nccl_version,
)
from diagnose.config.profiles import NO_PROFILE_NO_GPU, no_gpu_required
from diagnose.core.check import Check
from diagnose.core.model import CommandOutput
from diagnose.core.vars import Vars
from diagnose.engine.evaluate import evaluate_check
from tests.support.paths import CAPTURED, FACTS
from tests.support.rulekit import MISSING, profile

NO_PROFILE = Vars(host="cpu1")
NVIDIA_SMI_CHECKS = (
    gpu_topology,
    gpu_clocks,
    gpu_memory,
    gpu_nvlink,
    gpu_pcie,
    gpu_persistence,
    gpu_processes,
)


def test_no_gpu_is_required_only_where_nothing_expects_one() -> None:
    assert no_gpu_required(NO_PROFILE) == NO_PROFILE_NO_GPU
    assert "expects no GPU (expected_gpu_count 0)" in (no_gpu_required(profile("cpu-testbed")) or "")
    assert no_gpu_required(profile("h100-8x-ndr400")) is None
    assert no_gpu_required(Vars({"expected_gpu_count": 8})) is None, "a count set without a profile"
    assert no_gpu_required(Vars({"expected_gpu_count": None})) is None, "null: any number from one"


def _all_missing(check: Check, host_vars: Vars) -> dict[str, CommandOutput]:
    """Every command of the check answered as on a host without nvidia-smi (exit 127)."""
    return {command.key: MISSING for command in check.host_commands(host_vars)}


@pytest.mark.parametrize("module", NVIDIA_SMI_CHECKS, ids=lambda m: m.CHECK.id)
def test_a_missing_nvidia_smi_skips_without_a_profile_and_is_an_error_where_gpus_are_expected(
    module: Any,
) -> None:
    check = module.CHECK
    skipped, _ = evaluate_check(check, _all_missing(check, NO_PROFILE), NO_PROFILE, None)
    assert (skipped.status, skipped.message) == (
        "SKIP",
        f"nvidia-smi is not installed on cpu1; {NO_PROFILE_NO_GPU}",
    )
    expected = profile("h100-8x-ndr400")
    failed, _ = evaluate_check(check, _all_missing(check, expected), expected, None)
    assert failed.status == "ERROR" and "nvidia-smi is missing on node1" in failed.message


def _no_nccl(presence_case: str) -> dict[str, Any]:
    """nccl.version's facts on a host with a CPU build of torch and no system NCCL, with the PCI bus and
    device nodes of a captured host (tests/facts/nvidia_presence)."""
    presence = json.loads((FACTS / "nvidia_presence" / f"{presence_case}.json").read_text())["output"]
    outputs = {
        "torch_probe": CommandOutput((CAPTURED / "nccl_version/torch_cpu_build_devbox.txt").read_text()),
        "nccl_libs": CommandOutput(""),
        "nvidia_presence": CommandOutput("\n".join(presence)),
    }
    return nccl_version.parse(outputs, NO_PROFILE)


def test_no_nccl_skips_without_a_profile_unless_the_host_has_an_nvidia_gpu() -> None:
    skipped = nccl_version.judge(_no_nccl("devbox_without_gpu"), NO_PROFILE)
    assert skipped.status == "SKIP" and f"{NO_PROFILE_NO_GPU}, collectives use gloo" in skipped.message
    assert nccl_version.judge(_no_nccl("no_bus_no_node"), NO_PROFILE).status == "SKIP"
    on_gpus = nccl_version.judge(_no_nccl("xe9680_h100_and_nvswitch"), NO_PROFILE)
    assert on_gpus.status == "FAIL", "its ranks would run NCCL"
    assert nccl_version.judge(_no_nccl("devbox_without_gpu"), profile("h100-8x-ndr400")).status == "FAIL"
