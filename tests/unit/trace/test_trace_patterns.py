"""Who owns a host sync, and the two anti-patterns of a user's job, on the real traces of
tests/fixtures/traces/patterns/ (one H100, and this machine's CPU; README.md there says how each was made)
and on hand-built stacks for the owners those traces do not hold."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from diagnose.core.model import CheckResult
from diagnose.core.vars import Vars
from diagnose.trace.analyze import RankAnalysis, analyze_trace
from diagnose.trace.judge import judge_patterns, judge_training
from tests.support.paths import FIXTURES
from tests.support.traces import event, step_events, write_trace

PATTERNS = FIXTURES / "traces" / "patterns"
DDP_SAMPLING = "DDP runtime statistics: cudaEventSynchronize in DistributedDataParallel.forward"
GRAD_SCALER = "AMP GradScaler: found-inf check (.item())"
ITEM = ".item() (aten::item)"
SYNCHRONIZE = "torch.cuda.synchronize() (cudaDeviceSynchronize)"


@functools.cache
def analysis(name: str) -> RankAnalysis:
    return analyze_trace(PATTERNS / f"{name}_rank0.json.gz", fallback_rank=0)


def verdicts(name: str) -> dict[str, CheckResult]:
    analyses = [analysis(name)]
    checks = judge_training(analyses, Vars({}), None, "user trace") + judge_patterns(analyses, "user trace")
    return {check.id: check for check in checks}


def test_early_profiled_ddp_on_one_gpu_is_not_a_sync_warning() -> None:
    """DDP waits for its timing events in each of the first steps: 8 syncs per step, DDP's, shown only."""
    found = analysis("ddp_early_gpu")
    assert [s.step for s in found.steps] == [2, 3, 4] and found.device == "cuda"
    assert [s.syncs_per_step for s in found.steps] == [0, 0, 0]
    assert [s.framework_syncs for s in found.steps] == [{DDP_SAMPLING: 8}] * 3
    sync = verdicts("ddp_early_gpu")["train.sync"]
    assert sync.status == "PASS" and sync.remediation is None
    assert "0 host syncs per step in the user's code" in sync.message
    assert (
        f"not the user's to remove (information, not judged): 8 per step over 2 steps: {DDP_SAMPLING} ×16"
        in (sync.message)
    )
    assert "DDP times its iterations 1–10 and every 100th" in sync.message
    assert sync.observed["0"]["framework_syncs_per_step"] == 8
    assert sync.observed["0"]["framework_sync_causes"] == {DDP_SAMPLING: 16}


def test_a_per_step_item_and_synchronize_are_named_exactly() -> None:
    found = analysis("ddp_early_sync_gpu")
    assert [s.sync_causes for s in found.steps] == [{ITEM: 1, SYNCHRONIZE: 1}] * 3
    assert [s.framework_syncs for s in found.steps] == [{DDP_SAMPLING: 8}] * 3
    sync = verdicts("ddp_early_sync_gpu")["train.sync"]
    assert sync.status == "WARN" and "torch.cuda.synchronize()" in (sync.remediation or "")
    assert sync.observed["0"]["sync_causes"] == {ITEM: 2, SYNCHRONIZE: 2}
    assert f"2 host syncs per step in the user's code over 2 steps: {ITEM} ×2, {SYNCHRONIZE} ×2;" in (
        sync.message
    )


@pytest.mark.parametrize("name", ["ddp_amp_gpu", "ddp_amp_stack_gpu"])
def test_grad_scalers_found_inf_check_is_amps(name: str) -> None:
    """Without Python frames by the order of its ops, with them by grad_scaler.py's frames."""
    found = analysis(name)
    assert [s.framework_syncs for s in found.steps] == [{DDP_SAMPLING: 8, GRAD_SCALER: 1}] * 3
    assert [s.syncs_per_step for s in found.steps] == [0, 0, 0]
    sync = verdicts(name)["train.sync"]
    assert sync.status == "PASS" and "fused=True" in sync.message


def test_dataparallel_on_one_gpu() -> None:
    found = analysis("dataparallel_gpu")
    assert [(s.dataparallel_calls, s.dataparallel_copies) for s in found.steps] == [(1, 1)] * 3
    checks = verdicts("dataparallel_gpu")
    dataparallel = checks["train.dataparallel"]
    assert dataparallel.status == "WARN" and "torchrun" in (dataparallel.remediation or "")
    assert "DataParallel.forward ×3 in 3 of 3 profiled steps, 3 of its copies" in dataparallel.message
    assert checks["train.communicator"].status == "SKIP"
    assert "no collective and no process group" in checks["train.communicator"].message
    assert checks["train.sync"].status == "PASS"


def test_dataparallel_without_a_gpu_is_named_as_a_pass_through() -> None:
    dataparallel = verdicts("dataparallel_cpu")["train.dataparallel"]
    assert dataparallel.status == "WARN" and "no GPU to spread over in this trace" in dataparallel.message


@pytest.mark.parametrize("name", ["communicator_gpu", "communicator_stack_gpu", "communicator_cpu"])
def test_a_communicator_made_every_step_fails(name: str) -> None:
    found = analysis(name)
    expected = [None, 1, 1] if name.endswith("_cpu") else [1, 1, 1]  # gloo: new threads, from step 2 on
    assert [s.new_communicators for s in found.steps] == expected
    communicator = verdicts(name)["train.communicator"]
    assert communicator.status == "FAIL" and "before the training loop" in (communicator.remediation or "")
    assert "process groups created inside the training loop" in communicator.message


def test_a_communicators_setup_syncs_are_shown_not_judged() -> None:
    """NCCL's init of each new group: 65 cudaStreamSynchronize per step, judged by train.communicator."""
    found = analysis("communicator_gpu")
    assert [s.framework_syncs for s in found.steps] == [
        {DDP_SAMPLING: 8, "communicator setup: cudaStreamSynchronize in record_param_comms (init)": 65}
    ] * 3
    sync = verdicts("communicator_gpu")["train.sync"]
    assert sync.status == "PASS" and "train.communicator judges groups made inside the loop" in sync.message


@pytest.mark.parametrize("name", ["ddp_early_gpu", "ddp_early_sync_gpu", "ddp_amp_gpu", "ddp_early_cpu"])
def test_healthy_groups_pass_both_patterns(name: str) -> None:
    checks = verdicts(name)
    assert checks["train.dataparallel"].status == "PASS"
    assert checks["train.communicator"].status == "PASS"
    assert [s.new_communicators for s in analysis(name).steps] == [None, 0, 0]


def test_the_probes_two_rank_traces_make_no_communicator() -> None:
    """The older fixtures (2 × H200 DDP, 2-rank gloo DDP): groups used from their first step on."""
    for path in [
        FIXTURES / "traces" / "gpu" / "healthy_rank0.json.gz",
        FIXTURES / "traces" / "cpu" / "healthy_rank1.json.gz",
    ]:
        checks = judge_patterns([analyze_trace(path)], "user trace")
        assert [c.status for c in checks] == ["PASS", "PASS"], path


def _sync_in(stack: list[dict], tid: int = 1) -> list[dict]:
    """One step holding ``stack`` (outermost first, nested by their times) and a sync at 500 inside it."""
    return [
        event("user_annotation", "ProfilerStep#7", 0, 1000, tid),
        *stack,
        event("cuda_runtime", "cudaStreamSynchronize", 500, 5, tid, correlation=1),
        event("kernel", "gemm", 100, 50, 7, correlation=2),
        event("cuda_runtime", "cudaLaunchKernel", 90, 5, tid, correlation=2),
    ]


def _owners(tmp_path: Path, stack: list[dict]) -> tuple[dict, dict]:
    step = analyze_trace(write_trace(tmp_path / "t.json", _sync_in(stack))).steps[0]
    return step.sync_causes, step.framework_syncs


def test_a_users_item_inside_ddps_forward_is_the_users(tmp_path: Path) -> None:
    stack = [
        event("user_annotation", "DistributedDataParallel.forward", 100, 800, 1),
        event("cpu_op", "aten::item", 450, 100, 1),
        event("cpu_op", "aten::_local_scalar_dense", 460, 80, 1),
    ]
    assert _owners(tmp_path, stack) == ({ITEM: 1}, {})


def test_a_sync_in_an_op_under_ddps_forward_is_the_users(tmp_path: Path) -> None:
    """Only a sync with nothing between it and DDP's range is DDP's sampling."""
    stack = [
        event("user_annotation", "DistributedDataParallel.forward", 100, 800, 1),
        event("cpu_op", "aten::nonzero", 480, 40, 1),
    ]
    assert _owners(tmp_path, stack) == ({"cudaStreamSynchronize in DistributedDataParallel.forward": 1}, {})


def test_a_sync_inside_the_optimizers_step_is_the_optimizers(tmp_path: Path) -> None:
    stack = [event("user_annotation", "Optimizer.step#LBFGS.step", 300, 400, 1)]
    assert _owners(tmp_path, stack) == (
        {},
        {"optimizer: cudaStreamSynchronize in Optimizer.step#LBFGS.step": 1},
    )


def test_a_logged_gradient_norm_between_unscale_and_step_is_the_users(tmp_path: Path) -> None:
    """scaler.unscale_(opt); clip_grad_norm_(...).item(); scaler.step(opt): GradScaler's own .item() follows
    the user's, so only the one right before the optimizer's step is AMP's."""
    stack = [
        event("cpu_op", "aten::_amp_foreach_non_finite_check_and_unscale_", 200, 50, 1),
        event("cpu_op", "aten::item", 450, 100, 1),
        event("cpu_op", "aten::item", 600, 50, 1),
        event("cuda_runtime", "cudaStreamSynchronize", 620, 5, 1, correlation=3),
        event("user_annotation", "Optimizer.step#SGD.step", 700, 100, 1),
    ]
    assert _owners(tmp_path, stack) == ({ITEM: 1}, {GRAD_SCALER: 1})


def test_an_overflowing_step_skips_the_optimizer_and_is_still_amps(tmp_path: Path) -> None:
    """found_inf set: GradScaler skips optimizer.step() and goes on to update()."""
    stack = [
        event("cpu_op", "aten::_amp_foreach_non_finite_check_and_unscale_", 200, 50, 1),
        event("cpu_op", "aten::item", 450, 100, 1),
        event("cpu_op", "aten::_amp_update_scale_", 700, 20, 1),
    ]
    assert _owners(tmp_path, stack) == ({}, {GRAD_SCALER: 1})


def test_grad_scalers_python_frames_name_it_without_its_ops(tmp_path: Path) -> None:
    """A with_stack trace: GradScaler's frames around the sync are enough."""
    stack = [
        event("python_function", "torch/amp/grad_scaler.py(375): step", 300, 500, 1),
        event("python_function", "torch/amp/grad_scaler.py(363): _maybe_opt_step", 400, 300, 1),
        event("cpu_op", "aten::item", 450, 100, 1),
    ]
    assert _owners(tmp_path, stack) == ({}, {GRAD_SCALER: 1})


def test_hand_built_steps_keep_their_causes(tmp_path: Path) -> None:
    """The hand-built trace of test_trace_analyze: both syncs are the user's, none a framework's."""
    analysis_ = analyze_trace(
        write_trace(tmp_path / "t.json", step_events(0, 1, "item") + step_events(1000, 2, "d"))
    )
    assert [s.framework_syncs for s in analysis_.steps] == [{}, {}]
    assert analysis_.summary["framework_syncs_per_step"] == 0


def _comm_steps(tmp_path: Path, inits: list[int]) -> CheckResult:
    """Three steps of default-group all-reduces, with a communicator init in the steps named."""
    events = []
    for number in range(3):
        o = number * 1000
        events += [
            event("user_annotation", f"ProfilerStep#{number}", o, 1000, 1),
            event("cpu_op", "record_param_comms", o + 100, 10, 1, **{"Process Group Name": "0"}),
        ]
        if number in inits:
            events.append(
                event("cpu_op", "record_param_comms", o + 200, 10, 1, **{"Collective name": "init"})
            )
    checks = judge_patterns([analyze_trace(write_trace(tmp_path / "t.json", events))], "t")
    return next(c for c in checks if c.id == "train.communicator")


@pytest.mark.parametrize(
    ("inits", "status"),
    [([], "PASS"), ([0], "PASS"), ([2], "PASS"), ([1, 2], "WARN"), ([0, 1, 2], "FAIL")],
)
def test_one_communicator_is_a_groups_first_use_several_are_the_loops(
    tmp_path: Path, inits: list[int], status: str
) -> None:
    """The job's first collective (or an evaluation group) makes one; a loop that makes them, every step."""
    assert _comm_steps(tmp_path, inits).status == status
