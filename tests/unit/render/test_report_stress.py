"""The report's GPU stress chapter, built from records the stress judges make of the H100 captures: the
per-GPU table with the failing figure shaded (the figure and a short note; what a column shares is said once,
under it), the stage timings, and the burn-in plotted per host."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from diagnose.render.prometheus import render_prometheus
from diagnose.render.render import render_from_dict
from diagnose.render.view_stress import build_stress
from tests.support.paths import FIXTURES
from tests.support.stress import CPU_2RANKS, H100_ALL, H100_HOG, host_of, judged


def sampled(index: int, phase: str, entry: dict[str, Any]) -> None:
    """What rank 0's sampler read during the gemm and hbm phases on the lent H100 under bf16 load (the
    capture's burn-in: SM 1365 MHz median, ~698 W of its 700 W limit)."""
    if phase.startswith(("gemm.", "hbm.")):
        entry.update(
            {"sm_clock_mhz": 1365.0, "max_sm_clock_mhz": 1980.0, "power_w": 697.7, "power_limit_w": 700.0}
        )


def two_hosts() -> dict[str, Any]:
    hogged = host_of(H100_HOG, "gpu2")
    hogged.foreign = ["GPU 0 (00000000:00:06.0): pid 655 python3, 1 GiB"]
    return judged([host_of(H100_ALL, "gpu1", gpus=2, fault=sampled), hogged])


def test_every_gpu_has_a_row_and_the_slow_figure_is_shaded() -> None:
    view = build_stress(two_hosts())
    assert view is not None
    assert view.labels == [
        "bf16 TFLOP/s",
        "tf32 TFLOP/s",
        "fp8 TFLOP/s",
        "copy GB/s",
        "triad GB/s",
        "memory test",
        "checksum",
        "burn-in MHz",
    ]
    assert [(r.host, r.gpu, r.worst) for r in view.rows] == [
        ("gpu1", "GPU 0", "PASS"),
        ("gpu1", "GPU 1", "PASS"),
        ("gpu2", "GPU 0", "FAIL"),
    ]
    # a cell is the figure, and where it does not pass a short note of how far off it is
    bf16 = view.rows[2].cells[0]
    assert (
        bf16 is not None
        and bf16.text == "311.4"
        and bf16.status == "FAIL"
        and bf16.note == "44 % of ref"
        and bf16.why.startswith("44 % of the H100 SXM reference 711.7 TFLOP/s")
    )
    healthy = view.rows[0].cells[0]
    assert healthy is not None and healthy.text == "711.7" and healthy.note == ""
    assert view.rows[2].cells[5] is None  # the hog run measured gemm and hbm only
    burnin = view.rows[0].cells[7]
    assert burnin is not None and burnin.text == "1320/1365" and burnin.note == ""
    # what the cells of a column share, said once: under its label, and in the table under the figures
    assert view.headers[0] == "ref 711.7 · floor 604.9" and view.headers[7] == "SM min/median"
    (basis,) = [b for b in view.basis if b.label == "bf16 TFLOP/s"]
    assert basis.against == "reference 711.7, floor 604.9, datasheet 989 (information, not judged)"
    assert basis.spread == "44–100 % of the reference; -56.3 to 0.0 % from the median"
    assert basis.readings == "SM clock 1365 MHz; 698 W of 700 W"  # the hog capture had no sampler
    (heat,) = [b for b in view.basis if b.label == "burn-in MHz"]
    assert heat.spread == "max 72 °C, 701 W" and heat.readings == "clock events: sw_power_cap up to 120 s"
    assert [s.host for s in view.stages] == ["gpu1", "gpu2"] and view.stages[0].wall == "1 min 00 s"
    assert [p.host for p in view.burnin] == ["gpu1"] and set(view.burnin[0].series) == {"GPU 0", "GPU 1"}


def test_the_chapter_renders_with_its_burn_in_plot(tmp_path: Path) -> None:
    (written,) = render_from_dict(two_hosts(), {"html"}, tmp_path)
    html = written.read_text()
    assert "GPUs under load: GEMM, HBM, memory test, SDC, burn-in" in html
    assert html.count('<td class="s-host mono">') == 3
    assert 'Burn-in of <span class="mono">gpu1</span>' in html and html.count("<svg") >= 1
    assert "below the floor 604.9 TFLOP/s (15 % under the reference)" in html  # the cell's hover, the finding
    assert '<span class="s-value">311.4</span><span class="s-note">44 % of ref</span>' in html


def test_cpu_hosts_say_their_figures_are_not_judged() -> None:
    view = build_stress(judged([host_of(CPU_2RANKS)]))
    assert view is not None and view.cpu_only and [r.gpu for r in view.rows] == ["rank 0", "rank 1"]
    assert {c.status for r in view.rows for c in r.cells if c is not None} == {"SKIP"}


def test_a_run_without_stress_has_no_chapter() -> None:
    assert build_stress({"stress": []}) is None and build_stress({}) is None


def test_the_real_h100_runs_render_clean_and_hogged(tmp_path: Path) -> None:
    clean = json.loads((FIXTURES / "results" / "h100_stress_clean.json").read_text())
    view = build_stress(clean)
    assert view is not None and [(r.host, r.gpu, r.worst) for r in view.rows] == [
        ("localhost", "GPU 0", "PASS")
    ]
    assert view.rows[0].cells[0] is not None and view.rows[0].cells[0].text == "709.8"
    assert [p.host for p in view.burnin] == ["localhost"] and not view.shared_hosts
    hog = json.loads((FIXTURES / "results" / "h100_stress_hog.json").read_text())
    hogged = build_stress(hog)
    assert hogged is not None and hogged.shared_hosts == ["localhost"] and hogged.rows[0].worst == "FAIL"
    assert hogged.rows[0].shared and not hogged.burnin
    # written before the measured references: the datasheet share it was judged by, as it was
    cell = hogged.rows[0].cells[0]
    assert cell is not None and cell.note == "32 % of peak"
    assert hogged.basis[0].against == "datasheet peak 989"
    (written,) = render_from_dict(hog, {"html"}, tmp_path)
    html = written.read_text()
    assert "Measured beside compute processes diagnose did not start (gpu.processes) on" in html
    assert "below the floor 692.3 TFLOP/s" in html


def test_prometheus_has_each_gpu_figure_of_the_real_runs() -> None:
    clean = render_prometheus(
        json.loads((FIXTURES / "results" / "h100_stress_clean.json").read_text())
    ).decode()
    gpu = 'host="localhost",gpu="0",bus_id="00000000:00:06.0"'
    assert f'diagnose_gpu_gemm_tflops{{{gpu},dtype="bf16"}} 709.808' in clean
    assert f'diagnose_gpu_hbm_gbps{{{gpu},kernel="copy"}} 3014.345' in clean
    assert f"diagnose_gpu_memtest_mismatches{{{gpu}}} 0.0" in clean
    assert f"diagnose_gpu_sdc_agrees{{{gpu}}} 1.0" in clean
    assert f"diagnose_gpu_burnin_min_sm_clock_mhz{{{gpu}}} 1350.0" in clean
    assert f'diagnose_gpu_burnin_clock_event_seconds{{{gpu},reason="sw_power_cap"}} 60.0' in clean
    hog = render_prometheus(json.loads((FIXTURES / "results" / "h100_stress_hog.json").read_text())).decode()
    assert f'diagnose_gpu_stress_status{{{gpu},check="gpu.gemm",metric="gemm.bf16"}} 4.0' in hog


def test_prometheus_has_the_reference_floor_clock_and_power_of_each_figure() -> None:
    text = render_prometheus(two_hosts()).decode()
    gpu = 'host="gpu1",gpu="0",bus_id="00000000:18:00.0"'
    assert f'diagnose_gpu_stress_reference{{{gpu},metric="gemm.bf16"}} 711.7' in text
    assert f'diagnose_gpu_stress_floor{{{gpu},metric="hbm.copy"}} 2564.28' in text
    assert f'diagnose_gpu_stress_sm_clock_mhz{{{gpu},metric="gemm.bf16"}} 1365.0' in text
    assert f'diagnose_gpu_stress_power_watts{{{gpu},metric="hbm.triad"}} 697.7' in text
    assert f'diagnose_gpu_stress_power_limit_watts{{{gpu},metric="gemm.fp8"}} 700.0' in text
    assert 'diagnose_gpu_stress_sm_clock_mhz{host="gpu2"' not in text  # the hog capture had no sampler
