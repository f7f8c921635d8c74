"""The probes after a sweep that stopped early: smaller sizes and fewer samples, each with its reason."""

from __future__ import annotations

import json

from diagnose.benchmarks.early_stop import (
    BROKEN_SAMPLES,
    between_nodes_sizes,
    probe_bytes,
    probe_samples,
    probe_sizes,
)
from diagnose.inference.model import DEFAULT_TOKENS, KVModel
from tests.support.paths import FIXTURES

# The stopped_early note the real 4× H200 NET/Socket sweep gives (tests/fixtures/results/h200x4_two_halves_socket).
SOCKET = {"after_bytes": 256 << 20, "busbw_gbps": 5.768, "plateau_gbps": 5.48, "floor_gbps": 289.0}
RECORDS = {"all_reduce": {"stopped_early": {**SOCKET, "skipped_bytes": [512 << 20, 1 << 30]}}}
HEALTHY = {"all_reduce": {"rows": [], "status": "PASS"}}


def test_a_healthy_sweep_leaves_the_probes_as_planned() -> None:
    assert probe_bytes(HEALTHY, 1 << 30) == (1 << 30, None)
    assert probe_samples(HEALTHY, 20) == (20, None)


def test_after_a_stopped_sweep_the_fleet_busbw_moves_its_last_size() -> None:
    size, note = probe_bytes(RECORDS, 1 << 30)
    assert size == 256 << 20
    assert note == (
        "measured at 256 MiB, not 1 GiB: the sweep's all_reduce stopped early there "
        "(5.77 GB/s against the floor 289 GB/s)"
    )
    assert probe_bytes(RECORDS, 128 << 20) == (128 << 20, None), "never larger than planned"


def test_after_a_stopped_sweep_a_probe_keeps_a_few_samples() -> None:
    samples, note = probe_samples(RECORDS, 20)
    assert samples == BROKEN_SAMPLES == 3
    assert note is not None and note.startswith("at least 3 samples per row, not 20: the sweep's all_reduce")
    assert probe_samples(RECORDS, 2) == (2, None)


def test_after_a_stopped_sweep_the_kv_probe_leaves_out_requests_too_long_to_repeat() -> None:
    """The lent 4x H200 with P2P and SHM off: the sweep stopped at 3.08 GB/s, and the KV probe's 16k and 32k
    token requests (5.4 and 10.7 GB, 3 s a transfer) took 120 s of a 335 s run; only those that move in
    half a second at that figure are kept."""
    note = {
        "after_bytes": 128 << 20,
        "busbw_gbps": 3.078953035731112,
        "plateau_gbps": 2.064,
        "floor_gbps": 289.0,
    }
    records = {"all_reduce": {"stopped_early": note}}
    model = KVModel()
    sizes = [model.request_bytes(t) for t in DEFAULT_TOKENS]
    kept, why = probe_sizes(records, sizes)
    assert kept == sizes[:2] and sizes[1] < 0.5 * 3.08e9 < sizes[2]
    assert why == (
        "sizes above 1.54 GB left out (2 of 4): at the 3.08 GB/s the sweep's all_reduce stopped at, "
        "each would take over 0.5 s"
    )
    assert probe_sizes(HEALTHY, sizes) == (sizes, None)
    crawling = {"all_reduce": {"stopped_early": {**note, "busbw_gbps": 0.01}}}
    assert probe_sizes(crawling, sizes)[0] == sizes[:1], "the smallest request is always measured"


def test_across_nodes_the_kv_probe_keeps_what_the_measured_fabric_moves_in_half_a_second() -> None:
    """Two hosts carved out of a lent 4x H200, NET/Socket between them (not judged: no RDMA fabric): the
    sweep reached 4.6 GB/s, and the KV probe's 16k and 32k token requests took 5 of the run's 9 minutes at
    2.7 s a transfer. Between nodes only the sizes that move in 0.5 s at that rate are kept; a sweep on one
    node, or an RDMA fabric's rate, leaves the plan as it was."""
    run = json.loads(
        (FIXTURES / "gpu_runs" / "h200x4-two-hosts-2026-11-27" / "unjudged_results.json").read_text()
    )
    records = {b["collective"]: b for b in run["benchmarks"]}
    sizes = [KVModel().request_bytes(t) for t in DEFAULT_TOKENS]
    kept, why = between_nodes_sizes(records, sizes)
    assert kept == sizes[:2] and sizes[1] < 0.5 * 4.6e9 < sizes[2]
    assert why == (
        "across nodes, sizes above 2.28 GB left out (2 of 4): at the 4.56 GB/s the sweep's all_reduce reached "
        "between the nodes, each would take over 0.5 s"
    )
    one_node = {"all_reduce": {**records["all_reduce"], "nodes": 1}}
    assert between_nodes_sizes(one_node, sizes) == (sizes, None)
    rdma = {"all_reduce": {"nodes": 2, "rows": [{"bytes": 1 << 30, "busbw_gbps": 45.0}]}}
    assert between_nodes_sizes(rdma, sizes) == (sizes, None)
    small = {"all_reduce": {"nodes": 2, "rows": [{"bytes": 16384, "busbw_gbps": 0.01}]}}
    assert between_nodes_sizes(small, sizes) == (sizes, None), (
        "latency-bound sizes say nothing of a transfer's time"
    )
