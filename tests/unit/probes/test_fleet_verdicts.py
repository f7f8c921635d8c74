"""From the fleet probe's output to checks and results.json records, on what the probe really printed.

The host figures come from the JSON lines ``fleet_probe.py`` printed on the lent 2× H200 machine and on
the 2-core CPU machine (tests/support/fleet.py); a fleet is those lines as sixteen hosts would print them,
one host's figures scaled where a test needs it slow.
"""

from __future__ import annotations

import pytest

from diagnose.benchmarks.setup import Setup
from diagnose.core.hosts import Host
from diagnose.core.model import CheckResult
from diagnose.core.vars import Vars
from diagnose.launchers.base import LaunchOutcome
from diagnose.probes import fleet_judge as fleet
from diagnose.probes.fleet import (
    CHECKS,
    HostFigures,
    busbw_figures,
    copy_figures,
    judge_fleet,
    settings_from,
    single_host,
    skipped_checks,
)
from diagnose.render.checklist import build_checklist
from diagnose.shipped import fleet_probe
from tests.support.fleet import NCCL_2GPU, host, outcome_of, settings


def test_the_captured_h200_probe_gives_each_metric_its_weakest_gpu() -> None:
    figures = host("gpu01")
    assert figures.group == "2× NVIDIA H200"
    assert figures.not_measured == []
    assert set(figures.values) == {"memcpy", "h2d", "d2h", "peer"}
    assert figures.values["h2d"] == min(r["gbps"] for r in figures.detail["h2d"])
    assert 50.0 < figures.values["h2d"] < 60.0, "Gen5 x16 pinned copies"
    assert figures.values["peer"] > 350.0, "NV18 peer copies"
    assert [r["where"] for r in figures.detail["peer"]] == ["GPU 0→1", "GPU 1→0"]
    assert all(r["p2p"] for r in figures.detail["peer"])
    assert figures.errors == {}


def test_the_cpu_probe_says_what_it_could_not_measure() -> None:
    figures = host("cpu01", "cpu_2core_256mib.jsonl")
    assert figures.group == "CPU host"
    assert set(figures.values) == {"memcpy"}
    assert "h2d, d2h: no GPU (CPU host)" in figures.not_measured


def test_expected_rows_match_what_the_probe_printed() -> None:
    printed = [(r["collective"], r["bytes"]) for r in outcome_of("h200x2_256mib.jsonl").rows]
    assert printed == fleet_probe.expected_rows(2, 256 << 20, "cuda")


def test_a_hung_probe_keeps_its_rows_and_is_an_error_for_its_checks() -> None:
    figures = HostFigures("gpu09")
    copy_figures(figures, outcome_of("h200x2_256mib_busids.jsonl", status="hung"))
    assert figures.values, "rows measured before the hang are kept"
    assert set(figures.errors) == {"fleet.h2d", "fleet.nvlink", "fleet.memcpy"}
    assert "the probe hung" in figures.errors["fleet.h2d"]


def test_busbw_at_the_largest_size_and_wrong_results_refused() -> None:
    rows = [
        {"event": "row", "collective": "all_reduce", "bytes": 1 << 28, "busbw_gbps": 300.1, "wrong": 0},
        {"event": "row", "collective": "all_reduce", "bytes": 1 << 30, "busbw_gbps": 330.5, "wrong": 0},
    ]
    figures = HostFigures("gpu01")
    busbw_figures(figures, LaunchOutcome("done", "", rows=rows), ["all_reduce"])
    assert figures.values == {"busbw.all_reduce": 330.5}
    rows[1]["wrong"] = 12
    figures = HostFigures("gpu02")
    busbw_figures(figures, LaunchOutcome("done", "", rows=rows), ["all_reduce"])
    assert "wrong results in all_reduce" in figures.errors["fleet.busbw"]


def test_a_slow_pcie_host_among_sixteen_is_one_fail_with_its_numbers() -> None:
    hosts = [host(f"gpu{i:02d}") for i in range(1, 17)]
    hosts[6] = host("gpu07", h2d=0.9)
    judgement = judge_fleet(hosts, settings(min_host_copy_gbps=40), {})
    h2d = [c for c in judgement.checks if c.id == "fleet.h2d"]
    (odd,) = [c for c in h2d if c.host is not None]
    assert odd.host == "gpu07" and odd.status == "FAIL" and odd.checklist == "H"
    assert "host→device copy" in odd.message and "GPU" in odd.message and "-10.0 %" in odd.message
    assert odd.observed[0]["metric"] == "h2d" and odd.observed[0]["deviation_pct"] == pytest.approx(-10.0)
    (summary,) = [c for c in h2d if c.host is None]
    assert summary.status == "PASS" and "median clears the profile floor 40.0 GB/s" in summary.message
    nvlink = [c for c in judgement.checks if c.id == "fleet.nvlink"]
    assert [c.host for c in nvlink] == [None], "peer copies are alike: only the summary line"
    record = next(r for r in judgement.records if r["host"] == "gpu07" and r["metric"] == "h2d")
    assert record["verdict"] == "FAIL" and record["check"] == "fleet.h2d"
    assert record["deviation_pct"] == pytest.approx(-10.0) and record["robust_z"] < -3.5
    assert record["median"] == pytest.approx(hosts[0].values["h2d"])
    assert len(record["detail"]) == 2
    summaries = [r for r in judgement.records if r["host"] is None]
    assert {r["metric"] for r in summaries} == {"memcpy", "h2d", "d2h", "peer"}


def test_a_fleet_below_the_profile_floor_is_one_cluster_fail() -> None:
    hosts = [host(f"gpu{i:02d}") for i in range(1, 9)]
    judgement = judge_fleet(hosts, settings(min_peer_copy_gbps=450), {})
    nvlink = [c for c in judgement.checks if c.id == "fleet.nvlink"]
    (only,) = nvlink
    assert only.host is None and only.status == "FAIL"
    assert "cluster-wide shortfall" in only.message and only.remediation


def test_hosts_of_other_gpus_are_judged_among_their_own() -> None:
    h200 = [host(f"gpu{i:02d}") for i in range(1, 9)]
    cpu = [host(f"cpu{i:02d}", "cpu_2core_256mib.jsonl") for i in range(1, 5)]
    judgement = judge_fleet(h200 + cpu, settings(), {})
    memcpy = [r for r in judgement.records if r["metric"] == "memcpy" and r["host"] is None]
    assert sorted((r["group"], r["hosts"]) for r in memcpy) == [("2× NVIDIA H200", 8), ("CPU host", 4)]
    assert not [c for c in judgement.checks if c.host is not None], "no host is odd within its own group"


def test_a_host_the_probe_could_not_measure_is_an_error_not_a_silent_gap() -> None:
    hosts = [host(f"gpu{i:02d}") for i in range(1, 6)]
    broken = HostFigures("gpu06", errors=dict.fromkeys(CHECKS, "torch cannot be imported"))
    judgement = judge_fleet([*hosts, broken], settings(), {"fleet.busbw": "not measured: test"})
    errors = [c for c in judgement.checks if c.status == "ERROR"]
    assert {(c.id, c.host) for c in errors} == {
        ("fleet.h2d", "gpu06"),
        ("fleet.nvlink", "gpu06"),
        ("fleet.memcpy", "gpu06"),
    }
    busbw = [c for c in judgement.checks if c.id == "fleet.busbw"]
    assert [(c.host, c.status) for c in busbw] == [(None, "SKIP")]


def test_one_host_records_its_figures_and_skips_every_check() -> None:
    judgement = single_host(host("gpu01"), {})
    assert {c.status for c in judgement.checks} == {"SKIP"}
    h2d = next(c for c in judgement.checks if c.id == "fleet.h2d")
    assert (
        "no fleet to judge it against" in h2d.message
        and "recorded host→device copy 55.3 GB/s, device→host copy 55.3 GB/s" in h2d.message
    )
    assert {r["verdict"] for r in judgement.records} == {"SKIP"}
    assert {r["metric"] for r in judgement.records} == {"memcpy", "h2d", "d2h", "peer"}


def test_what_a_setup_cannot_measure() -> None:
    gloo = Setup("gloo", 1, [Host("a"), Host("b")], [])
    skipped = skipped_checks(gloo, ["all_reduce"])
    assert set(skipped) == {"fleet.busbw", "fleet.h2d", "fleet.nvlink"}
    assert "one rank per host" in skipped["fleet.busbw"]
    assert skipped_checks(Setup("gloo", 2, [], []), ["all_reduce"]).keys() == {"fleet.h2d", "fleet.nvlink"}
    one_gpu = skipped_checks(Setup("nccl", 1, [], []), ["all_reduce"])
    assert one_gpu["fleet.nvlink"] == "not measured: one GPU per host, no GPU pair"
    assert skipped_checks(NCCL_2GPU, ["all_reduce"]) == {}


def test_thresholds_and_floors_come_from_the_profile_variables() -> None:
    chosen = settings(fleet_mad_k=5, fleet_min_rel_dev_pct=2, min_host_copy_gbps=45, bench_tolerance=0.1)
    assert chosen.thresholds == fleet.Thresholds(mad_k=5.0, min_rel_dev_pct=2.0)
    assert chosen.floors["h2d"] == chosen.floors["d2h"] == 45.0
    assert chosen.floors["busbw.all_reduce"] == pytest.approx(306.0)
    assert chosen.floors["peer"] is None and chosen.floors["memcpy"] is None
    gloo = settings_from(Vars({"nvlink_busbw_gbps": 340}), Setup("gloo", 2, [], []), ["all_reduce"])
    assert gloo.floors["busbw.all_reduce"] is None, "gloo busbw says nothing about a GPU fabric"


def test_what_a_host_could_not_measure_is_said_in_the_fleet_line() -> None:
    hosts = [host(f"gpu{i:02d}") for i in range(1, 6)]
    lone = host("gpu06")
    lone.values.pop("peer")
    lone.detail.pop("peer")
    lone.not_measured.append("peer: one GPU, no pair")
    judgement = judge_fleet([*hosts, lone], settings(), {})
    (nvlink,) = [c for c in judgement.checks if c.id == "fleet.nvlink"]
    assert nvlink.status == "PASS" and nvlink.message.endswith(
        "; not measured on gpu06 (peer: one GPU, no pair)"
    )
    (h2d,) = [c for c in judgement.checks if c.id == "fleet.h2d"]
    assert "not measured" not in h2d.message
    alone = single_host(host("cpu01", "cpu_2core_256mib.jsonl"), {})
    (memcpy,) = [c for c in alone.checks if c.id == "fleet.memcpy"]
    assert "recorded memory copy" in memcpy.message
    (h2d_alone,) = [c for c in alone.checks if c.id == "fleet.h2d"]
    assert h2d_alone.message == "one host, and not measured there: h2d, d2h: no GPU (CPU host)"


def test_two_cpu_hosts_show_their_copy_gap_without_judging_it() -> None:
    """Two gloo hosts' copies share cores with everything on the machine: a 30 % gap is jitter there, while
    the same gap between two GPU hosts' figures is worth a warning."""
    pair = [host("cpu01", "cpu_2core_256mib.jsonl"), host("cpu02", "cpu_2core_256mib.jsonl", memcpy=0.7)]
    judged = judge_fleet(pair, settings(), {})
    assert [c.status for c in judged.checks if c.id == "fleet.memcpy"] == ["WARN"]
    shown = judge_fleet(pair, settings(), {}, cpu_only=True)
    (line,) = [c for c in shown.checks if c.id == "fleet.memcpy"]
    assert line.status == "PASS" and line.host is None
    assert "cpu02 is 30.0 % below cpu01" in line.message and "shown, not judged" in line.message


def _checklist_notes(checks: list[CheckResult]) -> dict[str, tuple[str, str]]:
    """The node-health lines of the report's checklist over ``checks``: title → (status, note)."""
    sections = build_checklist({"checks": [c.to_dict() for c in checks]})
    (health,) = [s for s in sections if s.number == "H"]
    return {item.title: (item.status, item.note) for item in health.items}


def test_h9_points_to_a_memory_copy_only_where_h10_says_one_was_measured() -> None:
    """A CPU host without torch: fleet.memcpy could not be measured, so fleet.h2d's SKIP (checklist H.9)
    must not say a memory copy was measured instead, as it did whatever the copy probe did."""
    gloo = skipped_checks(Setup("gloo", 1, [Host("cpu01")], []), ["all_reduce"])
    no_torch = HostFigures("cpu01", errors=dict.fromkeys(CHECKS, "torch is not installed on cpu01"))
    for judgement in (
        single_host(no_torch, gloo),
        judge_fleet([no_torch, HostFigures("cpu02", errors=no_torch.errors)], settings(), gloo),
    ):
        memcpy = [c.message for c in judgement.checks if c.id == "fleet.memcpy"]
        said = ("not measured", "could not be measured", "no host measured it")
        assert all(any(words in m for words in said) for m in memcpy), memcpy
        notes = _checklist_notes(judgement.checks)
        h2d = notes["Host↔GPU copy bandwidth in line with the fleet"]
        assert h2d == ("SKIP", "not measured: no GPU on these hosts (gloo backend)")
    measured = single_host(host("cpu01", "cpu_2core_256mib.jsonl"), gloo)
    notes = _checklist_notes(measured.checks)
    assert notes["Host↔GPU copy bandwidth in line with the fleet"][1].endswith(
        "; memory copy measured instead"
    )
    assert "recorded memory copy" in notes["Host memory copy bandwidth in line with the fleet"][1]


def test_a_host_whose_own_row_says_not_measured_is_quoted_in_no_fleet_line() -> None:
    """The copy probe of gpu04 hung after printing its rows: its rows are ERROR 'not measured on gpu04', so
    its partial figures (the slowest of the fleet here) are neither judged nor quoted in the cluster line."""
    hosts = [host(f"gpu0{i}") for i in range(1, 4)]
    hung = HostFigures("gpu04")
    copy_figures(hung, outcome_of("h200x2_256mib_busids.jsonl", {"memcpy": 0.5, "h2d": 0.5}, status="hung"))
    judgement = judge_fleet([*hosts, hung], settings(), {"fleet.busbw": "not measured: test"})
    own = [c for c in judgement.checks if c.host == "gpu04"]
    assert {(c.id, c.status) for c in own} == {
        (i, "ERROR") for i in ("fleet.h2d", "fleet.nvlink", "fleet.memcpy")
    }
    assert all("not measured on gpu04" in c.message for c in own)
    lines = [c for c in judgement.checks if c.host is None and c.id != "fleet.busbw"]
    assert len(lines) == 3 and all("gpu04" not in c.message and "over 3 hosts" in c.message for c in lines)
    assert not [r for r in judgement.records if r["host"] == "gpu04"]
    assert {r["hosts"] for r in judgement.records if r["host"] is None} == {3}
