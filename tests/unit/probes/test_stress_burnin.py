"""gpu.burnin judged on the real two-minute burn-in of the lent H100, then on copies with a fault planted in
the samples (a hardware clock-event reason, uncorrectable ECC errors, a throughput drop) or in the launch
(the host lost in the second minute)."""

from __future__ import annotations

from diagnose.probes.stress_burnin import judge_burnin, series, summary
from tests.support.stress import CPU_2RANKS, H100_ALL, host_of

MASK = "clocks_throttle_reasons.active"


def test_the_real_burn_in_passes_with_its_clocks_heat_and_power() -> None:
    host = host_of(H100_ALL)
    judgement = judge_burnin([host], {"gpu1": 2}, {})
    (check,) = judgement.checks
    assert check.status == "PASS"
    assert check.message == (
        "gpu1: 1 GPU, 2 of 2 min of bf16 load: GPU 0 (00000000:00:06.0): SM clock min 1320 MHz / median "
        "1365 MHz, max 72 °C (HBM 67 °C), max 701 W, 678 TFLOP/s; clock-event reasons seen: SW power cap"
    )
    figures = summary(host.gpus[0], host.fields, host.interval_s)
    assert figures["samples"] == 122 and figures["loaded_samples"] == 120
    assert figures["reason_s"] == {"sw_power_cap": 120.0} and figures["drop_pct"] == 0.2
    (record,) = judgement.records
    assert record["series"]["t_s"][0] == 0.0 and len(record["series"]["clocks.sm"]) == 122
    assert record["verdict"] == "PASS" and record["summary"]["tflops_by_minute"] == [678.88, 677.37]


def test_a_hardware_slowdown_under_load_fails_the_gpu_and_names_how_long() -> None:
    host = host_of(H100_ALL, gpus=2)
    mask = host.fields.index(MASK) + 1
    for sample in host.gpus[1].samples[40:52]:
        sample[mask] = int(sample[mask]) | 0x8
    (check,) = judge_burnin([host], {"gpu1": 2}, {}).checks
    assert check.status == "FAIL"
    assert "GPU 1 (00000000:28:00.0): HW slowdown for 12 s" in check.message and "GPU 0" not in check.message


def test_uncorrectable_ecc_errors_during_the_load_fail() -> None:
    host = host_of(H100_ALL)
    ecc = host.fields.index("ecc.errors.uncorrected.volatile.total") + 1
    for sample in host.gpus[0].samples[100:]:
        sample[ecc] = 2.0
    (check,) = judge_burnin([host], {"gpu1": 2}, {}).checks
    assert check.status == "FAIL" and "2 uncorrectable ECC errors during the load" in check.message


def test_a_gpu_that_slows_down_over_the_burn_in_warns() -> None:
    host = host_of(H100_ALL)
    host.gpus[0].burnin[-1]["tflops"] = 580.0
    (check,) = judge_burnin([host], {"gpu1": 2}, {"gpu1": 10.0}).checks
    assert check.status == "WARN" and "throughput fell 14.6 % (679 → 580 TFLOP/s)" in check.message


def test_a_host_lost_during_the_burn_in_fails_and_keeps_its_first_minute() -> None:
    host = host_of(H100_ALL, status="host_lost", message="host gpu1 stopped answering", in_progress="burnin")
    for gpu in host.gpus:
        gpu.burnin = gpu.burnin[:1]
    judgement = judge_burnin([host], {"gpu1": 10}, {})
    (check,) = judgement.checks
    assert check.status == "FAIL"
    assert check.message.startswith(
        "gpu1: 1 GPU, 1 of 10 min of bf16 load; the host stopped during the burn-in"
    )
    assert judgement.records[0]["summary"]["tflops_by_minute"] == [678.88]


def test_no_burn_in_asked_is_a_skip_and_cpu_hosts_are_skipped() -> None:
    (skipped,) = judge_burnin([host_of(H100_ALL)], {"gpu1": 0}, {}).checks
    assert skipped.status == "SKIP" and skipped.message.startswith("burnin_minutes is 0")
    (cpu,) = judge_burnin([host_of(CPU_2RANKS)], {"gpu1": 10}, {}).checks
    assert cpu.status == "SKIP" and cpu.message.startswith(
        "CPU host: not judged against a GPU; gpu1: 2 ranks"
    )


def test_long_series_are_thinned_for_the_report() -> None:
    host = host_of(H100_ALL)
    gpu = host.gpus[0]
    gpu.samples = gpu.samples * 5
    kept = series(gpu, host.fields)
    assert len(kept["t_s"]) <= 150 and len(kept["temperature.gpu"]) == len(kept["t_s"])
