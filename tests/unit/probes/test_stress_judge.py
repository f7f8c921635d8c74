"""gpu.gemm, gpu.hbm, gpu.memtest and gpu.sdc judged on what the stress program printed on the lent H100.

The healthy capture first (every figure above its floor), then the capture taken while a second process
hogged the GPU (below the floor: FAIL, and the foreign process named), then faults planted in copies of the
real GPU entry: a slow GPU among eight, mismatching words, a checksum that differs on one GPU or one host.
"""

from __future__ import annotations

from typing import Any

from diagnose.core.vars import Vars
from diagnose.probes.stress_figures import host_stress
from diagnose.probes.stress_judge import Settings, judge_memtest, judge_sdc, judge_throughput
from diagnose.probes.stress_skus import sku_of
from tests.support.stress import CPU_2RANKS, H100_ALL, H100_HOG, host_of, lines_of, scaled

DEFAULTS = Settings.of(Vars({}))


def settings(*hosts: Any, **values: Any) -> dict[str, Settings]:
    return {h.host: Settings.of(Vars(values)) for h in hosts}


def only(checks: list[Any], host: str | None) -> Any:
    (found,) = [c for c in checks if c.host == host]
    return found


def test_the_real_h100_clears_every_floor_and_says_by_how_much() -> None:
    host = host_of(H100_ALL)
    gemm = only(judge_throughput([host], settings(host), "gpu.gemm").checks, "gpu1")
    assert gemm.status == "PASS"
    assert "bf16 min 711.7 TFLOP/s / median 711.7 TFLOP/s (72 % of 989)" in gemm.message
    assert "fp8 min 1321.4 TFLOP/s" in gemm.message and "(67 % of 1979)" in gemm.message
    hbm = judge_throughput([host], settings(host), "gpu.hbm")
    assert only(hbm.checks, "gpu1").status == "PASS"
    copy = next(r for r in hbm.records if r["metric"] == "hbm.copy")
    assert copy["value"] == 3016.751 and copy["floor"] == 2680.0 and copy["fraction_of_peak"] == 0.9005
    assert copy["peak_source"] == "H100 SXM HBM bandwidth" and copy["verdict"] == "PASS"


def test_a_hogged_gpu_falls_below_its_floor_and_the_foreign_process_is_named() -> None:
    host = host_of(H100_HOG)
    host.foreign = ["GPU 0 (00000000:00:06.0): pid 655 python3, 1 GiB"]
    judgement = judge_throughput([host], settings(host), "gpu.gemm")
    check = only(judgement.checks, "gpu1")
    assert check.status == "FAIL"
    assert (
        "GPU 0 (00000000:00:06.0) bf16 311.4 TFLOP/s: 31 % of the H100 SXM dense peak 989.0 TFLOP/s"
        in check.message
    )
    assert "below the floor 692.3 TFLOP/s (0.7 of peak)" in check.message
    assert check.message.endswith(
        "measured while foreign compute processes ran (gpu.processes): GPU 0 "
        "(00000000:00:06.0): pid 655 python3, 1 GiB"
    )
    bf16 = next(r for r in judgement.records if r["metric"] == "gemm.bf16")
    assert bf16["verdict"] == "FAIL" and bf16["foreign_processes"] == host.foreign
    assert only(judge_throughput([host], settings(host), "gpu.hbm").checks, "gpu1").status == "FAIL"


def test_the_slow_gpu_among_eight_is_named_with_its_deficit_against_the_median() -> None:
    host = host_of(H100_ALL, gpus=8, fault=scaled(5, "hbm.copy", 0.93))
    judgement = judge_throughput([host], settings(host), "gpu.hbm")
    check = only(judgement.checks, "gpu1")
    assert check.status == "FAIL"
    assert check.message.startswith(
        "gpu1: GPU 5 (00000000:68:00.0) copy 2805.6 GB/s: above the floor; -7.0 % against the median 3016.8 GB/s "
        "of 8 NVIDIA H100 80GB HBM3 GPUs (odd: robust z"
    )
    record = next(r for r in judgement.records if r["gpu"] == 5 and r["metric"] == "hbm.copy")
    assert record["deviation_pct"] == -7.0 and record["robust_z"] < -3.5 and record["fleet_gpus"] == 8
    others = [r for r in judgement.records if r["gpu"] != 5 or r["metric"] != "hbm.copy"]
    assert {r["verdict"] for r in others} == {"PASS"}


def test_a_profile_override_of_the_peak_moves_the_floor() -> None:
    host = host_of(H100_ALL)
    check = only(
        judge_throughput([host], settings(host, gpu_peak_bf16_tflops=1100), "gpu.gemm").checks, "gpu1"
    )
    assert check.status == "FAIL" and "below the floor 770.0 TFLOP/s" in check.message
    assert "gpu_peak_bf16_tflops" in check.message


def test_memtest_passes_clean_memory_and_fails_mismatches_with_their_offsets() -> None:
    clean = host_of(H100_ALL)
    check = only(judge_memtest([clean], settings(clean)).checks, "gpu1")
    assert check.status == "PASS" and "79.46 GB (95 % of free), 3 passes" in check.message

    def bad_word(gpu: int, phase: str, entry: dict[str, Any]) -> None:
        if gpu == 2 and phase == "memtest":
            entry["mismatches"] = 3
            entry["first"] = [
                {
                    "offset": 0x1F40_0008,
                    "pattern": "walking_ones",
                    "expected": "0000000000000010",
                    "read": "0000000000000030",
                }
            ]

    faulty = host_of(H100_ALL, gpus=4, fault=bad_word)
    judgement = judge_memtest([faulty], settings(faulty))
    check = only(judgement.checks, "gpu1")
    assert check.status == "FAIL"
    assert "GPU 2 (00000000:38:00.0): 3 mismatching words in 79.46 GB" in check.message
    assert (
        "first at 0x1f400008 (walking_ones: wrote 0000000000000010, read 0000000000000030)" in check.message
    )


def test_an_ecc_error_in_the_memtest_fails_and_another_error_cannot_be_judged() -> None:
    def ecc(gpu: int, phase: str, entry: dict[str, Any]) -> None:
        if phase == "memtest":
            entry.clear()
            entry.update(
                {
                    "rank": gpu,
                    "gpu": gpu,
                    "error": "AcceleratorError: CUDA error: uncorrectable ECC error encountered",
                }
            )

    host = host_of(H100_ALL, fault=ecc)
    assert only(judge_memtest([host], settings(host)).checks, "gpu1").status == "FAIL"


def test_low_coverage_of_free_memory_warns() -> None:
    host = host_of(H100_ALL)
    check = only(judge_memtest([host], settings(host, memtest_min_fraction=0.97)).checks, "gpu1")
    assert check.status == "WARN" and "under 97% (memtest_min_fraction)" in check.message


def test_sdc_names_the_gpu_whose_bits_differ_and_the_host_that_differs_from_the_fleet() -> None:
    def flipped(gpu: int, phase: str, entry: dict[str, Any]) -> None:
        if gpu == 3 and phase == "sdc":
            entry["checksum"] = "0" * 32
            entry["repeats"] = ["0" * 32] * 3

    one = host_of(H100_ALL, gpus=8, fault=flipped)
    check = only(judge_sdc([one]).checks, "gpu1")
    assert (
        check.status == "FAIL"
        and "GPU 3 (00000000:48:00.0): checksum 0000000000000000… differs" in check.message
    )
    assert "other GPUs agree on fffed372f6c2b9ff…" in check.message

    def other_host(gpu: int, phase: str, entry: dict[str, Any]) -> None:
        if phase == "sdc":
            entry["checksum"] = "1" * 32
            entry["repeats"] = ["1" * 32] * 3

    fleet = [host_of(H100_ALL, f"gpu{i}", gpus=2) for i in (1, 2, 3)] + [
        host_of(H100_ALL, "gpu4", 2, other_host)
    ]
    judgement = judge_sdc(fleet)
    assert only(judgement.checks, "gpu4").status == "FAIL"
    assert {only(judgement.checks, f"gpu{i}").status for i in (1, 2, 3)} == {"PASS"}
    summary = only(judgement.checks, None)
    assert summary.status == "FAIL" and summary.message.startswith(
        "6 of 8 NVIDIA H100 80GB HBM3 GPUs on 4 hosts"
    )


def test_repeats_that_differ_on_one_gpu_fail_it() -> None:
    def unstable(gpu: int, phase: str, entry: dict[str, Any]) -> None:
        if phase == "sdc":
            entry["repeats"] = [entry["checksum"], entry["checksum"], "2" * 32]

    check = only(judge_sdc([host_of(H100_ALL, fault=unstable)]).checks, "gpu1")
    assert check.status == "FAIL" and "2 different results in 3 repeats" in check.message


def test_cpu_hosts_are_skipped_with_their_numbers() -> None:
    host = host_of(CPU_2RANKS)
    gemm = only(judge_throughput([host], settings(host), "gpu.gemm").checks, "gpu1")
    assert gemm.status == "SKIP" and gemm.message.startswith(
        "CPU host: not judged against a GPU; measured 2 ranks: bf16"
    )
    assert "fp8 not measured (fp8 needs a GPU with FP8 tensor cores (CPU host))" in gemm.message
    assert only(judge_memtest([host], settings(host)).checks, "gpu1").status == "SKIP"
    sdc = only(judge_sdc([host]).checks, "gpu1")
    assert sdc.status == "SKIP" and "their checksums agree" in sdc.message


def test_a_launch_that_ended_before_or_inside_a_phase_is_an_error_naming_why() -> None:
    lines = lines_of(H100_ALL)
    rows = [r for r in lines if r["event"] == "row"]
    why = "memtest of 0 bytes did not finish within 150 s"
    host = host_stress("gpu1", lines[0], rows[:5], "hung", why, "memtest")
    check = only(judge_memtest([host], settings(host)).checks, "gpu1")
    assert check.status == "ERROR"
    assert (
        check.message
        == f"memtest not measured on gpu1: the stress program ended hung (during memtest): {why}"
    )
    assert only(judge_throughput([host], settings(host), "gpu.hbm").checks, "gpu1").status == "PASS"
    cut = host_stress("gpu1", lines[0], rows[:1], "deadline", "the run's time budget ran out", "gemm.tf32")
    gemm = only(judge_throughput([cut], settings(cut), "gpu.gemm").checks, "gpu1")
    assert gemm.status == "ERROR" and "(during gemm.tf32)" in gemm.message


def test_the_sku_table_knows_each_model_by_its_reported_name() -> None:
    labels = {
        "NVIDIA H100 80GB HBM3": ("H100 SXM", 989.0, 3350.0),
        "NVIDIA H100 PCIe": ("H100 PCIe", 756.0, 2000.0),
        "NVIDIA H100 NVL": ("H100 NVL", 835.0, 3900.0),
        "NVIDIA H200": ("H200 SXM", 989.0, 4800.0),
        "NVIDIA A100-SXM4-80GB": ("A100 SXM 80GB", 312.0, 2039.0),
        "NVIDIA A100-SXM4-40GB": ("A100 SXM 40GB", 312.0, 1555.0),
        "NVIDIA B200": ("B200", 2250.0, 8000.0),
    }
    for name, (label, bf16, hbm) in labels.items():
        sku = sku_of(name)
        assert sku is not None and (sku.label, sku.bf16_tflops, sku.hbm_gbps) == (label, bf16, hbm), name
    assert sku_of("NVIDIA A100-SXM4-80GB").peak("gemm.fp8") is None  # type: ignore[union-attr]
    assert sku_of("NVIDIA L40S") is None
    assert DEFAULTS.peak("gemm.bf16", "NVIDIA L40S") == (
        None,
        "no peak known for 'NVIDIA L40S' (set gpu_peak_bf16_tflops)",
    )
