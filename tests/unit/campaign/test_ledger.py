"""The ledger over several runs: a failure with its cause, a repair and the retest, a replaced part voiding
evidence, a watch-list entry, an exclusion, the cluster's reference. Each test records real results documents
into a real history database and asserts what ``campaign status`` would say."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from diagnose.campaign import ledger, marks
from diagnose.campaign import phases as ph
from diagnose.campaign.plan import plan
from diagnose.campaign.standing import standing, status_lines
from diagnose.core.errors import ConfigError
from tests.unit.campaign.docs import allreduce, burnin, document, gemm, identity, row

NEEDS = ph.Needs((ph.HOST, ph.STRESS, ph.COLLECTIVE), (ph.FULL_SCALE,))
T1, T2, T3, T4 = (f"2026-11-2{d}T10:00:00+00:00" for d in (5, 6, 7, 8))


def first_pass(db: Path) -> None:
    """node1 passes everything; node2's GPU is held by a foreign process (gpu.processes FAIL)."""
    hosts = {"node1": identity("S1"), "node2": identity("S2")}
    checks = [
        row("gpu.processes", "node2", "FAIL", "node2: GPU 0 busy with pid 4242 (python)", "check_user_app"),
        row("gpu.gemm", "node1"),
        row("gpu.gemm", "node2"),
    ]
    ledger.record_run(db, "acc", document("r1", T1, hosts, checks, [allreduce(["node1", "node2"])]), NEEDS)


def state(db: Path):
    return standing(ledger.load(db, "acc"))


def test_a_failed_host_is_named_with_its_cause_and_its_partner_keeps_what_it_proved_alone(
    tmp_path: Path,
) -> None:
    """node1 passed its own phases; the collective it ran with node2 stood beside node2's fault, so it
    proves nothing for node1 either: node1 waits for a collective, node2 is failed with its cause."""
    db = tmp_path / "h.sqlite3"
    first_pass(db)
    now = {h.host: h for h in state(db).hosts}
    assert now["node1"].state == "pending" and now["node1"].missing == (ph.COLLECTIVE,)
    assert now["node2"].state == "failed"
    assert now["node2"].cause == "host checks: node2: GPU 0 busy with pid 4242 (python)"
    assert now["node2"].action == "check_user_app"
    assert now["node2"].failed_run == "r1"
    lines = status_lines(state(db))
    assert lines[0].startswith("campaign acc: NOT ACCEPTED — 0 of 2 hosts accepted, 1 pending, 1 failed")
    assert any("node2" in line and "failed" in line and "pid 4242" in line for line in lines)


def test_a_repaired_host_is_retested_alone_then_the_full_scale_collective_completes_both(
    tmp_path: Path,
) -> None:
    db = tmp_path / "h.sqlite3"
    first_pass(db)
    marks.repaired(db, "acc", "node2", "killed the stray job", "ops")
    assert {h.host: h.state for h in state(db).hosts}["node2"] == "repaired"
    steps = plan(state(db))
    assert steps[0].hosts == ("node2",)
    assert steps[0].why == "retest repaired"
    assert ph.COLLECTIVE not in steps[0].phases  # one host cannot prove a cross-node collective
    retest = document(
        "r2", T2, {"node2": identity("S2")}, [row("gpu.processes", "node2"), row("gpu.gemm", "node2")]
    )
    recorded = ledger.record_run(db, "acc", retest, NEEDS)
    assert [e.kind for e in recorded.events] == ["retested"]
    now = state(db)
    assert {h.host: (h.state, h.missing) for h in now.hosts} == {
        "node1": ("pending", (ph.COLLECTIVE,)),
        "node2": ("pending", (ph.COLLECTIVE,)),
    }
    steps = plan(now, done={"node2"})
    assert [(s.why, s.hosts, s.phases) for s in steps] == [
        ("full scale", ("node1", "node2"), (ph.HOST, ph.COLLECTIVE))
    ]
    both = {"node1": identity("S1"), "node2": identity("S2")}
    full = document("r3", T3, both, [], [allreduce(["node1", "node2"])])
    ledger.record_run(db, "acc", full, NEEDS)
    assert state(db).verdict == "ACCEPTED"


def test_a_replaced_gpu_voids_that_hosts_gpu_evidence_and_says_which_event(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite3"
    hosts = {"node1": identity("S1"), "node2": identity("S2")}
    checks = [row("gpu.gemm", "node1"), row("gpu.gemm", "node2")]
    ledger.record_run(db, "acc", document("r1", T1, hosts, checks, [allreduce(["node1", "node2"])]), NEEDS)
    assert state(db).verdict == "ACCEPTED"
    swapped = document("r2", T2, {"node2": identity("S9")}, [row("perftest.none", "node2", "SKIP")])
    recorded = ledger.record_run(db, "acc", swapped, NEEDS)
    assert [(e.kind, e.text) for e in recorded.events] == [("replaced", "GPU 00000000:18:00.0: S2 → S9")]
    now = {h.host: h for h in state(db).hosts}
    assert now["node1"].state == "accepted"
    assert now["node2"].state == "pending"
    assert set(now["node2"].missing) == {ph.STRESS, ph.COLLECTIVE}
    assert now["node2"].voided[ph.STRESS].startswith("GPU 00000000:18:00.0: S2 → S9 (run r2")
    cluster = {c.phase: c for c in state(db).cluster}
    assert not cluster[ph.FULL_SCALE].satisfied  # node2 was in it with its old GPU


def test_a_new_driver_voids_every_phase_and_an_unread_part_voids_nothing(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite3"
    hosts = {"node1": identity("S1"), "node2": identity("S2")}
    checks = [row("gpu.gemm", "node1"), row("gpu.gemm", "node2")]
    ledger.record_run(db, "acc", document("r1", T1, hosts, checks, [allreduce(["node1", "node2"])]), NEEDS)
    unread = {"gpus": {}, "hcas": {}, "cables": {}, "firmware": {}, "driver": None, "nccl": None}
    ledger.record_run(db, "acc", document("r2", T2, {"node1": unread}, []), NEEDS)
    assert {h.host: h.state for h in state(db).hosts}["node1"] == "accepted"
    ledger.record_run(db, "acc", document("r3", T3, {"node1": identity("S1", driver="590.2")}, []), NEEDS)
    node1 = {h.host: h for h in state(db).hosts}["node1"]
    assert node1.state == "pending"
    assert set(node1.missing) == {ph.STRESS, ph.COLLECTIVE}  # r3's host checks passed: the host phase stands


def test_the_watch_list_naming_a_gpu_voids_its_hosts_gpu_phases(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite3"
    hosts = {"node1": identity("S1"), "node2": identity("S2")}
    checks = [row("gpu.gemm", "node1"), row("gpu.gemm", "node2")]
    ledger.record_run(db, "acc", document("r1", T1, hosts, checks, [allreduce(["node1", "node2"])]), NEEDS)
    watch = row("history.watch", "node1", "WARN")
    watch["observed"] = {"component": "gpu:S1"}
    recorded = ledger.record_run(db, "acc", document("r2", T2, {"node1": identity("S1")}, [watch]), NEEDS)
    assert [e.kind for e in recorded.events] == ["watch"]
    node1 = {h.host: h for h in state(db).hosts}["node1"]
    assert node1.state == "pending" and ph.STRESS in node1.missing


def test_a_later_gpu_failure_voids_the_hosts_other_gpu_passes(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite3"
    hosts = {"node1": identity("S1"), "node2": identity("S2")}
    checks = [row("gpu.gemm", "node1"), row("gpu.gemm", "node2")]
    ledger.record_run(db, "acc", document("r1", T1, hosts, checks, [allreduce(["node1", "node2"])]), NEEDS)
    xid = row("gpu.xid", "node1", "FAIL", "Xid 79: GPU fell off the bus", "rma_gpu")
    ledger.record_run(db, "acc", document("r2", T2, {"node1": identity("S1")}, [xid]), NEEDS)
    book = ledger.load(db, "acc")
    assert book.rows["node1"][ph.STRESS].voided is not None
    assert book.rows["node1"][ph.HOST].verdict == "FAIL"
    node1 = {h.host: h for h in standing(book).hosts}["node1"]
    assert node1.state == "failed" and node1.action == "rma_gpu"


def test_recording_a_run_twice_changes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite3"
    first_pass(db)
    events = sqlite3.connect(db).execute("SELECT COUNT(*) FROM campaign_events").fetchone()[0]
    first_pass(db)
    assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM campaign_events").fetchone()[0] == events
    assert ledger.load(db, "acc").runs == 1


def test_an_excluded_host_is_counted_apart_with_its_reason_and_the_rest_can_be_accepted(
    tmp_path: Path,
) -> None:
    db = tmp_path / "h.sqlite3"
    first_pass(db)
    marks.exclude(db, "acc", "node2", "PSU RMA pending", "ops")
    now = state(db)
    assert now.counts == {"hosts": 2, "accepted": 1, "pending": 0, "failed": 0, "repaired": 0, "excluded": 1}
    assert now.verdict == "ACCEPTED"
    with pytest.raises(ConfigError, match="must say why"):
        marks.exclude(db, "acc", "node1", " ", "ops")
    with pytest.raises(ConfigError, match="no host 'node9'"):
        marks.exclude(db, "acc", "node9", "gone", "ops")


def test_an_unknown_campaign_is_refused_naming_the_known_ones(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite3"
    first_pass(db)
    with pytest.raises(ConfigError, match=r"no campaign .acx.*campaigns here: acc"):
        ledger.load(db, "acx")


def test_burnin_hours_add_up_per_gpu_and_restart_with_a_new_serial(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite3"
    for run_id, started, serial in (("r1", T1, "S1"), ("r2", T2, "S1"), ("r3", T3, "S7")):
        doc = document(run_id, started, {"node1": identity(serial)}, stress=[burnin("node1", 30)])
        ledger.record_run(db, "acc", doc, NEEDS)
        hours = ledger.load(db, "acc", full=True).burnin["node1"]["00000000:18:00.0"]
        assert hours == {"r1": 0.5, "r2": 1.0, "r3": 0.5}[run_id]


def test_the_clusters_reference_is_the_median_once_enough_hosts_gave_a_figure(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite3"
    hosts = {f"node{i}": identity(f"S{i}") for i in (1, 2, 3)}
    ledger.record_run(db, "acc", document("r0", T1, hosts), NEEDS)  # the campaign knows three hosts
    one = document("r1", T1, {"node1": hosts["node1"]}, stress=[gemm("node1", 690.0)])
    ledger.record_run(db, "acc", one, NEEDS)
    assert ledger.reference(db, "acc") == []  # one host of three is no reference
    two = document(
        "r2",
        T2,
        {"node2": hosts["node2"], "node3": hosts["node3"]},
        stress=[gemm("node2", 700.0), gemm("node3", 710.0)],
        benchmarks=[allreduce(["node2", "node3"], busbw=42.5)],
    )
    recorded = ledger.record_run(db, "acc", two, NEEDS)
    found = {r["key"]: r for r in ledger.reference(db, "acc")}
    assert found["gemm.bf16|NVIDIA H200"]["value"] == 700.0
    assert found["gemm.bf16|NVIDIA H200"]["hosts"] == 3 and found["gemm.bf16|NVIDIA H200"]["run_id"] == "r2"
    assert "busbw|all_reduce|2" not in found  # two of three hosts ran it
    assert any(e.kind == "reference" for e in recorded.events)


def test_a_campaign_of_one_run_says_one_run(tmp_path: Path) -> None:
    """Counts read as sentences: a campaign of one run read "1 runs"."""
    db = tmp_path / "h.sqlite3"
    first_pass(db)
    head = status_lines(state(db))[0]
    assert "; 1 run from 2026-11-25T10:00 to 2026-11-25T10:00" in head, head
