"""The operational checklist filled in from results (diagnose.render.checklist) and host-range folding."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from diagnose.render.checklist import NOT_COVERED, build_checklist, curve_shape
from diagnose.render.hostlist import fold, summarize
from tests.support.paths import FIXTURES

RESULTS = FIXTURES / "results"


def _items(name: str) -> dict[str, Any]:
    results = json.loads((RESULTS / name).read_text())
    return {
        item.key + " " + item.title: item for section in build_checklist(results) for item in section.items
    }


def _item(items: dict[str, Any], key: str) -> Any:
    (match,) = [item for label, item in items.items() if label.split(" ")[0] == key]
    return match


def test_cluster_run_items_carry_status_and_failing_hosts() -> None:
    items = _items("cluster_failures.json")
    hcas = _item(items, "1.1")
    assert hcas.status == "FAIL"
    assert hcas.bad == [("FAIL", "gpu03", 1)]
    assert hcas.judged_hosts == 7
    assert _item(items, "1.2").bad == [("FAIL", "gpu05", 1)]
    assert _item(items, "1.4").status == "PASS" and _item(items, "1.4").cluster_wide
    assert _item(items, "3.2").bad == [("FAIL", "bench.all_reduce (cluster-wide), gpu05", 2)]
    assert _item(items, "3.3").status == "PASS"


def test_items_without_results_are_not_covered_never_passed() -> None:
    items = _items("cluster_failures.json")
    assert _item(items, "4.1").status == NOT_COVERED
    assert _item(items, "5.1").status == NOT_COVERED


def test_all_skipped_items_are_skipped_not_passed() -> None:
    items = _items("h200_local.json")
    for key in ("1.1", "1.2", "1.4"):
        assert _item(items, key).status == "SKIP", key
    assert "no HCA expected" in _item(items, "1.2").note
    assert _item(items, "1.3").status == "PASS"


def test_checks_outside_the_map_appear_under_their_checklist_field() -> None:
    items = _items("cluster_failures.json")
    titles = {label: item for label, item in items.items()}
    gpudirect = [i for i in titles.values() if i.sources == ["gpu.gpudirect"]]
    assert gpudirect and gpudirect[0].key.startswith("1.") and gpudirect[0].status == "WARN"
    reachable = [i for i in titles.values() if i.sources == ["host.reachable"]]
    assert reachable and reachable[0].key == "–" and reachable[0].bad == [("FAIL", "gpu07", 1)]


def test_hostile_results_sections_and_unknown_checklist() -> None:
    results = json.loads((RESULTS / "hostile.json").read_text())
    sections = {s.number: s for s in build_checklist(results)}
    assert any(i.sources == ["history.regression"] and i.status == "WARN" for i in sections["3"].items)
    assert any(i.sources == ['site.custom"<x>'] for i in sections["–"].items)


def _sweep(values: list[float], wrong: int = 0) -> list[dict[str, Any]]:
    return [
        {"bytes": 1 << (16 + i), "busbw_gbps": v, "wrong": wrong if i == 3 else 0}
        for i, v in enumerate(values)
    ]


@pytest.mark.parametrize(
    ("values", "wrong", "status"),
    [
        ([1, 5, 20, 80, 150, 200, 210, 212], 0, "PASS"),
        ([1, 5, 20, 80, 150, 200, 90, 212], 0, "WARN"),  # a dip past 1 MiB
        ([1, 5, 1, 80, 150, 200, 210, 212], 0, "PASS"),  # dips below 1 MiB are latency noise
        ([1, 5, 20, 80, 150, 200, 210, 212], 4, "FAIL"),
    ],
)
def test_curve_shape(values: list[float], wrong: int, status: str) -> None:
    assert curve_shape(_sweep(values, wrong))[0] == status


def test_curve_shape_without_rows_is_not_covered() -> None:
    assert curve_shape([])[0] == NOT_COVERED


def test_fold_keeps_padding_and_natural_order() -> None:
    names = ["node10", "node2", "node1", "node3", "gpu001", "gpu002", "gpu010", "gpu100", "login", "a<b>"]
    assert fold(names) == ["a<b>", "gpu[001-002,010,100]", "login", "node[1-3,10]"]


def test_summarize_512_hosts_fits_a_cell() -> None:
    names = [f"gpu-r{1 + i // 32:02d}n{1 + i % 32:02d}" for i in range(512)]
    text = summarize(names)
    assert text.startswith("gpu-r01n[01-32], gpu-r02n[01-32]")
    assert len(text) < 450
    assert summarize(["x" * 3000]).endswith("…")
    assert "more entries" in summarize([f"h{i}x" for i in range(200)], limit=100)


def test_gloo_sweeps_leave_the_bandwidth_items_not_covered() -> None:
    rows = [
        {"bytes": 4096 << i, "time_us": 10.0, "algbw_gbps": 0.01 * i, "busbw_gbps": 0.02 * i, "wrong": 0}
        for i in range(1, 5)
    ]
    gloo = {
        "collective": "all_reduce",
        "backend": "gloo",
        "status": "PASS",
        "rows": rows,
        "message": "not judged",
    }
    check = {
        "id": "bench.all_reduce",
        "host": None,
        "checklist": "3",
        "status": "PASS",
        "message": "not judged",
    }
    sections = build_checklist({"checks": [check], "benchmarks": [gloo]})
    items = {i.key: i for section in sections for i in section.items}
    for key in ("3.2", "3.3"):
        assert items[key].status == "NOT COVERED" and "gloo" in items[key].note
    nccl = {**gloo, "backend": "nccl"}
    items = {
        i.key: i
        for section in build_checklist({"checks": [check], "benchmarks": [nccl]})
        for i in section.items
    }
    assert items["3.2"].status == "PASS" and items["3.3"].status == "PASS"


def test_a_gpu_acceptance_run_covers_sections_4_and_5_by_measurement() -> None:
    """`diagnose run` with the acceptance playbook on a lent 2× H200 (2026-11-22; NCCL 2.28.9, torch 2.11):
    the training probe and the KV-cache benchmark fill every item they can, and the one item that needs the
    operator's input (prefill/decode groups) says so instead of passing."""
    items = _items("h200x2_acceptance_extras.json")
    for key in ("4.1", "4.2", "4.3", "4.4", "5.1", "5.3"):
        assert _item(items, key).status == "PASS", key
    assert _item(items, "5.2").status == "SKIP"


def test_the_gpu_acceptance_report_shows_the_probe_numbers(tmp_path: Path) -> None:
    from diagnose.render.render import render

    results = tmp_path / "results.json"
    results.write_text((RESULTS / "h200x2_acceptance_extras.json").read_text())
    (html,) = render(results, {"html"})
    text = html.read_text()
    for chapter in ('id="training"', 'id="inference"', 'id="fleet"'):
        assert chapter in text
    assert "0.95" in text and "1.22" in text  # rank 0's overlap ratio and tail (ms)


def test_a_real_gpu_run_names_the_slowed_host(tmp_path: Path) -> None:
    """A lent 4× H200 as four one-GPU hosts (local connection, CUDA_VISIBLE_DEVICES per host), gpu3 shared
    with a matmul loop in another process (2026-11-22): the 4-node all_reduce falls short and the
    localization names gpu3 from its pairs with two partners, with the measurements behind it."""
    from diagnose.render.render import render

    results = json.loads((RESULTS / "h200x4_localize_gpu3.json").read_text())
    (search,) = results["localization"]
    (accused,) = search["finding"]["accused"]
    assert (accused["kind"], accused["name"]) == ("host", "gpu3") and accused["confidence"] > 0.99
    assert {tuple(m["hosts"]) for m in accused["measurements"]} == {("gpu1", "gpu3"), ("gpu2", "gpu3")}
    straggler = [c for c in results["checks"] if c["id"] == "bench.straggler"]
    assert [(c["host"], c["status"]) for c in straggler] == [("gpu3", "FAIL")]
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results))
    (html,) = render(path, {"html"})
    assert 'id="localization"' in html.read_text()


def test_an_item_answered_only_by_results_that_judged_no_figure_is_not_passed() -> None:
    """A two-host CPU run: the KV transfer over gloo and the memory copy of two hosts without a floor showed
    that they work and judged nothing (``judged: false``); the checklist the owner signs must not read PASS."""
    kv = {
        "id": "infer.kv_transfer",
        "host": None,
        "checklist": "5",
        "status": "PASS",
        "judged": False,
        "message": "gloo on hosts without GPUs: the transfer mechanics work, latency is not judged",
    }
    memcpy = {
        "id": "fleet.memcpy",
        "host": None,
        "checklist": "H",
        "status": "PASS",
        "judged": False,
        "message": "memory copy over 2 hosts: the fleet as a whole is not judged",
    }
    xid = [
        {"id": "gpu.xid", "host": h, "checklist": "H", "status": "PASS", "message": "no Xid"} for h in "ab"
    ]
    items = {i.key: i for s in build_checklist({"checks": [kv, memcpy, *xid]}) for i in s.items}
    by_title = {i.sources[0]: i for i in items.values() if i.sources}
    for check_id in ("infer.kv_transfer", "fleet.memcpy"):
        item = by_title[check_id]
        assert item.status == NOT_COVERED, (check_id, item)
        assert item.note == "shown working, no figure judged (its result in the findings says what was shown)"
    assert by_title["gpu.xid"].status == "PASS"
    judged = {**kv, "judged": True}
    items = {i.key: i for s in build_checklist({"checks": [judged]}) for i in s.items}
    assert [i.status for i in items.values() if i.sources == ["infer.kv_transfer"]] == ["PASS"]
