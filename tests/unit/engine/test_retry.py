"""failed.retry: which hosts a run found failing, and the file ``--limit @FILE`` reads back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from diagnose.engine.retry import failed_hosts, write_retry_file

HOSTS = ["n1", "n2", "n3", "n4"]


def _document(**parts: Any) -> dict[str, Any]:
    """A results.json document of four reachable hosts, with the given lists (checks, benchmarks, causes)."""
    hosts = [{"name": name, "address": name, "reachable": True, "error": None} for name in HOSTS]
    return {"schema": 1, "run": {"id": "r"}, "hosts": hosts, "checks": [], "benchmarks": [], **parts}


def _row(status: str, host: str | None, check: str = "gpu.count") -> dict[str, Any]:
    return {"id": check, "host": host, "checklist": "1", "status": status, "message": "m"}


def _cause(status: str, check: str, hosts: list[str]) -> dict[str, Any]:
    return {
        "status": status,
        "check": check,
        "hosts": hosts,
        "message": "m",
        "action": "x",
        "consequences": [],
    }


def test_a_clean_run_failed_nowhere() -> None:
    assert failed_hosts(_document(checks=[_row("PASS", h) for h in HOSTS])) == []


def test_an_unreachable_host_failed() -> None:
    document = _document()
    document["hosts"][2].update(reachable=False, error="timed out")
    assert failed_hosts(document) == ["n3"]


@pytest.mark.parametrize(
    ("status", "failed"), [("FAIL", ["n2"]), ("ERROR", ["n2"]), ("WARN", []), ("SKIP", [])]
)
def test_a_host_with_a_fail_or_error_row_failed_warn_and_skip_do_not(status: str, failed: list[str]) -> None:
    assert failed_hosts(_document(checks=[_row("PASS", "n1"), _row(status, "n2")])) == failed


def test_a_status_this_version_does_not_know_counts_as_error() -> None:
    assert failed_hosts(_document(checks=[_row("BROKEN", "n4")])) == ["n4"]


def test_a_cluster_wide_fail_names_no_host() -> None:
    assert failed_hosts(_document(checks=[_row("FAIL", None, "cluster.driver_consistency")])) == []


def test_hosts_come_in_results_order_each_once() -> None:
    rows = [_row("FAIL", "n4"), _row("ERROR", "n1"), _row("FAIL", "n4", "gpu.ecc")]
    assert failed_hosts(_document(checks=rows)) == ["n1", "n4"]


def test_a_benchmarks_failed_hosts_failed() -> None:
    bench = {"collective": "all_reduce", "hosts": HOSTS, "status": "ERROR", "failed_hosts": ["n3", "n2"]}
    quiet = {"collective": "all_gather", "hosts": HOSTS, "status": "PASS"}
    assert failed_hosts(_document(benchmarks=[bench, quiet])) == ["n2", "n3"]


def test_the_hosts_of_a_failing_cause_failed_those_of_a_warning_do_not() -> None:
    # n1's WARN row is the root of n2's FAIL: a retest after the repair must reach n1 too.
    rows = [_row("WARN", "n1", "gpu.clocks"), _row("FAIL", "n2", "bench.all_reduce"), _row("WARN", "n4")]
    causes = [_cause("FAIL", "gpu.clocks", ["n1"]), _cause("WARN", "gpu.count", ["n4"])]
    assert failed_hosts(_document(checks=rows, causes=causes)) == ["n1", "n2"]


def test_the_retry_file_is_one_failed_host_a_line(tmp_path: Path) -> None:
    document = _document(checks=[_row("FAIL", "n3"), _row("ERROR", "n1")])
    document["hosts"][1]["reachable"] = False
    path = write_retry_file(tmp_path, document)
    assert path == tmp_path / "failed.retry"
    assert path.read_bytes() == b"n1\nn2\nn3\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["failed.retry"]  # no temporary file left behind


def test_the_retry_file_is_empty_when_no_host_failed_and_replaces_an_older_one(tmp_path: Path) -> None:
    (tmp_path / "failed.retry").write_text("n1\n")
    path = write_retry_file(tmp_path, _document(checks=[_row("WARN", "n1")]))
    assert path.read_bytes() == b""
