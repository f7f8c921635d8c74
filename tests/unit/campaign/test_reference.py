"""The cluster's reference as variables of later runs, and the judges naming where a figure came from."""

from __future__ import annotations

from diagnose.benchmarks.expect import expected_busbw
from diagnose.campaign.reference import reference_vars
from diagnose.core.vars import SOURCES_VARIABLE, Vars
from diagnose.probes.stress_judge import Settings

ROWS = [
    {
        "key": "busbw|all_reduce|2",
        "value": 40.0,
        "hosts": 8,
        "run_id": "r7",
        "at": "2026-11-27T10:00:00+00:00",
    },
    {
        "key": "busbw|all_reduce|8",
        "value": 30.0,
        "hosts": 8,
        "run_id": "r9",
        "at": "2026-11-28T10:00:00+00:00",
    },
    {
        "key": "gemm.bf16|NVIDIA H200",
        "value": 700.0,
        "hosts": 8,
        "run_id": "r7",
        "at": "2026-11-27T10:00:00+00:00",
    },
]


def host_vars(**over: object) -> Vars:
    values, sources = reference_vars("dc3", ROWS)
    merged = {**values, **over}
    kept = {k: w for k, w in sources.items() if merged.get(k) == values.get(k)}
    return Vars({**merged, SOURCES_VARIABLE: kept}, host="gpu01")


def test_busbw_is_judged_by_the_campaigns_figure_measured_or_interpolated_and_says_so() -> None:
    measured = expected_busbw("all_reduce", 2, 8, host_vars())
    assert measured.expected_gbps == 40.0
    assert measured.basis == (
        "campaign dc3's reference (2 nodes: run r7, 2026-11-27; 8 nodes: run r9, 2026-11-28): "
        "all_reduce on 2 nodes (measured)"
    )
    between = expected_busbw("all_reduce", 4, 8, host_vars())
    assert between.expected_gbps == 35.0  # halfway in log(nodes) between 2 and 8
    assert "interpolated from 2, 8 nodes" in between.basis
    beyond = expected_busbw("all_reduce", 64, 8, host_vars())
    assert beyond.expected_gbps is not None and beyond.expected_gbps < 30.0


def test_an_inventory_figure_wins_and_is_named_as_the_inventorys() -> None:
    own = expected_busbw("all_reduce", 2, 8, host_vars(expected_busbw_all_reduce_gbps={2: 41.0}))
    assert own.expected_gbps == 41.0
    assert own.basis == "set by expected_busbw_all_reduce_gbps for 2 nodes"


def test_the_gemm_floor_names_the_campaign() -> None:
    floor = Settings.of(host_vars()).floor("gemm.bf16", "NVIDIA H200")
    assert floor.source.startswith("campaign dc3's reference for NVIDIA H200 (run r7, 2026-11-27, 8 hosts)")
    inventory = Settings.of(host_vars(gpu_ref_bf16_tflops=650.0)).floor("gemm.bf16", "NVIDIA H200")
    assert inventory.source == "set in the inventory (gpu_ref_bf16_tflops)"
