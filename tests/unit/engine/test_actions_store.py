"""The results store gives every result that is not PASS its action, whichever stage emitted it, and keeps
a PASS row free of one (docs/contracts.md, "Actions")."""

from __future__ import annotations

import json
from pathlib import Path

from diagnose.core.model import ACTIONS, CheckResult
from diagnose.engine.results import ResultsStore


def _row(
    check_id: str, status: str, message: str = "m", host: str | None = "n1", **extra: str
) -> CheckResult:
    return CheckResult(id=check_id, host=host, checklist="3", status=status, message=message, **extra)


def test_every_row_that_is_not_pass_records_an_action_and_a_pass_none(tmp_path: Path) -> None:
    store = ResultsStore(tmp_path / "results.json", {"id": "r"})
    store.add_checks(
        [
            _row("net.port_range", "PASS"),
            _row("net.port_range", "FAIL", host="n2"),  # a catalog check, as declared
            _row("bench.link", "FAIL", host=None),  # a stage's id
            _row("bench.all_reduce", "ERROR", "all_reduce: the launch failed", host=None),  # a family
            _row("gpu.memtest", "WARN"),  # its own WARN action
            _row("ib.port_state", "SKIP", "not judged: no RDMA device; see ib.devices"),
            _row("gpu.burnin", "FAIL", action="reset_gpu"),  # the emitter's own choice wins
            _row(
                "host.reachable", "FAIL", "n3 is unreachable: connection to n3:22 timed out after 10 s", "n3"
            ),
            _row("host.reachable", "ERROR", "internal error: KeyError 'x'", "n4"),
            _row("someone.elses", "FAIL"),  # an id no table names
        ]
    )
    store.finish()
    rows = json.loads((tmp_path / "results.json").read_text())["checks"]
    assert "action" not in rows[0]
    assert [r["action"] for r in rows[1:]] == [
        "check_config",
        "reseat_or_replace_cable",
        "check_config",
        "reset_gpu",
        "none",
        "reset_gpu",
        "reboot",
        "contact_support",
        "contact_support",
    ]
    assert all(r["action"] in ACTIONS for r in rows if r["status"] != "PASS")


def test_a_revised_verdict_gets_the_action_of_its_new_status(tmp_path: Path) -> None:
    store = ResultsStore(tmp_path / "results.json", {"id": "r"})
    store.add_check(_row("ib.link_rate", "FAIL"))
    store.replace_check(_row("ib.link_rate", "PASS"))
    store.add_check(_row("gpu.sdc", "PASS", host="n2"))
    store.replace_check(_row("gpu.sdc", "FAIL", host="n2"))
    rows = store.document()["checks"]
    assert "action" not in rows[0] and rows[1]["action"] == "rma_gpu"


def test_benchmark_entries_carry_the_action_of_their_bench_result(tmp_path: Path) -> None:
    store = ResultsStore(tmp_path / "results.json", {"id": "r"})
    store.add_benchmark({"collective": "all_reduce", "status": "PASS", "message": "ok", "rows": []})
    store.add_benchmark({"collective": "all_gather", "status": "FAIL", "message": "below range", "rows": []})
    store.add_benchmark({"collective": "broadcast", "status": "FAIL", "message": "x", "action": "reboot"})
    benchmarks = json.loads((tmp_path / "results.json").read_text())["benchmarks"]
    assert "action" not in benchmarks[0]
    assert [b["action"] for b in benchmarks[1:]] == ["check_config", "reboot"]


def test_history_findings_take_the_action_of_the_check_they_follow(tmp_path: Path) -> None:
    store = ResultsStore(tmp_path / "results.json", {"id": "r"})
    store.add_checks(
        [
            _row("history.regression", "FAIL", "gpu.memtest on n1 went PASS→FAIL since yesterday: 4 words"),
            _row("history.unstable", "WARN", "ib.port_state on n1 is unstable: failed 3 of the last 7 runs"),
            _row("history.regression", "FAIL", "all_reduce busbw in the large band is 120.0 GB/s, -40%"),
        ]
    )
    rows = store.document()["checks"]
    assert [r["action"] for r in rows] == ["rma_gpu", "reseat_or_replace_cable", "check_config"]


def test_a_regression_takes_the_action_this_run_recorded_for_its_check(tmp_path: Path) -> None:
    store = ResultsStore(tmp_path / "results.json", {"id": "r"})
    store.add_check(
        _row("gpu.xid", "FAIL", "n1 since boot: Xid 79 (GPU has fallen off the bus)", action="reboot")
    )
    store.add_checks(
        [
            _row("history.regression", "FAIL", "gpu.xid on n1 went PASS→FAIL since yesterday: Xid 79"),
            _row("history.regression", "FAIL", "gpu.xid on n2 went PASS→FAIL since yesterday", host="n2"),
        ]
    )
    rows = store.document()["checks"]
    assert [r["action"] for r in rows[1:]] == ["reboot", "reset_gpu"]  # n2's row is absent: as declared
