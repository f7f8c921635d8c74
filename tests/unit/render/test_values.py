"""observed / expected as a reader writes them (diagnose.render.values), on the shapes results.json holds."""

from __future__ import annotations

import json
from typing import Any

from diagnose.render.values import MAX_ROWS, shown, split_unit
from tests.support.paths import FIXTURES

RESULTS = FIXTURES / "results"


def _recorded(fixture: str, check_id: str, field: str) -> Any:
    document = json.loads((RESULTS / fixture).read_text())
    return next(c[field] for c in document["checks"] if c["id"] == check_id and c.get(field) is not None)


def test_a_flat_mapping_reads_as_words_with_units() -> None:
    assert shown({"max_tail_pct": 10.0}, "train.tail").text == "max tail 10 %"
    expected = _recorded("h200x2_acceptance_extras.json", "train.overlap", "expected")
    assert shown(expected, "train.overlap").text == (
        "min overlap ratio 0.7 · max exposed comm 5 % · min exposed comm 1 ms · fabric slowdown 2"
    )
    assert shown({"gpus": 8, "nvlink": True}, "gpu.topology").text == "gpus 8 · nvlink yes"


def test_per_rank_figures_are_a_table_with_units_in_the_headers() -> None:
    observed = _recorded("h200x2_acceptance_extras.json", "train.overlap", "observed")
    value = shown(observed, "train.overlap")
    assert value.text == ""
    ((caption, table),) = value.tables
    # two ranks of eight figures: one row per figure, one column per rank, so the page's width holds it
    assert caption == "" and table.columns == ["rank 0", "rank 1"]
    labels = [label for label, _cells in table.rows]
    assert labels[:4] == ["step (ms)", "step cpu (ms)", "compute (ms)", "backward (ms)"]
    cells = dict(table.rows)
    assert cells["backward (ms)"][0] == "13.71" and cells["comm"][0] == "1.88 GB"
    assert cells["overlap ratio"] == ["0.9534", "0.9554"]
    many = {str(rank): {"step_ms": 20.0 + rank, "tail_ms": 1.0} for rank in range(8)}
    ((_, wide),) = shown(many, "train.tail").tables  # more ranks than figures: one row per rank
    assert wide.key_header == "rank" and wide.columns == ["step (ms)", "tail (ms)"] and len(wide.rows) == 8


def test_gpu_pairs_and_processes_are_tables_too() -> None:
    pairs = shown(_recorded("h200x2_kv_transfer.json", "infer.kv_transfer", "observed"), "infer.kv_transfer")
    ((_, table),) = pairs.tables
    assert table.columns[0] == "GPU0->GPU1" and "p50 (µs)" in dict(table.rows)
    assert "bandwidth (GB/s)" in dict(table.rows)
    processes = shown(_recorded("h100_stress_hog.json", "gpu.processes", "observed"), "gpu.processes")
    ((_, table),) = processes.tables
    assert table.columns == ["1"] and dict(table.rows)["used (MiB)"] == ["1060"]


def test_a_mapping_with_a_list_of_rows_keeps_its_line_and_gets_a_table() -> None:
    observed = _recorded("h200x4_localize_gpu3.json", "bench.straggler", "observed")
    value = shown(observed, "bench.straggler")
    assert value.text.startswith("deficit 58.4 % · confidence 1")
    ((caption, table),) = value.tables
    assert caption == "measurements" and "reference (GB/s)" in dict(table.rows)


def test_bare_numbers_take_their_check_familys_unit() -> None:
    assert shown(240.9, "bench.all_reduce").text == "240.9 GB/s"
    assert shown(8, "ib.devices").text == "8"
    assert shown(None, "x").text == "—" and shown([], "x").text == "none" and shown({}, "x").text == "none"
    assert shown([50000, 60999], "net.port_range").text == "50000, 60999"


def test_units_come_from_the_keys_suffix() -> None:
    assert split_unit("line_rate_gbps") == ("line rate", "Gb/s")
    assert split_unit("busbw_gbps") == ("busbw", "GB/s")
    assert split_unit("free_gib") == ("free", "GiB")
    assert split_unit("gbps") == ("bandwidth", "GB/s")
    assert split_unit("status") == ("status", "")
    assert shown({"free_gib": {"/": 63.8}, "nvme": 0}, "host.storage").text == "free (/: 63.8 GiB) · nvme 0"


def test_keys_that_are_data_keep_their_spelling() -> None:
    assert shown({"mlx5_2/1": "Down/Polling"}, "ib.port_state").text == "mlx5_2/1: Down/Polling"
    assert shown({"NCCL_P2P_DISABLE": "1"}, "nccl.env").text == "NCCL_P2P_DISABLE: 1"
    assert split_unit("mlx5_2") == ("mlx5_2", "")


def test_big_tables_are_cut_with_a_count() -> None:
    per_gpu = {str(i): {"temp_c": 40 + i} for i in range(40)}
    ((_, table),) = shown(per_gpu, "gpu.clocks").tables
    assert len(table.rows) == MAX_ROWS and table.more_rows == 40 - MAX_ROWS
    assert table.columns == ["temp (°C)"] and table.key_header == "GPU"
    long = shown("x" * 5000, "x").text
    assert len(long) < 500 and long.endswith("[+4600 characters]")


def test_every_recorded_value_formats() -> None:
    for path in sorted(RESULTS.glob("*.json")):
        for row in json.loads(path.read_text()).get("checks") or []:
            if isinstance(row, dict):
                for field in ("observed", "expected"):
                    value = shown(row.get(field), str(row.get("id", "")))
                    assert value.text or value.tables, (path.name, row.get("id"), field)
