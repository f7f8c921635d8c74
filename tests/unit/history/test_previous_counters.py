"""What a nightly run takes from the previous run of its series for ib.flaps: its start and ib.counters' values.

The counters are the values of the sysfs capture the test bed uses (ib_counters/h100_gpud_sysfs_testdata.txt's
mlx5_0 port: symbol_error 0 there); the host-stage result holds one snapshot, the after-benchmark result a
snapshot and the change, and the later result is the one taken.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from diagnose import history
from diagnose.core.hosts import Host
from diagnose.core.vars import Vars
from diagnose.engine.run import Run
from tests.support.nightly import make_results, night, record

BEFORE = {"mlx5_0 port 1": {"symbol_error": 0, "link_downed": 0, "port_rcv_errors": 14}}
AFTER = {"mlx5_0 port 1": {"symbol_error": 3, "link_downed": 0, "port_rcv_errors": 14}}


def _counters(host: str, observed: Any) -> dict[str, Any]:
    return {
        "id": "ib.counters",
        "host": host,
        "checklist": "H",
        "status": "PASS",
        "observed": observed,
        "expected": None,
        "message": "",
        "remediation": None,
        "evidence": None,
    }


def test_previous_run_start_and_last_counters_per_host(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite3"
    first = make_results("run-1", night(0))
    first["checks"] += [
        _counters("node01", BEFORE),
        _counters("node01", {"after": AFTER, "delta": {"mlx5_0 port 1": {"symbol_error": 3}}}),
        _counters("node02", None),
    ]
    record(db, first, tmp_path)
    current = make_results("run-2", night(1))["run"]
    found = history.previous_check_observed(db, current, "ib.counters")
    assert found is not None
    started, observed = found
    assert started == "2026-11-18T02:00:00+00:00"
    assert observed == {"node01": {"after": AFTER, "delta": {"mlx5_0 port 1": {"symbol_error": 3}}}}


def test_no_previous_run_or_no_database(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite3"
    current = make_results("run-1", night(0))["run"]
    assert history.previous_check_observed(db, current, "ib.counters") is None
    record(db, make_results("run-1", night(0)), tmp_path)
    assert history.previous_check_observed(db, current, "ib.counters") is None
    other_series = make_results("run-2", night(1), playbook="acceptance")["run"]
    assert history.previous_check_observed(db, other_series, "ib.counters") is None


def test_the_nightly_hands_ib_flaps_the_previous_run_and_its_counters(tmp_path: Path) -> None:
    """Run's nightly step sets flap_since (and xid_since) to the previous run's start and
    ib_counters_before to that run's last ib.counters snapshot of the host; values the inventory set stay."""
    db = tmp_path / "history.sqlite3"
    first = make_results("run-1", night(0))
    first["checks"] += [_counters("node01", {"after": AFTER, "delta": {}}), _counters("node02", BEFORE)]
    record(db, first, tmp_path)
    hosts = [
        Host("node01", vars=Vars({}, host="node01")),
        Host("node02", vars=Vars({"flap_since": "2026-11-18T12:00:00Z"}, host="node02")),
    ]
    runner = SimpleNamespace(request=SimpleNamespace(hosts=hosts))
    Run._nightly_xid_window(runner, db, make_results("run-2", night(1))["run"])  # type: ignore[arg-type]
    one, two = (h.vars for h in hosts)
    assert one.str("flap_since") == one.str("xid_since") == "2026-11-18T02:00:00+00:00"
    assert one.get("ib_counters_before") == {"at": "2026-11-18T02:00:00+00:00", "ports": AFTER}
    assert two.str("flap_since") == "2026-11-18T12:00:00Z"
    assert two.get("ib_counters_before") == {"at": "2026-11-18T02:00:00+00:00", "ports": BEFORE}
