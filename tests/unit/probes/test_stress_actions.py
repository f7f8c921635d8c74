"""The action each stress verdict carries, chosen by the judge from what it saw rather than the check's
declared one (docs/actions.md): faults planted in copies of the lent H100's real capture."""

from __future__ import annotations

from typing import Any

from diagnose.core.vars import Vars
from diagnose.probes.stress_burnin import error_action, judge_burnin
from diagnose.probes.stress_judge import Settings, judge_memtest, judge_throughput
from diagnose.probes.stress_sdc import judge_sdc
from tests.support.stress import H100_ALL, H100_HOG, host_of, scaled

MASK = "clocks_throttle_reasons.active"


def settings(*hosts: Any) -> dict[str, Settings]:
    return {h.host: Settings.of(Vars({})) for h in hosts}


def only(checks: list[Any], host: str | None) -> Any:
    (found,) = [c for c in checks if c.host == host]
    return found


def test_one_slow_gpu_is_reset_then_rma_when_it_stays_slow() -> None:
    host = host_of(H100_ALL, gpus=8, fault=scaled(5, "hbm.copy", 0.5))
    check = only(judge_throughput([host], settings(host), "gpu.hbm").checks, "gpu1")
    assert check.status == "FAIL" and check.action == "reset_gpu"
    assert check.message.endswith(
        "→ reset the GPU and measure again; a GPU still slow after the reset is an RMA candidate"
    )


def test_every_gpu_of_a_host_slow_alike_is_a_host_setting() -> None:
    def all_slow(index: int, phase: str, entry: dict[str, Any]) -> None:
        if phase == "gemm.bf16":
            entry["tflops"] = entry["tflops"] * 0.5

    host = host_of(H100_ALL, gpus=4, fault=all_slow)
    check = only(judge_throughput([host], settings(host), "gpu.gemm").checks, "gpu1")
    assert check.status == "FAIL" and check.action == "check_config"
    assert "every GPU of the host is slow alike: a host-wide setting" in check.message


def test_a_gpu_slow_beside_another_jobs_process_is_the_jobs() -> None:
    host = host_of(H100_HOG)
    host.foreign = ["GPU 0 (00000000:00:06.0): pid 655 python3, 1 GiB"]
    check = only(judge_throughput([host], settings(host), "gpu.gemm").checks, "gpu1")
    assert check.status == "FAIL" and check.action == "check_user_app"


def test_a_passing_throughput_carries_no_action() -> None:
    host = host_of(H100_ALL)
    assert only(judge_throughput([host], settings(host), "gpu.gemm").checks, "gpu1").action is None


def test_a_gpu_whose_bits_differ_is_an_rma() -> None:
    def flipped(gpu: int, phase: str, entry: dict[str, Any]) -> None:
        if gpu == 3 and phase == "sdc":
            entry["checksum"] = "0" * 32
            entry["repeats"] = ["0" * 32] * 3

    check = only(judge_sdc([host_of(H100_ALL, gpus=8, fault=flipped)]).checks, "gpu1")
    assert check.status == "FAIL" and check.action == "rma_gpu"


def test_a_host_whose_gpus_agree_on_other_bits_than_the_fleet_is_software() -> None:
    def other(gpu: int, phase: str, entry: dict[str, Any]) -> None:
        if phase == "sdc":
            entry["checksum"] = "1" * 32
            entry["repeats"] = ["1" * 32] * 3

    fleet = [host_of(H100_ALL, f"gpu{i}", gpus=2) for i in (1, 2, 3)] + [host_of(H100_ALL, "gpu4", 2, other)]
    check = only(judge_sdc(fleet).checks, "gpu4")
    assert check.status == "FAIL" and check.action == "check_config"
    assert (
        "a software difference (driver, cuBLAS, GPU model variant; versions.*) before 2 faulty"
        in check.message
    )
    # with two hosts it is a WARN, and the same reading
    warned = only(judge_sdc([host_of(H100_ALL, "gpu1", gpus=3), fleet[3]]).checks, "gpu4")
    assert warned.status == "WARN" and warned.action == "check_config"


def test_a_pending_row_remap_under_load_is_a_reset() -> None:
    host = host_of(H100_ALL)
    pending = host.fields.index("remapped_rows.pending") + 1
    for sample in host.gpus[0].samples[60:]:
        sample[pending] = 1.0
    (check,) = judge_burnin([host], {"gpu1": 2}, {}).checks
    assert check.status == "WARN" and check.action == "reset_gpu"
    assert "a row remap became pending (reset the GPU)" in check.message


def test_uncorrectable_ecc_under_load_is_a_reset_and_heat_with_it_the_sites() -> None:
    host = host_of(H100_ALL, gpus=2)
    ecc = host.fields.index("ecc.errors.uncorrected.volatile.total") + 1
    for sample in host.gpus[0].samples[100:]:
        sample[ecc] = 2.0
    (check,) = judge_burnin([host], {"gpu1": 2}, {}).checks
    assert check.status == "FAIL" and check.action == "reset_gpu"
    mask = host.fields.index(MASK) + 1
    for sample in host.gpus[1].samples[40:52]:
        sample[mask] = int(sample[mask]) | 0x8  # HW slowdown: cooling or power delivery
    (both,) = judge_burnin([host], {"gpu1": 2}, {}).checks
    assert both.action == "contact_support"  # the action that covers both findings


def test_a_gpu_failing_under_load_takes_its_xids_action() -> None:
    assert (
        error_action("CUDA error: unspecified launch failure (Xid 79: GPU has fallen off the bus)")
        == "reboot"
    )
    assert error_action("Xid: 48, DBE") == "reset_gpu"
    assert error_action("CUDA error: an illegal memory access was encountered") == "reset_gpu"
    host = host_of(H100_ALL)
    host.gpus[0].errors["burnin"] = "RuntimeError: CUDA error (Xid 79)"
    (check,) = judge_burnin([host], {"gpu1": 2}, {}).checks
    assert check.status == "FAIL" and check.action == "reboot"


def test_a_host_lost_under_load_is_a_reboot() -> None:
    host = host_of(H100_ALL, status="host_lost", message="host gpu1 stopped answering", in_progress="burnin")
    for gpu in host.gpus:
        gpu.burnin = gpu.burnin[:1]
    (check,) = judge_burnin([host], {"gpu1": 10}, {}).checks
    assert check.status == "FAIL" and check.action == "reboot"
    for gpu in host.gpus:
        gpu.burnin = []
    (nothing,) = judge_burnin([host], {"gpu1": 10}, {}).checks
    assert nothing.status == "FAIL" and nothing.action == "reboot"


def test_the_real_burn_in_passes_without_an_action() -> None:
    (check,) = judge_burnin([host_of(H100_ALL)], {"gpu1": 2}, {}).checks
    assert check.status == "PASS" and check.action is None


def test_memtest_mismatches_are_an_rma_an_ecc_stop_a_reset_low_coverage_configuration() -> None:
    def bad_word(gpu: int, phase: str, entry: dict[str, Any]) -> None:
        if gpu == 1 and phase == "memtest":
            entry["mismatches"] = 3
            entry["first"] = [{"offset": 8, "pattern": "walking_ones", "expected": "10", "read": "30"}]

    faulty = host_of(H100_ALL, gpus=2, fault=bad_word)
    assert only(judge_memtest([faulty], settings(faulty)).checks, "gpu1").action == "rma_gpu"

    def ecc(gpu: int, phase: str, entry: dict[str, Any]) -> None:
        if phase == "memtest":
            entry.clear()
            entry.update(
                {"rank": gpu, "gpu": gpu, "error": "CUDA error: uncorrectable ECC error encountered"}
            )

    stopped = host_of(H100_ALL, fault=ecc)
    check = only(judge_memtest([stopped], settings(stopped)).checks, "gpu1")
    assert check.status == "FAIL" and check.action == "reset_gpu"
    host = host_of(H100_ALL)
    low = only(
        judge_memtest([host], {"gpu1": Settings.of(Vars({"memtest_min_fraction": 0.97}))}).checks, "gpu1"
    )
    assert low.status == "WARN" and low.action == "check_config"
    assert only(judge_memtest([host], settings(host)).checks, "gpu1").action is None
