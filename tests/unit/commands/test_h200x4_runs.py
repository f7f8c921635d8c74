"""Real runs on a lent 4× H200 node (tests/fixtures/gpu_runs/h200x4-2026-11-27, README.md there): the healthy
node passes with margin and nothing false, and a foreign matmul loop on GPU 0 is one cause with the results
it spoiled under it. Each check here is made again from the recorded results.json, so a change of the
judges, the causes or the terminal's wording that would have told the operator otherwise fails it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from diagnose.commands.run import summary_lines
from diagnose.render.causes import causes_json
from diagnose.render.render import render
from tests.support.terminal import agrees_with_capture

CAPTURED = Path(__file__).resolve().parents[2] / "fixtures" / "gpu_runs" / "h200x4-2026-11-27"
METRIC = {"matmul bf16": "gemm.bf16", "matmul tf32": "gemm.tf32", "_scaled_mm fp8": "gemm.fp8"}


def _load(name: str) -> dict[str, Any]:
    return json.loads((CAPTURED / name).read_text())


def _printed(name: str) -> list[str]:
    """The captured lines; they predate the verdict line's counted host ("1 host(s)" then, "1 host" now)."""
    return (CAPTURED / name).read_text().replace(" 1 host(s), ", " 1 host, ").splitlines()


def _summary(document: dict[str, Any], folder: str) -> list[str]:
    out = Path(folder)
    return summary_lines(document, out, [out / n for n in ("results.json", "report.html", "junit.xml")])


def _plain_loop() -> dict[tuple[int, str], float]:
    """bench/gemm_baseline.py's medians per GPU, run on the same four GPUs right after the healthy run."""
    figures, gpu = {}, -1
    for line in (CAPTURED / "plain_loop.txt").read_text().splitlines():
        if line.startswith("-- GPU "):
            gpu = int(line.split()[2])
        for label, metric in METRIC.items():
            if line.startswith(label):
                figures[(gpu, metric)] = float(re.split(r"\s{2,}", line.strip())[1])
    return figures


def test_the_healthy_node_passes_with_nothing_false_and_prints_no_cause() -> None:
    document = _load("healthy_results.json")
    assert document["verdict"] == "PASS" and document["causes"] == [] == causes_json(document)
    assert not [c["id"] for c in document["checks"] if c["status"] in ("FAIL", "WARN", "ERROR")]
    assert _summary(document, "/tmp/r/healthy") == _printed("healthy_terminal.txt")


def test_every_gpu_clears_its_floor_with_margin_and_the_stress_gemm_agrees_with_a_plain_loop() -> None:
    plain = _plain_loop()
    gemm = [r for r in _load("healthy_results.json")["stress"] if r.get("check") == "gpu.gemm"]
    assert len(gemm) == 12  # 4 GPUs × bf16, tf32, fp8
    for record in gemm:
        assert record["verdict"] == "PASS" and record["value"] >= 1.1 * record["floor"], record
        loop = plain[(record["gpu"], record["metric"])]
        assert abs(record["value"] / loop - 1) <= 0.03, (
            record["gpu"],
            record["metric"],
            record["value"],
            loop,
        )
        assert record["power_limit_w"] == 700.0 and 1000 < record["sm_clock_mhz"] <= 1980


def test_the_kv_message_alone_is_within_15_percent_of_a_plain_send_recv_of_the_same_bytes() -> None:
    (pair,) = _load("healthy_results.json")["inference"]
    packed = [r for r in pair["rows"] if r["method"] == "packed"]
    assert [r["tokens"] for r in packed] == [1024, 4096, 16384, 32768]
    for row in packed:
        wire = row["parts"]["wire"]
        assert abs(wire["gbps"] / wire["plain_gbps"] - 1) <= 0.15, row["tokens"]
    assert packed[-1]["parts"]["wire"]["gbps"] > 360  # NV18 between two H200s


def test_a_foreign_matmul_loop_on_gpu0_is_one_cause_with_what_it_spoiled_under_it() -> None:
    document = _load("hog_results.json")
    (cause,) = causes_json(document)
    assert cause["check"] == "gpu.processes" and cause["status"] == "FAIL" and cause["hosts"] == ["localhost"]
    assert [c["id"] for c in cause["consequences"]] == [
        "gpu.gemm",
        "gpu.hbm",
        "infer.kv_transfer",
        "train.overlap",
        "bench.all_reduce",
        "train.tail",
    ]
    assert document["causes"] == [cause]
    assert agrees_with_capture(_summary(document, "/tmp/r/hog"), _printed("hog_terminal.txt"))


def test_the_shared_gpu_alone_is_named_slow_and_its_figures_say_at_what_clock_and_power() -> None:
    gemm = next(c for c in _load("hog_results.json")["checks"] if c["id"] == "gpu.gemm")
    assert gemm["message"].startswith("localhost: GPU 0 (00000000:00:06.0) bf16 ")
    assert "GPU 1" not in gemm["message"].split(" (all:")[0]
    assert re.search(r"at \d+ MHz, \d+ W of 700 W", gemm["message"])


def test_a_disabled_transport_is_one_cause_nccl_env_with_every_slow_measurement_under_it() -> None:
    for name, under in (
        ("p2p", ["infer.kv_transfer", "infer.staging", "train.overlap", "bench.all_reduce", "train.tail"]),
        (
            "socket",
            [
                "infer.kv_transfer",
                "infer.staging",
                "bench.all_reduce",
                "nccl.transport",
                "train.overlap",
                "train.tail",
            ],
        ),
    ):
        document = _load(f"{name}_results.json")
        (cause,) = causes_json(document)
        assert cause["check"] == "nccl.env" and cause["action"] == "check_config", name
        assert [c["id"] for c in cause["consequences"]] == under, name
        assert agrees_with_capture(_summary(document, f"/tmp/r/{name}"), _printed(f"{name}_terminal.txt")), (
            name
        )


def test_nccl_on_sockets_stops_the_sweep_early_with_the_figure_and_the_reason() -> None:
    document = _load("socket_results.json")
    (sweep,) = document["benchmarks"]
    assert sweep["transport"]["intra_node"] == ["NET/Socket"]
    assert sweep["stopped_early"]["after_bytes"] == 128 << 20 and sweep["rows"][-1]["bytes"] == 128 << 20
    bench = next(c for c in document["checks"] if c["id"] == "bench.all_reduce")
    assert bench["status"] == "FAIL" and "stopped early: 3.08 GB/s at 128 MiB" in bench["message"]


def test_sigterm_during_the_kv_probe_stopped_its_ranks_and_left_nothing_running(tmp_path: Path) -> None:
    document = _load("sigterm_results.json")
    assert document["verdict"] == "INCOMPLETE" and document["run"]["interrupted"] is True
    assert document["run"]["stopped"] == ["torchrun (kv0) on localhost: 2 process(es) stopped"]
    assert "not_stopped" not in document["run"]
    assert _printed("sigterm_terminal.txt")[1:] == [
        "diagnose: stopped torchrun (kv0) on localhost: 2 process(es) stopped",
        "diagnose: everything started on the hosts was stopped",
    ]
    # ps found no torchrun, rank or sampler 0 s and 5 s after the exit: only torch's own empty temp folders
    left = [line for line in _printed("sigterm_leftovers.txt") if not line.startswith("leftovers")]
    assert left and all(line.startswith("/tmp/torchelastic_") for line in left)
    (tmp_path / "results.json").write_text(json.dumps(document))
    (html,) = render(tmp_path / "results.json", {"html"})
    assert "stopped: torchrun (kv0) on localhost: 2 process(es) stopped" in html.read_text()


def test_cuda_visible_devices_0_counts_launches_and_judges_one_gpu_and_says_so() -> None:
    document = _load("cvd0_results.json")
    assert document["verdict"] == "PASS" and document["causes"] == []
    checks = {c["id"]: c for c in document["checks"]}
    scope = "1 of 4 GPUs visible (CUDA_VISIBLE_DEVICES=0, NVIDIA_VISIBLE_DEVICES=0,1,2,3); GPUs 1, 2, 3 not in scope"
    assert checks["gpu.topology"]["message"].endswith(scope)
    assert checks["bench.all_reduce"]["status"] == "SKIP" and scope in checks["bench.all_reduce"]["message"]
    gemm = [r for r in document["stress"] if r.get("check") == "gpu.gemm"]
    assert {(r["gpu"], r["bus_id"]) for r in gemm} == {(0, "00000000:00:06.0")}
    assert not [c for c in document["checks"] if c["status"] == "ERROR"]
