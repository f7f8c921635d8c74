"""The watch list's wiring (issue 35): identity and readings from real captures, the store (moves,
replacements, pruning, the cap), ``history.watch`` over successive nights, and what each output shows of it:
the nightly line, ``diagnose history --watch``, the Prometheus gauges and the report's chapter."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from checks import gpu_memory
from diagnose import history
from diagnose.core.model import CommandOutput
from diagnose.core.vars import Vars
from diagnose.engine.unattended import summary_line
from diagnose.history import watch_store
from diagnose.history.watch_readings import Reading, readings
from diagnose.parsers.ib_counters import parse_ib_counters
from diagnose.parsers.ibstat import parse_ibstat
from diagnose.parsers.mlxlink import parse_mlxlink
from diagnose.render.html import render_html
from diagnose.render.prometheus import render_prometheus
from diagnose.render.view import build_report
from tests.support.nightly import make_results, night
from tests.support.paths import CAPTURED
from tests.support.watchkit import IBSTAT, SERIAL, gpu_query, gpu_rows, ib_counters, ibstat_of_host, port_guid

H100 = "NVIDIA H100 80GB HBM3"
BUS = "00000000:00:06.0"


def gpu_facts(text: str) -> dict[str, Any]:
    return gpu_memory.parse({"gpu_query": CommandOutput(text, "", 0)}, Vars())


def test_a_gpu_is_its_serial_then_its_uuid_then_its_slot() -> None:
    by_serial = readings({"node1": {"gpu.memory": gpu_facts(gpu_query())}})
    assert {r.component for r in by_serial} == {f"gpu:{SERIAL}"}
    ecc = next(r for r in by_serial if r.metric == "gpu.ecc_corrected_volatile")
    assert (ecc.host, ecc.slot, ecc.model, ecc.value) == ("node1", f"node1 GPU {BUS}", H100, 0.0)
    by_uuid = readings({"node1": {"gpu.memory": gpu_facts(gpu_query(serial="[N/A]"))}})
    assert {r.component for r in by_uuid} == {"gpu:GPU-341dabbe-bc90-01d1-83d5-a67268c99404"}
    composed = (CAPTURED / "hostkit/h100x8_gpu_query_healthy.txt").read_text()  # no serial or UUID column
    by_slot = readings({"node1": {"gpu.memory": gpu_facts(composed)}})
    assert "slot:node1/00000000:18:00.0" in {r.component for r in by_slot}
    # no corrected ECC column: that metric is not read rather than read as zero
    assert "gpu.ecc_corrected_volatile" not in {r.metric for r in by_slot}


def test_a_port_is_its_guid_and_a_cable_its_module_serial() -> None:
    facts = {
        "ib.counters": parse_ib_counters(ib_counters({("mlx5_0", "symbol_error"): 17})),
        "ib.port_state": parse_ibstat((CAPTURED / IBSTAT).read_text()),
        "ib.optics": parse_mlxlink((CAPTURED / "mlxlink/osfp_400g_optic_sichek.txt").read_text()),
    }
    found = {(r.component, r.metric): r for r in readings({"node1": facts})}
    symbols = found[("port:0x58a2e10300a7820e/1", "ib.symbol_error")]
    assert (symbols.value, symbols.model, symbols.slot) == (17.0, "MT4129", "node1 mlx5_0/1")
    heat = found[("cable:CWJH05025502589", "cable.temperature_c")]
    assert (heat.value, heat.limit, heat.model) == (54.0, 75.0, "T-F4GS-BV0")
    ber = found[("cable:CWJH05025502589", "link.effective_ber_log10")]
    assert ber.limit == pytest.approx(-12.0) and ber.value < -200


def test_stress_figures_follow_the_gpu_by_its_bus_id() -> None:
    document = json.loads((Path(CAPTURED).parents[0] / "results/h100_stress_clean.json").read_text())
    facts = {"localhost": {"gpu.memory": gpu_facts(gpu_query())}}
    found = {r.metric: r for r in readings(facts, document["checks"])}
    assert found["gpu.gemm_tflops.bf16"].value == 709.81
    assert found["gpu.gemm_tflops.bf16"].component == f"gpu:{SERIAL}"
    assert found["gpu.hbm_gbps.triad"].value == 3049.02
    assert (found["gpu.burnin_sm_mhz"].value, found["gpu.burnin_temp_c"].value) == (1372.5, 70.0)


def reading(serial: str, host: str, value: float, slot: str | None = None) -> Reading:
    return Reading(
        f"gpu:{serial}", host, slot or f"{host} GPU {BUS}", H100, "gpu.ecc_corrected_volatile", value
    )


def store(db: Path, tmp_path: Path, n: int, now: list[Reading]) -> dict[str, Any]:
    """Night ``n``'s run recorded with ``now`` as its readings."""
    results = make_results(f"run{n:02d}", night(n))
    run_dir = tmp_path / "runs" / results["run"]["id"]
    run_dir.mkdir(parents=True)
    history.record_run(db, results, run_dir)
    history.record_watch(db, results, history.WatchFindings(readings=now))
    return results


def test_a_moved_gpu_keeps_its_series_and_a_new_one_in_its_slot_is_a_replacement(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite3"
    store(db, tmp_path, 0, [reading("A", "node1", 3), reading("B", "node2", 0)])
    tonight = [
        reading("A", "node2", 4, slot="node2 GPU 00000000:2A:00.0"),  # A moved into node2's other slot
        reading("C", "node1", 0),  # in A's old slot, A still here: a swap, no replacement
        reading("D", "node2", 0),  # in B's slot, B gone: B was replaced
    ]
    known = watch_store.identity(db, tonight)
    assert known.moved == (("gpu:A", "node1", "node2"),)
    assert known.replaced == (("gpu:D", "gpu:B", f"node2 GPU {BUS}"),)
    store(db, tmp_path, 1, tonight)
    (past,) = watch_store.load_past(db, [reading("A", "node2", 5)], "run02", 30)
    assert (past.nights, past.values, past.host) == ((1, 2), (3.0, 4.0), "node2")


def test_pruned_runs_take_their_readings_and_the_cap_holds_whatever_the_retention(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "h.sqlite3"
    for n in range(4):
        store(db, tmp_path, n, [reading("A", "node1", n), *([reading("B", "node1", 0)] if n == 0 else [])])
    history.prune(db, make_results("run03", night(3)), keep_runs=2, keep_days=None)
    with sqlite3.connect(db) as conn:
        nights = [r[0] for r in conn.execute("SELECT night FROM watch_readings ORDER BY night")]
        components = [r[0] for r in conn.execute("SELECT component FROM watch_components")]
    # runs 0 and 1 went (run 3 is the last good run and this one; run 2 the newest beyond it): their
    # readings with them, and B, read on night 1 only, is forgotten
    assert nights == [3, 4] and components == ["gpu:A"]
    monkeypatch.setattr(watch_store, "KEEP_NIGHTS", 2)
    store(db, tmp_path, 4, [reading("A", "node1", 9)])
    with sqlite3.connect(db) as conn:
        assert [r[0] for r in conn.execute("SELECT night FROM watch_readings ORDER BY night")] == [4, 5]


def fleet_night(n: int, climbing: str, serials: list[str]) -> dict[str, dict[str, Any]]:
    """Eight one-GPU hosts; ``climbing``'s corrected ECC grows faster every night, the others tick by one
    now and then (a healthy fleet's background), and one of them is reset to zero by a driver reload."""
    hosts = {}
    for index, serial in enumerate(serials):
        if serial == climbing:
            count = 3 * n * (n + 1)
        else:
            count = (n + index) // 3 if not (index == 2 and n == 4) else 0
        hosts[f"node{index}"] = {"gpu.memory": gpu_facts(gpu_query(serial=serial, corrected_volatile=count))}
    return hosts


def test_history_watch_names_the_climbing_gpu_and_every_output_shows_it(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite3"
    serials = [f"17525240225{i:02d}" for i in range(8)]
    climbing = serials[5]
    for n in range(9):
        results = make_results(f"run{n:02d}", night(n))
        found = history.watch(db, results, fleet_night(n, climbing, serials))
        results["checks"] += [dataclasses.asdict(c) for c in found.results]
        results["history"] = {"watch": found.summary}
        run_dir = tmp_path / "runs" / results["run"]["id"]
        run_dir.mkdir(parents=True)
        history.record_run(db, results, run_dir)
        history.record_watch(db, results, found)
        if n < 4:  # five nights before a trend is judged at all
            assert found.results == [], n
    (row,) = [c for c in results["checks"] if c["id"] == history.WATCH_ID]
    assert (row["host"], row["status"], row["action"]) == ("node5", "WARN", "drain_at_next_window")
    assert row["message"].startswith(f"gpu:{climbing} at node5 GPU {BUS} ({H100}) is getting worse: ")
    assert "gpu.ecc_corrected_volatile went from 0 to 216 over 8 nights" in row["message"]
    assert results["history"]["watch"]["components"] == 8

    line = summary_line({**results, "verdict": "PASS"}, [])
    assert line.endswith(f"no regressions, 1 watched (gpu:{climbing} on node5)"), line

    table = history.watch_table(db).splitlines()
    assert table[0] == f"watch list of run run08 ({results['run']['started']}): 1 component watched of 8 read"
    assert table[3].split()[:6] == [f"gpu:{climbing}", "node5", "gpu.ecc_corrected_volatile", "0", "→", "216"]
    assert table[3].split()[-1] == "drain_at_next_window"

    prom = render_prometheus(results).decode().splitlines()
    labels = f'component="gpu:{climbing}",host="node5",metric="gpu.ecc_corrected_volatile"'
    assert f'diagnose_watch_component{{{labels},action="drain_at_next_window"}} 1.0' in prom
    assert 'diagnose_watch_components{state="watched"} 1.0' in prom
    assert any(line.startswith(f"diagnose_watch_slope_per_night{{{labels}}} ") for line in prom)

    html = render_html(build_report(results, tmp_path))
    assert "Watch list: components getting worse night after night" in html
    chapter = html[html.index('class="plot watch"') :]
    assert f"gpu:{climbing}" in chapter and "<svg" in chapter[: chapter.index("</div>")]
    assert "0 → 216 over 8 nights" in chapter and "drain at the next maintenance window" in chapter


def run_nights(tmp_path: Path, nights: int, facts_of: Any) -> tuple[Path, dict[str, Any]]:
    """``nights`` nightly runs, each judged by ``history.watch`` on ``facts_of(n)`` and recorded; the last
    run's results."""
    db = tmp_path / "h.sqlite3"
    for n in range(nights):
        results = make_results(f"run{n:02d}", night(n))
        found = history.watch(db, results, facts_of(n))
        results["checks"] += [dataclasses.asdict(c) for c in found.results]
        results["history"] = {"watch": found.summary}
        run_dir = tmp_path / "runs" / results["run"]["id"]
        run_dir.mkdir(parents=True)
        history.record_run(db, results, run_dir)
        history.record_watch(db, results, found)
    return db, results


ECC_CLIMB = [0, 3, 10, 30, 80, 200, 500, 1200]
SYMBOL_CLIMB = [0, 4, 15, 60, 180, 500, 1200, 2500]


def six_hosts(n: int, steady_port: bool = False) -> dict[str, dict[str, Any]]:
    """Six 8-GPU hosts (48 GPUs, 48 ports; serials and GUIDs of their own): node3's GPU 5 climbs along
    :data:`ECC_CLIMB` and node4's mlx5_4 along :data:`SYMBOL_CLIMB` (or, with ``steady_port``, only that
    port moves: it gains 10 a night); everything else stays where the captures have it."""
    hosts = {}
    for index in range(6):
        counts = [ECC_CLIMB[n] if (index, gpu) == (3, 5) and not steady_port else 0 for gpu in range(8)]
        symbols = 10 * n if steady_port else SYMBOL_CLIMB[n]
        changes = {("mlx5_4", "symbol_error"): symbols} if index == 4 else {}
        hosts[f"node{index}"] = {
            "gpu.memory": gpu_facts(gpu_rows(counts, 1752524022000 + 100 * index)),
            "ib.counters": parse_ib_counters(ib_counters(changes)),
            "ib.port_state": parse_ibstat(ibstat_of_host(index)),
        }
    return hosts


def test_eight_nights_on_six_hosts_name_the_climbing_gpu_and_port(tmp_path: Path) -> None:
    _, results = run_nights(tmp_path, 8, six_hosts)
    watched = {c["observed"]["component"]: c for c in results["checks"] if c["id"] == history.WATCH_ID}
    port = f"port:{port_guid(4, 'mlx5_4')}/1"
    assert set(watched) == {"gpu:1752524022305", port}
    assert "went from 0 to 1200 over 7 nights" in watched["gpu:1752524022305"]["message"]
    assert "its 47 peers stayed flat" in watched["gpu:1752524022305"]["message"]
    assert "ib.symbol_error went from 0 to 2500" in watched[port]["message"]
    assert "deviations" not in watched[port]["message"]


def test_a_port_counting_steadily_is_listed_apart_in_every_output(tmp_path: Path) -> None:
    db, results = run_nights(tmp_path, 16, lambda n: six_hosts(n, steady_port=True))
    port = f"port:{port_guid(4, 'mlx5_4')}/1"
    assert [c for c in results["checks"] if c["id"] == history.WATCH_ID] == []
    (steady,) = results["history"]["watch"]["steady"]
    assert (steady["component"], steady["host"], steady["metric"]) == (port, "node4", "ib.symbol_error")
    assert (steady["rate_per_night"], steady["fleet_steady"], steady["fleet"]) == (10.0, 1, 48)
    assert steady["words"] == "counting steadily: +10 a night for 13 nights; no other of its 48 ports does"

    table = history.watch_table(db).splitlines()
    assert table[0].endswith("0 components watched of 102 read")
    assert table[2] == "counting steadily, not watched: 1 counter"
    assert table[5].split() == [port, "node4", "ib.symbol_error", "+10", "13", "1", "of", "48"]

    prom = render_prometheus(results).decode().splitlines()
    labels = f'component="{port}",host="node4",metric="ib.symbol_error"'
    assert f"diagnose_watch_steady_per_night{{{labels}}} 10.0" in prom
    assert 'diagnose_watch_components{state="steady"} 1.0' in prom

    html = render_html(build_report(results, tmp_path))
    chapter = html[html.index("Counting steadily, not watched") :]
    assert port in chapter and "+10 a night" in chapter and "0 of its 47 peers" in chapter


def test_one_identity_on_two_hosts_the_same_night_is_read_by_host_and_slot(tmp_path: Path) -> None:
    cloned = {
        host: {"gpu.memory": gpu_facts(gpu_query(corrected_volatile=n))} for n, host in enumerate(("a", "b"))
    }
    found = {r.component: r for r in readings(cloned) if r.metric == "gpu.ecc_corrected_volatile"}
    assert {c: (r.value, r.shared) for c, r in found.items()} == {
        f"slot:a/{BUS}": (0.0, f"gpu:{SERIAL}"),
        f"slot:b/{BUS}": (1.0, f"gpu:{SERIAL}"),
    }
    no_serial = {h: {"gpu.memory": gpu_facts(gpu_query(serial="[N/A]"))} for h in ("a", "b")}
    assert {r.component for r in readings(no_serial)} == {f"slot:a/{BUS}", f"slot:b/{BUS}"}
    same_guids = {
        h: {
            "ib.counters": parse_ib_counters(ib_counters({})),
            "ib.port_state": parse_ibstat((CAPTURED / IBSTAT).read_text()),
        }
        for h in ("a", "b")
    }
    ports = {r.component for r in readings(same_guids)}
    assert (
        "slot:a/mlx5_0/1" in ports
        and "slot:b/mlx5_0/1" in ports
        and not any(p.startswith("port:") for p in ports)
    )

    _, results = run_nights(tmp_path, 2, lambda n: cloned)
    (shared,) = results["history"]["watch"]["shared"]
    assert shared == {
        "identity": f"gpu:{SERIAL}",
        "components": [f"slot:a/{BUS}", f"slot:b/{BUS}"],
        "slots": [f"a GPU {BUS}", f"b GPU {BUS}"],
    }
    html = render_html(build_report(results, tmp_path))
    assert f"gpu:{SERIAL} was reported by a GPU {BUS} and b GPU {BUS} the same night" in html
