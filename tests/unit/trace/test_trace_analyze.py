"""One rank's trace → per-step metrics: real CPU (gloo) and GPU (NCCL) traces, and a hand-built trace
whose every number is worked out (tests/support/traces.py)."""

from __future__ import annotations

import gzip
import json
from itertools import pairwise
from pathlib import Path

import pytest

from diagnose.trace.analyze import STEP_TIME_CPU, STEP_TIME_GPU, analyze_trace
from diagnose.trace.reader import TraceFormatError
from tests.support.paths import FIXTURES
from tests.support.traces import event, step_events, write_trace

TRACES = FIXTURES / "traces"
CPU = TRACES / "cpu"
PUBLIC = TRACES / "public"


def test_hand_built_gpu_trace(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "t.json", step_events(0, 1, "item") + step_events(1000, 2, "device"))
    analysis = analyze_trace(path)
    assert (analysis.rank, analysis.rank_source, analysis.device) == (3, "distributedInfo", "cuda")
    first, second = analysis.steps
    # comm 550–900 = 350 µs; compute covers it up to 700: 200 µs exposed; ratio 1 − 200/350.
    assert (first.step, first.step_ms, first.comm_ms, first.exposed_comm_ms) == (1, 1.0, 0.35, 0.2)
    assert first.compute_ms == 0.5  # 200–400, 450–700, 900–950
    assert first.overlap_ratio == pytest.approx(1 - 200 / 350, abs=1e-4)
    assert first.tail_ms == 0.2  # last backward kernel ends at 700, the all-reduce at 900
    assert first.syncs_per_step == 1 and first.sync_causes == {".item() (aten::item)": 1}
    assert second.sync_causes == {"torch.cuda.synchronize() (cudaDeviceSynchronize)": 1}
    # The GPU step runs from the first kernel (200) to the next step's first (1200): the next batch's fetch
    # (1000–1100) falls in it, while no kernel runs; after the last step the next fetch is not in the trace.
    assert (first.step_basis, first.step_cpu_ms, analysis.step_time) == ("gpu", 1.0, STEP_TIME_GPU)
    assert first.input_wait_ms == 0.1 and first.input_stall_ms == 0.1
    assert second.input_wait_ms is None and second.input_stall_ms is None
    assert first.backward_ms == 0.25  # the kernel launched inside the backward op, 450–700
    assert first.gpu_idle_before_ms is None and second.gpu_idle_before_ms == 0.25  # 950 → 1200
    assert analysis.summary["steps"] == 2 and analysis.summary["exposed_comm_ms"] == 0.2
    assert analysis.not_judged == [] and analysis.skipped == {}


def test_input_stall_counts_only_gpu_idle_time(tmp_path: Path) -> None:
    """A DataLoader fetch while the GPU still runs the previous step's kernels is no stall."""
    events = step_events(0, 1, "item") + step_events(1000, 2, "item") + step_events(2000, 3, "item")
    events.append(event("kernel", "long_tail_kernel", 990, 60, 7, correlation=99))  # runs 990–1050
    analysis = analyze_trace(write_trace(tmp_path / "t.json", events))
    assert analysis.steps[0].input_wait_ms == 0.1  # the fetch of step 2's batch, 1000–1100
    assert analysis.steps[0].input_stall_ms == 0.05


def test_steps_from_the_optimizer_without_profiler_steps(tmp_path: Path) -> None:
    events = step_events(0, 1, "item", steps=False) + step_events(1000, 2, "item", steps=False)
    analysis = analyze_trace(write_trace(tmp_path / "t.json", events, rank=None), fallback_rank=5)
    assert (analysis.rank, analysis.rank_source) == (5, "file order")
    assert analysis.step_source == "Optimizer.step annotations"
    assert any("no ProfilerStep#N" in note for note in analysis.notes)
    # The second window runs from the first optimizer step's end (630) to the second's (1630); the GPU
    # steps still run first kernel to first kernel (200 → 1200; the last: its kernels' span within 1000).
    assert [s.step_cpu_ms for s in analysis.steps] == [0.63, 1.0]
    assert [s.step_ms for s in analysis.steps] == [1.0, 1.0]


def test_tail_without_autograd_ops_uses_the_last_compute_before_the_last_collective(tmp_path: Path) -> None:
    events = step_events(0, 1, "item", backward=False)
    analysis = analyze_trace(write_trace(tmp_path / "t.json", events))
    assert analysis.steps[0].tail_ms == 0.2
    assert any("no autograd::engine ops" in note for note in analysis.notes)


def test_not_a_trace(tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_text('{"traceEvents": [{"ph": "M", "name": "process_name"}]}')
    with pytest.raises(TraceFormatError, match="no timed events"):
        analyze_trace(path)


# ------------------------------------------------------------------------------ real CPU traces (gloo)


def test_cpu_healthy_trace() -> None:
    analysis = analyze_trace(CPU / "healthy_rank1.json.gz")
    s = analysis.summary
    assert (analysis.rank, analysis.device, analysis.backend, analysis.world_size) == (1, "cpu", "gloo", 2)
    assert analysis.step_source == "ProfilerStep#N annotations"
    assert [step.step for step in analysis.steps] == [2, 3, 4] and s["steady_steps"] == 2
    # No kernels to time by: the step is the host's window.
    assert analysis.step_time == STEP_TIME_CPU and {step.step_basis for step in analysis.steps} == {"cpu"}
    assert s["step_ms"] == s["step_cpu_ms"] and s["backward_ms"] > 0
    assert all(step.comm_calls == 6 for step in analysis.steps)  # six gradient buckets a step
    assert s["overlap_ratio"] > 0.8
    assert s["tail_ms"] < 0.1 * s["step_ms"]
    assert s["input_wait_ms"] < 0.1 * s["step_ms"]
    assert s["syncs_per_step"] is None and "train.sync" in analysis.skipped
    assert any(line.startswith("host sync points per step") for line in analysis.not_judged)


def test_cpu_no_sync_misuse_overlaps_nothing() -> None:
    for rank in (0, 1):
        s = analyze_trace(CPU / f"no_overlap_rank{rank}.json.gz").summary
        assert s["overlap_ratio"] < 0.05
        assert s["exposed_comm_ms"] == pytest.approx(s["comm_ms"], rel=0.05)
        assert s["tail_ms"] >= s["exposed_comm_ms"]


def test_cpu_slow_dataloader() -> None:
    for rank in (0, 1):
        s = analyze_trace(CPU / f"slow_input_rank{rank}.json.gz").summary
        assert s["input_wait_ms"] > 0.4 * s["step_ms"]
        assert s["input_stall_ms"] is None  # no GPU to be idle


# ----------------------------------------------------------------------------- real GPU traces (NCCL)


def _events(path: Path) -> list[dict]:
    return json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]


def _sweep_exposed(comm: list[tuple[float, float]], compute: list[tuple[float, float]]) -> float:
    """Exposed time by a sweep over every boundary: an independent way to the same measure."""
    marks = sorted({t for span in comm + compute for t in span})
    exposed = 0.0
    for left, right in pairwise(marks):
        middle = (left + right) / 2
        if any(s <= middle < e for s, e in comm) and not any(s <= middle < e for s, e in compute):
            exposed += right - left
    return exposed


def test_gpu_ddp_trace_against_an_independent_sweep() -> None:
    path = PUBLIC / "hta_ddp_allreduce_rank0.json.gz"
    analysis = analyze_trace(path)
    assert (analysis.device, analysis.rank, analysis.world_size) == ("cuda", 0, 2)
    assert [s.step for s in analysis.steps] == [4, 5, 6]
    events = _events(path)
    steps = [e for e in events if e.get("name", "").startswith("ProfilerStep#")]
    low, high = min(e["ts"] for e in steps), max(e["ts"] + e["dur"] for e in steps)
    launches = {e["args"]["correlation"]: e["ts"] for e in events if e.get("cat") == "cuda_runtime"}
    kernels = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    comm = [
        (e["ts"], e["ts"] + e["dur"])
        for e in kernels
        if e["name"].startswith("ncclKernel") and low <= launches[e["args"]["correlation"]] < high
    ]
    compute = [(e["ts"], e["ts"] + e["dur"]) for e in kernels if not e["name"].startswith("ncclKernel")]
    exposed_ms = _sweep_exposed(comm, compute) / 1000
    assert sum(s.exposed_comm_ms for s in analysis.steps) == pytest.approx(exposed_ms, abs=1e-3)
    sizes = [
        int(e["args"]["In msg nelems"]) * 4
        for e in events
        if e.get("name") == "record_param_comms" and e["args"].get("Collective name") == "allreduce"
        and low <= e["ts"] < high
    ]  # fmt: skip
    assert sum(s.comm_bytes or 0 for s in analysis.steps) == sum(sizes)
    # DDP times its first iterations with CUDA events it waits for, inside its forward: DDP's, not the user's.
    assert analysis.summary["sync_causes"] == {} and analysis.summary["syncs_per_step"] == 0
    assert analysis.summary["framework_sync_causes"] == {
        "DDP runtime statistics: cudaEventSynchronize in DistributedDataParallel.forward": 16
    }
    assert any("no enumerate(DataLoader)" in line for line in analysis.not_judged)
    assert "train.input" in analysis.skipped


def test_gpu_trace_with_host_syncs_every_step() -> None:
    analysis = analyze_trace(PUBLIC / "hta_torchrec_rank0.json.gz")
    assert [s.syncs_per_step for s in analysis.steps] == [15] * 5
    assert analysis.summary["sync_causes"]["cudaStreamSynchronize in ## sparse_data_dist ##"] == 36
    assert analysis.summary["overlap_ratio"] < 0.1


def test_single_process_cpu_trace_says_what_it_cannot_judge(tmp_path: Path) -> None:
    events = [
        event("user_annotation", "ProfilerStep#0", 0, 1000, 1),
        event("cpu_op", "aten::mm", 10, 500, 1),
        event("cpu_op", "autograd::engine::evaluate_function: MmBackward0", 520, 400, 1),
    ]
    analysis = analyze_trace(write_trace(tmp_path / "t.json", events, rank=None))
    assert analysis.device == "cpu" and analysis.rank is None
    assert set(analysis.skipped) == {"train.overlap", "train.tail", "train.sync", "train.input"}
    assert "no gloo:* ranges nor c10d calls" in analysis.skipped["train.overlap"]
    assert analysis.steps[0].compute_ms == 0.9 and analysis.steps[0].comm_ms == 0.0
