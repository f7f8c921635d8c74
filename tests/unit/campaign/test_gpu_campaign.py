"""The campaign on a lent 2x H200 split into two hosts (tests/fixtures/gpu_runs/h200x2-campaign-2026-11-28,
recorded with tests/support/gpu_campaign.sh), rebuilt with today's code from the runs' raw results: each
results.json is recorded into a fresh ledger in the order the device ran them, and what the campaign says
after each is asserted. Where today's plan is compared with what the device ran (the phases each step of
``campaign next`` was cut to), the recorded phases are the runs' own headers, not a verdict."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from diagnose.benchmarks.expect import expected_busbw, large_message_busbw
from diagnose.campaign import ledger, marks
from diagnose.campaign import phases as ph
from diagnose.campaign.certificate import build
from diagnose.campaign.plan import plan
from diagnose.campaign.reference import reference_vars
from diagnose.campaign.standing import standing
from diagnose.core.vars import SOURCES_VARIABLE, Vars
from diagnose.engine.retry import failed_hosts

RUNS = Path(__file__).parents[2] / "fixtures" / "gpu_runs" / "h200x2-campaign-2026-11-28"


def results(name: str) -> dict[str, Any]:
    return json.loads((RUNS / f"{name}_results.json").read_text())


def record(db: Path, name: str) -> ledger.Recorded:
    doc = results(name)
    header = doc["run"]["campaign"]
    return ledger.record_run(db, "gpu", doc, ph.Needs.of(header["needs"]), header["kind"])


def hosts(db: Path) -> dict[str, Any]:
    return {h.host: h for h in standing(ledger.load(db, "gpu")).hosts}


def test_the_first_pass_fails_the_host_whose_gpu_another_job_held(tmp_path: Path) -> None:
    """A bf16 loop started outside both hosts on GPU 1 (node2's): node2 fails its host checks with the cause
    of a busy GPU nobody in the host can see; node1 passed its own phases, but its collective ran beside
    node2's fault, so it waits for one; the run's retry file names node2."""
    db = tmp_path / "h.sqlite3"
    recorded = record(db, "run1")
    now = hosts(db)
    assert now["node2"].state == "failed"
    assert "GPU 1 (00000000:00:07.0) 100 % busy before diagnose started anything" in now["node2"].cause
    assert now["node2"].action == "check_user_app"
    assert (now["node1"].state, now["node1"].missing) == ("pending", (ph.COLLECTIVE,))
    assert failed_hosts(results("run1")) == ["node2"]
    assert {(e.host, e.kind) for e in recorded.events} == {("node2", "failed")}


def test_after_the_repair_next_retests_node2_alone_then_runs_the_full_scale_collective(
    tmp_path: Path,
) -> None:
    """Today's plan is what the device ran: node2 alone with its host checks, stress and burn-in, then
    both hosts with a collective and the training reference; then the campaign is accepted, and its
    certificate holds node2's evidence from the retest."""
    db = tmp_path / "h.sqlite3"
    record(db, "run1")
    marks.repaired(db, "gpu", "node2", "stopped the foreign bf16 loop", "root")
    first = plan(standing(ledger.load(db, "gpu")))[0]
    step1 = results("next_step1")
    assert (first.why, first.hosts) == ("retest repaired", ("node2",))
    assert list(first.phases) == step1["run"]["campaign"]["phases"] == [ph.HOST, ph.STRESS, ph.BURNIN]
    assert [h["name"] for h in step1["hosts"]] == ["node2"]
    assert [e.kind for e in record(db, "next_step1").events if e.host == "node2"] == ["retested", "retested"]

    second = plan(standing(ledger.load(db, "gpu")), done={"node2"})
    step2 = results("next_step2")
    assert (second[0].why, second[0].hosts) == ("full scale", ("node1", "node2"))
    assert list(second[0].phases) == step2["run"]["campaign"]["phases"]
    record(db, "next_step2")
    book = ledger.load(db, "gpu", full=True)
    state = standing(book)
    assert state.verdict == "ACCEPTED"
    assert plan(state) == []
    certificate = build(book, state, "2026-11-28T16:00:00+00:00", "root")
    node2 = {h["name"]: h for h in certificate["hosts"]}["node2"]
    assert node2["evidence"][ph.STRESS]["run_id"] == step1["run"]["id"]
    assert node2["evidence"][ph.COLLECTIVE]["run_id"] == step2["run"]["id"]
    assert (
        node2["identity"]["gpus"]["00000000:00:07.0"] == "1653724050636"
    )  # the board serial nvidia-smi read
    reference = {r["key"]: r for r in certificate["reference"]}
    assert set(reference) >= {"gemm.bf16|NVIDIA H200", "hbm.copy|NVIDIA H200", "busbw|all_reduce|2"}
    busbw, _ = large_message_busbw(step2["benchmarks"][0]["rows"])  # unjudged there: no fabric in the profile
    assert reference["busbw|all_reduce|2"]["value"] == round(busbw, 3)
    assert reference["busbw|all_reduce|2"]["run_id"] == step2["run"]["id"]
    values, sources = reference_vars("gpu", ledger.reference(db, "gpu"))  # what judges the next runs
    later = expected_busbw("all_reduce", 2, 1, Vars({**values, SOURCES_VARIABLE: sources}, host="node1"))
    assert later.expected_gbps == round(busbw, 1)
    assert later.basis.startswith(f"campaign gpu's reference (2 nodes: run {step2['run']['id']}, 2026-11-28)")
    assert certificate["cluster"][ph.FULL_SCALE]["satisfied"]


def test_the_soak_killed_between_its_rounds_lost_no_finished_round(tmp_path: Path) -> None:
    """The controller was SIGKILLed after round 1 and started again: round 2 ran one interval (3.9 min)
    after round 1 and after the kill, once; the rounds' burn-in adds up per GPU with the earlier runs'."""
    db = tmp_path / "h.sqlite3"
    for name in ("run1", "next_step1", "next_step2", "soak_round1", "soak_round2"):
        record(db, name)
    one, two = results("soak_round1")["run"], results("soak_round2")["run"]
    killed = re.search(
        r"\[SIGKILL after 1 finished round\(s\) at (\S+)\]", (RUNS / "soak_a_terminal.txt").read_text()
    )
    assert killed is not None
    at = {k: datetime.fromisoformat(v.replace("Z", "+00:00")) for k, v in (
        ("round1_done", one["finished"]), ("kill", killed.group(1)), ("round2", two["started"])
    )}  # fmt: skip
    assert at["round1_done"] < at["kill"] < at["round2"]
    assert (
        datetime.fromisoformat(two["started"]) - datetime.fromisoformat(one["started"])
    ).total_seconds() >= 3.9 * 60
    assert (one["campaign"]["kind"], two["campaign"]["kind"]) == ("soak round 1", "soak round 2")
    book = ledger.load(db, "gpu", full=True)
    assert book.burnin == {"node1": {"00000000:00:06.0": 1.5 / 60}, "node2": {"00000000:00:07.0": 2.0 / 60}}
    assert standing(book).verdict == "ACCEPTED"
