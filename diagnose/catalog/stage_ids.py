"""The check ids the stages emit themselves, in one table: benchmarks, transports, localization, the probes
after the sweep, trace judgements, history and a site's testinfra checks.

The catalog (``checks/``) lists the checks that run a command on a host; these ids come from the stages
that measure more than one host's command can say. They are contracts like the catalog's
(docs/contracts.md, "Check ids"): ``diagnose checks`` lists them, the report's checklist gives them their
lines, and the modules that emit or show them take their ids from here rather than spelling them again.
"""

from __future__ import annotations

from dataclasses import dataclass

NCCL_TRANSPORT = "nccl.transport"
HOST_TORCH = "host.torch"
BENCH_PREFIX = "bench."
BENCH_STRAGGLER = "bench.straggler"
BENCH_LINK = "bench.link"
BENCH_CLEANUP = "bench.cleanup"
BENCH_NCCL_TESTS = "bench.nccl_tests"
FLEET_BUSBW = "fleet.busbw"
FLEET_H2D = "fleet.h2d"
FLEET_NVLINK = "fleet.nvlink"
FLEET_MEMCPY = "fleet.memcpy"
GPU_GEMM = "gpu.gemm"
GPU_HBM = "gpu.hbm"
GPU_MEMTEST = "gpu.memtest"
GPU_SDC = "gpu.sdc"
GPU_BURNIN = "gpu.burnin"
TRAIN_OVERLAP = "train.overlap"
TRAIN_TAIL = "train.tail"
TRAIN_SYNC = "train.sync"
TRAIN_INPUT = "train.input"
TRAIN_DATAPARALLEL = "train.dataparallel"
TRAIN_COMMUNICATOR = "train.communicator"
INFER_KV_TRANSFER = "infer.kv_transfer"
INFER_PLACEMENT = "infer.placement"
INFER_STAGING = "infer.staging"
INFER_SERVING = "infer.serving"
IB_WRITE_BW = "ib.write_bw"
IB_LATENCY = "ib.latency"
HISTORY_PREFIX = "history."
HISTORY_REGRESSION = "history.regression"
HISTORY_UNSTABLE = "history.unstable"
HISTORY_WATCH = "history.watch"
CUSTOM_PREFIX = "custom."
QUARANTINE_CAP = "quarantine.cap"
#: How a host's GPU stress "ended" (results.json ``stress``, the stage record's status) when its Python
#: could not import torch: the program never started, so there is nothing of it to show.
STRESS_NO_TORCH = "no torch"

#: The training judgements (checklist section 4), in the checklist's order.
TRAINING = (TRAIN_OVERLAP, TRAIN_TAIL, TRAIN_SYNC, TRAIN_INPUT)
#: The anti-patterns of a user's own job (checklist section 4): judged from the traces ``diagnose trace``
#: reads, not from the training probe, whose program is ours.
TRAINING_PATTERNS = (TRAIN_DATAPARALLEL, TRAIN_COMMUNICATOR)
#: The GPU stress judgements (benchmarks.stress), in the order the program runs them.
STRESS = (GPU_GEMM, GPU_HBM, GPU_MEMTEST, GPU_SDC, GPU_BURNIN)
#: The KV-transfer judgements (checklist section 5); ``infer.serving`` comes from a serving benchmark.
KV_TRANSFER = (INFER_KV_TRANSFER, INFER_PLACEMENT, INFER_STAGING)


def bench_id(collective: object) -> str:
    """The id of a collective's benchmark verdict: ``bench.all_reduce``."""
    return f"{BENCH_PREFIX}{collective}"


@dataclass(frozen=True)
class StageId:
    """One id (or family of ids, ``bench.<collective>``) a stage emits."""

    id: str
    checklist: str  # the checklist section its results name ("3", "H", "–"; "–/3": either)
    needs: str  # what has to run for it to appear
    judges: str  # what it judges, as ``diagnose checks`` says it
    title: str = ""  # the report checklist's line, for an id that answers no numbered item of it
    # What the operator does first about a FAIL, a WARN (None: the same) and an ERROR (docs/actions.md).
    action: str = ""
    warn_action: str | None = None
    error_action: str = "check_config"


STAGE_IDS: tuple[StageId, ...] = (
    StageId(
        HOST_TORCH,
        "3",
        "benchmark stage, where a host's benchmark Python cannot import torch",
        "torch imports in the Python the benchmarks run (bench_python), on every host they need",
        action="check_config",
    ),
    StageId(
        NCCL_TRANSPORT,
        "3",
        "benchmark stage (NCCL INFO log)",
        "the transport NCCL chose between and inside nodes",
        action="check_config",
    ),
    StageId(
        bench_id("<collective>"),
        "3",
        "benchmark stage (torchrun)",
        "busbw over the size sweep vs the expected range",
        action="check_config",
    ),
    StageId(
        BENCH_STRAGGLER,
        "3",
        "benchmark stage (localization)",
        "the slow hosts or links behind a result below range, with deficit and confidence",
        action="reseat_or_replace_cable",
        warn_action="check_config",
    ),
    StageId(
        BENCH_LINK,
        "3",
        "benchmark stage (localization)",
        "a slow link between two hosts that are fast with other partners",
        "No slow link between hosts",
        action="reseat_or_replace_cable",
    ),
    StageId(
        BENCH_CLEANUP,
        "3",
        "benchmark stage",
        "no benchmark process left behind on any host",
        action="reboot",
        warn_action="none",
        error_action="reboot",
    ),
    StageId(
        FLEET_BUSBW,
        "3",
        "benchmarks.fleet_probes",
        "single-node busbw against the fleet's median (MAD)",
        "Single-node busbw in line with the fleet",
        action="reset_gpu",
    ),
    StageId(
        FLEET_H2D,
        "H",
        "benchmarks.fleet_probes",
        "host↔GPU copy bandwidth against the fleet",
        "Host↔GPU copy bandwidth in line with the fleet",
        action="check_config",
    ),
    StageId(
        FLEET_NVLINK,
        "H",
        "benchmarks.fleet_probes",
        "GPU peer copy bandwidth against the fleet",
        "GPU peer copy bandwidth in line with the fleet",
        action="reset_gpu",
    ),
    StageId(
        FLEET_MEMCPY,
        "H",
        "benchmarks.fleet_probes",
        "host memory copy bandwidth against the fleet",
        "Host memory copy bandwidth in line with the fleet",
        action="check_config",
    ),
    StageId(
        GPU_GEMM,
        "H",
        "benchmarks.stress",
        "dense GEMM TFLOP/s per GPU (bf16, tf32, fp8) vs a fraction of the model's peak and the fleet",
        "GPU GEMM throughput at its model's level",
        action="reset_gpu",
    ),
    StageId(
        GPU_HBM,
        "H",
        "benchmarks.stress",
        "HBM copy and triad GB/s per GPU vs a fraction of the model's bandwidth and the fleet",
        "GPU memory bandwidth at its model's level",
        action="reset_gpu",
    ),
    StageId(
        GPU_MEMTEST,
        "H",
        "benchmarks.stress",
        "pattern write/read-back over most of the free GPU memory: no mismatching word",
        "GPU memory reads back what was written",
        action="rma_gpu",
        warn_action="reset_gpu",
    ),
    StageId(
        GPU_SDC,
        "H",
        "benchmarks.stress",
        "the same seeded GEMM gives the same bits on every GPU, repeat and host",
        "No silent data corruption (same bits on every GPU)",
        action="rma_gpu",
        warn_action="reset_gpu",
    ),
    StageId(
        GPU_BURNIN,
        "H",
        "benchmarks.stress, burnin_minutes",
        "sustained load: clocks, temperature, power, clock-event reasons, ECC per GPU",
        "GPUs hold their clocks under sustained load",
        action="contact_support",
    ),
    StageId(
        IB_WRITE_BW,
        "1",
        "benchmarks.perftest (ib_write_bw per NIC pair)",
        "every NIC's RDMA write bandwidth against its line rate and its rail; slow NIC or link named",
        "Every NIC writes at line rate (ib_write_bw per rail)",
        action="reseat_or_replace_cable",
    ),
    StageId(
        IB_LATENCY,
        "3",
        "benchmarks.perftest_latency (ib_write_lat per NIC pair)",
        "every rail's RDMA write latency p99 against max_ib_latency_p99_us",
        "RDMA write latency p99 within bounds on every rail",
        action="reseat_or_replace_cable",
    ),
    StageId(
        TRAIN_OVERLAP,
        "4",
        "training probe or diagnose trace",
        "exposed communication, slow fabric told apart",
        action="check_user_app",
    ),
    StageId(
        TRAIN_TAIL,
        "4",
        "training probe or diagnose trace",
        "last all-reduce after the backward pass",
        action="check_user_app",
    ),
    StageId(
        TRAIN_SYNC,
        "4",
        "training probe or diagnose trace",
        "host syncs (.item(), synchronize) per step",
        action="check_user_app",
    ),
    StageId(
        TRAIN_INPUT,
        "4",
        "training probe or diagnose trace",
        "DataLoader / input stalls per step",
        action="check_user_app",
    ),
    StageId(
        TRAIN_DATAPARALLEL,
        "4",
        "diagnose trace",
        "single-process nn.DataParallel (scatter/replicate/gather via GPU 0 each step) instead of DDP",
        action="check_user_app",
    ),
    StageId(
        TRAIN_COMMUNICATOR,
        "4",
        "diagnose trace",
        "process groups / NCCL communicators created inside the training loop instead of once",
        action="check_user_app",
    ),
    StageId(
        INFER_KV_TRANSFER,
        "5",
        "benchmarks.kv_transfer (torchrun per pair)",
        "KV-block p50 vs the pair's link, p99/p50, per-block cost",
        action="check_config",
    ),
    StageId(
        INFER_PLACEMENT,
        "5",
        "kv_prefill_gpus / kv_decode_gpus",
        "prefill→decode pairs on the fastest path (NV#, same rail)",
        action="check_config",
    ),
    StageId(
        INFER_STAGING,
        "5",
        "benchmarks.kv_transfer (NCCL log)",
        "KV path through host memory named, with its cost",
        action="check_config",
    ),
    StageId(
        INFER_SERVING,
        "5",
        "diagnose trace --serving FILE",
        "vllm bench serve p99 TTFT/TPOT vs serving_* SLOs",
        "Serving latency (TTFT, TPOT) within the SLOs",
        action="check_user_app",
    ),
    StageId(
        BENCH_NCCL_TESTS,
        "3",
        "nccl_tests_dir, mpirun",
        "nccl-tests binaries and launcher present where needed",
        action="check_config",
    ),
    StageId(
        HISTORY_REGRESSION,
        "–/3",
        "--history database",
        "PASS→FAIL, busbw drop, version change, host gone",
        "No regression against the last good run",
        action="check_config",
    ),
    StageId(
        HISTORY_UNSTABLE,
        "–",
        "--history database",
        "a check flipping PASS↔FAIL over the last runs",
        "No check flipping PASS↔FAIL between runs",
        action="check_config",
    ),
    StageId(
        HISTORY_WATCH,
        "–",
        "--history database",
        "a component getting worse night after night (ECC, row remaps, port errors, BER, optics, GEMM, clocks)",
        "No component degrading night after night",
        action="drain_at_next_window",
    ),
    StageId(
        QUARANTINE_CAP,
        "H",
        "--k8s-cordon, node-check --drain / --k8s",
        "failing nodes within max_quarantine / max_quarantine_pct; beyond it reported, not taken out",
        "Failing nodes within the quarantine cap (no shared cause)",
        action="check_config",
    ),
    StageId(
        f"{CUSTOM_PREFIX}<module>::<test>",
        "–",
        "testinfra (playbook custom_checks)",
        "a site's own testinfra assertion",
        action="check_config",
    ),
)


def stage_titles() -> dict[str, str]:
    """The report checklist's line for each stage id that has one of its own."""
    return {stage.id: stage.title for stage in STAGE_IDS if stage.title}
