"""The rules of gpu.processes and gpu.dcgm on facts: the healthy outputs first, then each finding.

Outputs are tests/fixtures/captured/compute_apps (captured on the lent H100: idle, and with a second python3
running a matmul loop) and tests/fixtures/captured/dcgm_diag (DCGM 4 documents composed from DCGM's writer
and public reports, see SOURCE). Expected values come from the shipped profiles, overridden as the
playbooks set them; the evaluation path goes through evaluate_check.
"""

from __future__ import annotations

from typing import Any

import pytest

from diagnose.catalog.loading import load_catalog
from diagnose.checks import gpu_dcgm, gpu_processes
from diagnose.cli import main
from diagnose.config.profile_files import load_profile
from diagnose.core.model import CommandOutput
from diagnose.core.vars import Vars
from diagnose.engine.evaluate import evaluate_check
from diagnose.engine.stages import commands_of
from tests.support.paths import CAPTURED

IDLE = "compute_apps/h100x1_580_idle.txt"
HOG = "compute_apps/h100x1_580_matmul_hog.txt"
H100_QUERY = "gpu_query/h100x1_580_with_vbios.txt"
PASS_L3 = "dcgm_diag/h100x8_level3_pass.txt"
FAIL_GPU3 = "dcgm_diag/h100x8_level3_diagnostic_fail_gpu3.txt"
PERSISTENCE = "dcgm_diag/h100x8_level3_software_persistence_gpu0.txt"
INTERNAL = "dcgm_diag/b200x8_level2_pcie_internal_error.txt"
IN_USE = "dcgm_diag/runtime_error_in_use.txt"
HUNG = "dcgm_diag/hung_level3.txt"
MISSING = "dcgm_diag/missing.txt"


def lent_h100(**overrides: Any) -> Vars:
    """The lent H100 as an inventory would describe it: single-node-nvlink with its one GPU."""
    name = "single-node-nvlink"
    return Vars(
        {**load_profile(name).vars, "diagnose_profile": name, "expected_gpu_count": 1, **overrides},
        host="h100",
    )


def h100_node(**overrides: Any) -> Vars:
    name = "h100-8x-ndr400"
    return Vars({**load_profile(name).vars, "diagnose_profile": name, **overrides}, host="node1")


def out(fixture: str, rc: int = 0) -> CommandOutput:
    return CommandOutput(stdout=(CAPTURED / fixture).read_text(), exit_code=rc)


def processes(fixture: str, vars_: Vars) -> Any:
    outputs = {"compute_apps": out(fixture), "gpu_query": out(H100_QUERY)}
    return gpu_processes.judge(gpu_processes.parse(outputs, vars_), vars_)


def dcgm(fixture: str, vars_: Vars) -> Any:
    outputs = {"dcgm_diag": out(fixture)}
    return gpu_dcgm.judge(gpu_dcgm.parse(outputs, vars_), vars_)


# -- gpu.processes -----------------------------------------------------------------------------------------


def test_idle_gpu_passes() -> None:
    outcome = processes(IDLE, lent_h100())
    assert outcome.status == "PASS"
    assert outcome.message == "no compute process on the 1 GPU of h100"
    assert outcome.observed == []


def test_a_second_process_fails_a_sign_off_naming_gpu_pid_name_and_memory() -> None:
    outcome = processes(HOG, lent_h100(foreign_processes_status="FAIL"))
    assert outcome.status == "FAIL"
    assert outcome.message == (
        "h100: 1 compute process diagnose did not start, on 1 of its 1 GPU (GPU 0 (00000000:00:06.0): "
        "pid 461 python3, 1002 MiB); measurements on this host are not a sign-off"
    )
    assert outcome.observed == [
        {
            "gpu_uuid": "GPU-1df59fe6-481e-cca4-b58c-cd0bdfaa8606",
            "bus_id": "00000000:00:06.0",
            "pid": 461,
            "process_name": "python3",
            "used_mib": 1002,
            "gpu": "0",
        }
    ]
    assert "ps -o user,etime,args -p <pid>" in (outcome.remediation or "")


def test_a_process_on_a_gpu_outside_cuda_visible_devices_is_listed_not_judged() -> None:
    """The same process seen from a host whose login keeps the GPU out of its scope (the other half of a
    machine split into two hosts, another job's GPUs): nothing this host measures runs there."""
    vars_ = lent_h100()
    outputs = {
        "compute_apps": out(HOG),
        "gpu_query": out(H100_QUERY),
        "gpu_visibility": CommandOutput(stdout="CUDA_VISIBLE_DEVICES=\n", exit_code=0),
    }
    outcome = gpu_processes.judge(gpu_processes.parse(outputs, vars_), vars_)
    assert outcome.status == "PASS"
    assert outcome.message == (
        "no compute process on any GPU of h100 in scope (CUDA_VISIBLE_DEVICES=); not judged, on GPUs "
        "outside CUDA_VISIBLE_DEVICES=: GPU 0 (00000000:00:06.0): pid 461 python3, 1002 MiB"
    )
    outputs["gpu_visibility"] = CommandOutput(stdout="CUDA_VISIBLE_DEVICES=0\n", exit_code=0)
    assert gpu_processes.judge(gpu_processes.parse(outputs, vars_), vars_).status == "FAIL"


def test_a_busy_gpu_with_no_process_in_sight_is_held_by_a_process_in_another_namespace() -> None:
    """The lent 4x H200 split into two hosts: a matmul loop started outside both, on GPU 2. Inside node2 (its
    own pid namespace, CUDA_VISIBLE_DEVICES=2,3) nvidia-smi listed no process, yet GPU 2 was 100 % busy at
    the host stage: the cause of node2's halved GEMM and HBM figures. node1 (0,1) is not accused."""
    name = "single-node-nvlink"
    outputs = {
        "compute_apps": out("compute_apps/h200x4_pidns_foreign_hidden.txt"),
        "gpu_query": out("gpu_query/h200x4_580_gpu2_busy_foreign.txt"),
    }
    node2 = Vars({**load_profile(name).vars, "diagnose_profile": name}, host="node2")
    outputs["gpu_visibility"] = CommandOutput(stdout="CUDA_VISIBLE_DEVICES=2,3\n", exit_code=0)
    outcome = gpu_processes.judge(gpu_processes.parse(outputs, node2), node2)
    assert outcome.status == "FAIL"
    assert outcome.message.startswith(
        "node2: GPU 2 (00000000:00:08.0) 100 % busy before diagnose started anything, by no process this "
        "host can see (nvidia-smi lists only its own pid namespace"
    )
    assert outcome.observed == [
        {
            "bus_id": "00000000:00:08.0",
            "gpu": "2",
            "utilization_pct": 100,
            "held_mib": None,
            "memory_total_mib": None,
        }
    ]
    node1 = Vars({**load_profile(name).vars, "diagnose_profile": name}, host="node1")
    outputs["gpu_visibility"] = CommandOutput(stdout="CUDA_VISIBLE_DEVICES=0,1\n", exit_code=0)
    assert gpu_processes.judge(gpu_processes.parse(outputs, node1), node1).status == "PASS"


def test_fail_is_the_default_and_warn_is_the_nightly_choice() -> None:
    assert processes(HOG, lent_h100()).status == "FAIL"
    warned = processes(HOG, lent_h100(foreign_processes_status="warn"))
    assert warned.status == "WARN"
    assert warned.message.endswith("measurements on this host are marked shared_gpu")


def test_an_unknown_status_is_an_error_not_a_guess() -> None:
    outcome = processes(HOG, lent_h100(foreign_processes_status="SKIP"))
    assert outcome.status == "ERROR"
    assert "foreign_processes_status must be FAIL or WARN, got 'SKIP'" in outcome.message


def test_without_the_gpu_query_the_gpu_is_named_by_bus_id() -> None:
    vars_ = lent_h100()
    outputs = {"compute_apps": out(HOG), "gpu_query": CommandOutput(error="the batch ended")}
    facts = gpu_processes.parse(outputs, vars_)
    outcome = gpu_processes.judge(facts, vars_)
    assert facts["processes"][0]["gpu"] is None
    assert "on 1 GPU (GPU 00000000:00:06.0: pid 461 python3, 1002 MiB)" in outcome.message


def test_processes_on_a_host_without_gpus_skip() -> None:
    outcome = processes(IDLE, lent_h100(expected_gpu_count=0))
    assert outcome.status == "SKIP"


def test_missing_nvidia_smi_is_an_error_unless_the_profile_has_no_gpu() -> None:
    missing = CommandOutput(stdout="", stderr="sh: 1: nvidia-smi: not found", exit_code=127)
    outputs = {"compute_apps": missing, "gpu_query": missing}
    result, _ = evaluate_check(gpu_processes.CHECK, outputs, lent_h100(), None)
    assert result.status == "ERROR" and result.message.startswith("nvidia-smi is missing on h100")
    result, _ = evaluate_check(gpu_processes.CHECK, outputs, lent_h100(expected_gpu_count=0), None)
    assert result.status == "SKIP"


# -- gpu.dcgm -----------------------------------------------------------------------------------------------


def test_level_3_pass() -> None:
    outcome = dcgm(PASS_L3, h100_node(dcgm_diag_level=3))
    assert outcome.status == "PASS"
    assert outcome.message == "dcgmi diag -r 3 on node1 (DCGM 4.2.3, 4 tests on 8 GPUs): every test passed"
    assert outcome.observed["tests"]["diagnostic"] == {str(i): "Pass" for i in range(8)}


def test_a_failing_test_names_the_gpu_and_dcgms_error() -> None:
    outcome = dcgm(FAIL_GPU3, h100_node(dcgm_diag_level=3))
    assert outcome.status == "FAIL"
    assert outcome.message.endswith(
        "diagnostic Fail on GPU 3 (error 52: Found 12 faulty memory elements on GPU 3 Run a field "
        "diagnostic on the GPU.)"
    )
    assert outcome.observed["tests"]["diagnostic"]["3"] == "Fail"
    assert outcome.observed["rc"] == 226


def test_a_config_only_failure_warns() -> None:
    outcome = dcgm(PERSISTENCE, h100_node(dcgm_diag_level=3))
    assert outcome.status == "WARN"
    assert "software Fail on GPU 0 (error 29: Persistence Mode: Persistence mode for GPU 0 is disabled." in (
        outcome.message
    )
    assert outcome.message.endswith("[a setting: DCGM severity CONFIG]")


def test_a_test_failing_on_no_gpu_fails_with_its_warning() -> None:
    """NVIDIA/DCGM#253: pcie Fail with every GPU Pass, the internal error tied to no GPU."""
    outcome = dcgm(INTERNAL, h100_node(dcgm_diag_level=2))
    assert outcome.status == "FAIL"
    assert "dcgmi diag -r 2 on node1 (DCGM 4.4.1, 3 tests on 8 GPUs): pcie Fail (error 44: There was an " in (
        outcome.message
    )


def test_a_hung_dcgmi_is_named_with_level_and_seconds() -> None:
    outcome = dcgm(HUNG, h100_node(dcgm_diag_level=3))
    assert outcome.status == "ERROR"
    assert outcome.message.startswith("dcgmi hung at level 3 on node1: stopped after 1800 s")


def test_dcgm_that_cannot_start_is_an_error_with_its_words() -> None:
    outcome = dcgm(IN_USE, h100_node(dcgm_diag_level=3))
    assert outcome.status == "ERROR"
    assert outcome.message == (
        "dcgmi diag -r 3 could not run on node1: The requested operation could not be completed because the "
        "affected resource is in use"
    )


def test_no_dcgm_is_a_skip_naming_the_package() -> None:
    outcome = dcgm(MISSING, h100_node(dcgm_diag_level=1))
    assert outcome.status == "SKIP"
    assert outcome.message == (
        "dcgmi not installed on node1 (package datacenter-gpu-manager): DCGM diagnostics not run"
    )


def test_level_zero_is_off_and_runs_nothing() -> None:
    vars_ = h100_node()
    assert gpu_dcgm.commands_for(vars_) == ()
    result, _ = evaluate_check(gpu_dcgm.CHECK, {}, vars_, None)
    assert (result.status, result.message) == ("SKIP", "DCGM diagnostics off on node1 (dcgm_diag_level 0)")


def test_an_unknown_level_is_an_error() -> None:
    vars_ = h100_node(dcgm_diag_level=7)
    assert gpu_dcgm.commands_for(vars_) == ()
    result, _ = evaluate_check(gpu_dcgm.CHECK, {}, vars_, None)
    assert result.status == "ERROR" and "dcgm_diag_level must be 0 (off) or 1-4, got 7" in result.message


@pytest.mark.parametrize(("level", "budget"), [(1, 180), (2, 600), (3, 1800), (4, 7200)])
def test_the_budget_follows_the_level(level: int, budget: int) -> None:
    (command,) = gpu_dcgm.commands_for(h100_node(dcgm_diag_level=level))
    assert f"timeout -k 5 {budget} dcgmi diag -r {level} -j" in command.script
    assert command.timeout == budget + gpu_dcgm.COMMAND_SLACK_S
    assert command.last and command.tool == "dcgmi"


def test_the_budget_can_be_set_and_is_capped_by_command_timeout() -> None:
    (own,) = gpu_dcgm.commands_for(h100_node(dcgm_diag_level=3, dcgm_diag_timeout_s=2400))
    assert "timeout -k 5 2400 dcgmi" in own.script
    # node-check caps every command at 10 s: dcgmi's own timeout ends first, so the check can name it.
    (capped,) = gpu_dcgm.commands_for(h100_node(dcgm_diag_level=1, command_timeout_s=10))
    assert "timeout -k 5 3 dcgmi" in capped.script


def test_dcgm_runs_after_every_other_command_of_the_batch() -> None:
    """The passive readings and the process census see idle GPUs, not DCGM's load."""
    checks = [c for c in load_catalog() if hasattr(c, "host_commands")]
    keys = [c.key for c in commands_of(checks, h100_node(dcgm_diag_level=3))]
    assert keys[-1] == "dcgm_diag"
    assert keys.index("compute_apps") < keys.index("dcgm_diag")


def test_diagnose_checks_lists_both(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["checks"]) == 0
    # One block a check: its id's line, then what it judges indented beneath it.
    listed: dict[str, str] = {}
    for line in capsys.readouterr().out.splitlines():
        if line.strip() and not line[0].isspace():
            current = line.split()[0]
            listed[current] = line
        elif line.strip():
            listed[current] += " " + line.strip()
    assert "nvidia-smi" in listed["gpu.processes"] and "foreign_processes_status" in listed["gpu.processes"]
    assert "dcgmi" in listed["gpu.dcgm"] and "dcgm_diag_level" in listed["gpu.dcgm"]
