"""The shipped KV-transfer program's pure parts, and its block check on real tensors (CPU torch).

The transfers themselves need two ranks: tests/integration/test_kv_transfer.py runs them over gloo between
two sshd test hosts, and the lent H200 run (tests/fixtures/results/h200x2_kv_transfer.json) over NCCL.
"""

from __future__ import annotations

import argparse
import random
import statistics

import pytest
import torch

from diagnose.shipped import kv_probe
from diagnose.shipped.kv_probe import Transfer, packed_parts, percentile, repetitions, rows, summary_us


def test_percentiles_interpolate_between_ranks_as_numpy_does() -> None:
    values = [random.Random(7).uniform(1e-3, 2e-3) for _ in range(137)]
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    assert percentile(values, 50) == pytest.approx(statistics.median(values))
    assert percentile(values, 99) == pytest.approx(cuts[98])
    assert percentile([3.0], 99) == 3.0 and percentile([1.0, 2.0], 50) == 1.5
    summary = summary_us([0.001, 0.002, 0.004])
    assert summary == {
        "p50_us": 2000.0,
        "p99_us": 3960.0,
        "max_us": 4000.0,
        "min_us": 1000.0,
        "mean_us": 2333.333,
    }


def test_repetitions_fit_the_budget_between_the_floor_and_the_ask() -> None:
    assert repetitions(0.001, 100, 20, 3.0) == 100  # a millisecond each: all of them
    assert repetitions(0.04, 100, 20, 3.0) == 75  # 40 ms each: what fits three seconds
    assert repetitions(0.5, 100, 20, 3.0) == 20  # never fewer than the floor
    assert repetitions(0.5, 10, 20, 3.0) == 10  # nor more than asked


def test_rows_are_lengths_then_methods_with_staging_only_for_short_requests() -> None:
    assert rows([4096, 1024], ["block", "packed", "staged"], 1024) == [
        ("block", 1024),
        ("packed", 1024),
        ("staged", 1024),
        ("block", 4096),
        ("packed", 4096),
    ]


def test_a_packed_row_is_the_sum_of_its_parts_each_beside_its_reference() -> None:
    nbytes = 10_737_418_240  # 32k tokens of the 70B-class shape
    ms = 1e-3
    phases = {
        "pack": [5.0 * ms, 5.2 * ms, 9.0 * ms],
        "wire": [29.0 * ms, 30.0 * ms, 29.5 * ms],
        "unpack": [5.5 * ms, 5.0 * ms, 5.1 * ms],
        "plain": [29.2 * ms, 28.8 * ms, 29.0 * ms],
        "pack_copy": [5.0 * ms, 5.0 * ms, 5.1 * ms],
        "unpack_copy": [4.9 * ms, 5.0 * ms, 5.0 * ms],
    }
    totals, parts = packed_parts(nbytes, phases)
    # Per repetition, not the sum of the parts' medians: a slow gather (9 ms) stays with its own repetition.
    assert totals == pytest.approx([39.5 * ms, 40.2 * ms, 43.6 * ms])
    assert parts["wire"] == {
        "p50_us": 29500.0,
        "p99_us": pytest.approx(29990.0),
        "gbps": 363.980,
        "plain_us": 29000.0,
        "plain_gbps": 370.256,
    }
    assert parts["pack"]["p50_us"] == 5200.0 and parts["pack"]["copy_gbps"] == 2147.484
    assert parts["unpack"]["gbps"] == 2105.376 and parts["unpack"]["copy_gbps"] == 2147.484


def one_rank(sender: bool, block_bytes: int, blocks: int) -> Transfer:
    """A rank's pools without a process group: enough for filling and checking them."""
    transfer = Transfer.__new__(Transfer)
    transfer.torch = torch
    transfer.sender = sender
    transfer.device = torch.device("cpu")
    transfer.args = argparse.Namespace(block_bytes=block_bytes)
    transfer.word, transfer.words = torch.int16, block_bytes // 2
    transfer.pool = torch.empty((blocks, transfer.words), dtype=torch.int16)
    return transfer


def test_the_check_finds_a_block_in_the_wrong_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kv_probe, "CHECK_BYTES", 3 * 1000)  # three blocks per step: the check runs in steps
    prefill, decode = one_rank(True, 1000, 10), one_rank(False, 1000, 10)
    prefill.fill(10)
    decode.fill(10)
    assert int(decode.pool.abs().sum()) == 0
    source, slots = prefill.orders(10)
    assert sorted(source) == sorted(slots) == list(range(10)) and source != slots
    for i in range(
        10
    ):  # what a correct transfer leaves: block i from prefill slot source[i] in decode slot slots[i]
        decode.pool[slots[i]] = prefill.pool[source[i]]
    assert decode.wrong_blocks(10, source, slots) == 0
    decode.pool[[slots[2], slots[7]]] = decode.pool[[slots[7], slots[2]]]  # two blocks swapped on the way
    decode.pool[slots[5], 499] += 1  # one word changed
    assert decode.wrong_blocks(10, source, slots) == 3


def test_arguments() -> None:
    args = kv_probe.parse_args(["--gpus", "1,0", "--tokens", "16,64", "--methods", "packed"])
    assert args.gpus == [1, 0] and args.tokens == [16, 64] and args.methods == ["packed"]
    for bad in (["--methods", "rdma"], ["--gpus", "0"], ["--methods", "staged", "--staged-max-tokens", "8"]):
        with pytest.raises(SystemExit):
            kv_probe.parse_args(["--tokens", "16", *bad])
