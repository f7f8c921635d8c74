"""The stress program's pure parts and its CPU code paths, run in this process on torch CPU: the rows it
promises the launcher, its reading of nvidia-smi sample lines, the memory test's locating of a wrong
word, the exact checksum of the seeded product, and its arguments."""

from __future__ import annotations

import argparse

import pytest
import torch

from diagnose.shipped import gpu_sampler, stress

#: One line of `nvidia-smi --query-gpu=<gpu_sampler.SAMPLE_FIELDS> --format=csv,noheader,nounits -lms 1000` as the lent
#: H100 printed it under load (the values of the capture's sample at 1795618161.112; "No" for no pending remap).
H100_LINE = "00000000:00:06.0, 1380, 2619, 71, 66, 697.70, 0x0000000000000004, 99, 0, No"


def cpu_worker(**overrides: object) -> stress.Worker:
    args = stress.parse_args(["--device", "cpu"])
    for key, value in overrides.items():
        setattr(args, key, value)
    return stress.Worker(args, torch, 0)


def test_the_rows_promised_to_the_launcher_follow_the_phases_and_the_burn_in_minutes() -> None:
    rows = stress.expected_rows(["gemm", "hbm", "memtest", "sdc", "burnin"], 150.0)
    assert rows == [
        ("gemm.bf16", 0),
        ("gemm.tf32", 0),
        ("gemm.fp8", 0),
        ("hbm.copy", 0),
        ("hbm.triad", 0),
        ("memtest", 0),
        ("sdc", 0),
        ("burnin", 0),
        ("burnin", 1),
        ("burnin", 2),
    ]
    assert stress.expected_rows(["burnin"], 0.0) == [] and stress.burnin_minutes(60.0) == 1


def test_sample_lines_are_read_per_gpu_as_numbers() -> None:
    lines = [(1795618161.112, [v.strip() for v in H100_LINE.split(",")])]
    by_bus = gpu_sampler.per_gpu_samples(lines, gpu_sampler.SAMPLE_FIELDS, ["00000000:00:06.0", None])
    assert by_bus == {
        "00000000:00:06.0": [[1795618161.112, 1380.0, 2619.0, 71.0, 66.0, 697.7, 4, 99.0, 0.0, 0]]
    }
    other = gpu_sampler.per_gpu_samples(lines, gpu_sampler.SAMPLE_FIELDS, ["00000000:18:00.0"])
    assert other == {"00000000:18:00.0": []}
    na = [(1.0, ["00000000:00:06.0", "[N/A]", "Yes"])]
    assert gpu_sampler.per_gpu_samples(
        na, ("pci.bus_id", "clocks.sm", "remapped_rows.pending"), ["00000000:00:06.0"]
    ) == {"00000000:00:06.0": [[1.0, None, 1]]}


def test_a_phase_carries_the_median_clock_power_and_limit_its_gpu_reported() -> None:
    # the line above with the two fields the phase sampler adds: the 700 W limit the lent H100 enforced and
    # the 1980 MHz its idle samples in the capture show as the top SM clock
    wide = [v.strip() for v in (H100_LINE + ", 700.00, 1980").split(",")]
    lines = [(1.0, wide), (1.2, [*wide[:1], "1350", *wide[2:5], "699.10", *wide[6:]]), (1.4, wide)]
    by_bus = gpu_sampler.per_gpu_samples(lines, gpu_sampler.SAMPLE_FIELDS, ["00000000:00:06.0"])
    readings = gpu_sampler.phase_readings(by_bus["00000000:00:06.0"], gpu_sampler.SAMPLE_FIELDS)
    assert readings == {
        "sm_clock_mhz": 1380.0,
        "max_sm_clock_mhz": 1980.0,
        "power_w": 697.7,
        "power_limit_w": 700.0,
    }
    # a driver that took only the basic list: clock and power, no limit; nothing sampled: nothing
    basic = gpu_sampler.per_gpu_samples(
        [(1.0, wide[:8])], gpu_sampler.BASIC_SAMPLE_FIELDS, ["00000000:00:06.0"]
    )
    assert gpu_sampler.phase_readings(basic["00000000:00:06.0"], gpu_sampler.BASIC_SAMPLE_FIELDS) == {
        "sm_clock_mhz": 1380.0,
        "power_w": 697.7,
    }
    assert gpu_sampler.phase_readings([], gpu_sampler.SAMPLE_FIELDS) == {}
    assert gpu_sampler.FIELD_LISTS[-1] == gpu_sampler.BASIC_SAMPLE_FIELDS
    assert all("enforced.power.limit" in f and "clocks.max.sm" in f for f in gpu_sampler.FIELD_LISTS[:2])


def test_a_wrong_word_is_located_by_byte_offset_pattern_and_values() -> None:
    worker = cpu_worker()
    block = torch.full((1024,), 1 << 4, dtype=torch.int64)
    block[100] = (1 << 4) | (1 << 5)
    result: dict[str, object] = {"first": []}
    worker.locate(block, 1 << 4, 3, "walking_ones", result)
    assert result["first"] == [
        {
            "offset": (3 * 1024 + 100) * 8,
            "pattern": "walking_ones",
            "expected": "0000000000000010",
            "read": "0000000000000030",
        }
    ]


def test_the_memory_test_covers_its_share_and_finds_nothing_on_good_memory() -> None:
    result = cpu_worker(memtest_s=0.0).memtest()
    assert result["mismatches"] == 0 and result["passes"] == 1 and result["first"] == []
    assert result["tested_bytes"] == 7 << 20 and result["free_bytes"] == stress.CPU_MEMTEST_BYTES
    assert result["patterns"] == {
        "walking_ones": {"steps": 64, "mismatches": 0},
        "random": {"steps": 1, "mismatches": 0},
        "address": {"steps": 2, "mismatches": 0},
    }


def test_the_seeded_product_gives_the_same_bits_each_time_and_a_flipped_bit_changes_the_checksum() -> None:
    worker = cpu_worker(sdc_steps=4, sdc_repeats=2)
    first, second = worker.sdc(), worker.sdc()
    assert first["checksum"] == second["checksum"] and len(set(first["repeats"])) == 1
    x = torch.randn(64, 64).bfloat16()
    flipped = x.clone()
    flipped.view(torch.int16)[7, 9] ^= 1
    assert worker.checksum(x) == worker.checksum(x.clone()) != worker.checksum(flipped)


def test_unknown_phases_and_bad_shares_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--phases", "gemm,stream"], ["--memtest-fraction", "1.5"]):
        with pytest.raises(SystemExit):
            stress.parse_args(argv)
    assert "unknown phase(s) stream" in capsys.readouterr().err
    assert isinstance(stress.parse_args([]), argparse.Namespace)
