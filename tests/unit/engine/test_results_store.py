"""results.json is always a complete document, and nothing added is held back for long."""

from __future__ import annotations

import json
from pathlib import Path

from diagnose.core.model import CheckResult
from diagnose.engine.results import ResultsStore, document_json, row_json, verdict_of


def _check(status: str, host: str = "n1") -> CheckResult:
    return CheckResult(id="net.port_range", host=host, checklist="3", status=status, message="m")


def _on_disk(path: Path) -> dict:
    return json.loads(path.read_text())


def test_a_result_added_during_the_quiet_interval_still_reaches_disk(tmp_path: Path) -> None:
    """The store's own timer is driven: joined, not outwaited by a sleep that a slow fsync could outlast."""
    path = tmp_path / "results.json"
    store = ResultsStore(path, {"id": "r"})
    store.add_check(_check("PASS", "a"))
    store.add_check(_check("FAIL", "b"))  # inside the throttle interval
    timer = store._timer
    assert timer is not None, "results added inside the interval are written by a timer"
    assert _on_disk(path)["checks"] == []  # held back: the file is the one written on creation
    timer.join(timeout=30)
    assert not timer.is_alive()
    on_disk = _on_disk(path)
    assert [c["host"] for c in on_disk["checks"]] == ["a", "b"]
    # a run still going says INCOMPLETE: killed outright, this is the file it leaves
    assert on_disk["verdict"] == "INCOMPLETE" and on_disk["schema"] == 1
    assert store.document()["verdict"] == "FAIL", "the run itself sees its verdict so far"
    store.finish(finished="now")
    assert _on_disk(path)["verdict"] == "FAIL"


def test_finish_is_the_last_word(tmp_path: Path) -> None:
    """A flush that took its snapshot before finish but writes after it (the timer's, losing the race) never
    replaces the finished document: the race is driven, not hoped for by a sleep."""
    path = tmp_path / "results.json"
    store = ResultsStore(path, {"id": "r"})
    for i in range(50):
        store.add_check(_check("PASS", f"h{i}"))
    with store._lock:
        stale = store._snapshot_locked()
    store.finish(finished="now")
    store._write(*stale, durable=False)
    on_disk = _on_disk(path)
    assert on_disk["run"]["finished"] == "now" and len(on_disk["checks"]) == 50
    assert "coverage" in on_disk


def test_verdict_order() -> None:
    assert verdict_of([{"status": "PASS"}, {"status": "WARN"}, {"status": "SKIP"}], []) == "PASS"
    assert verdict_of([{"status": "ERROR"}], [{"status": "PASS"}]) == "ERROR"
    assert verdict_of([{"status": "ERROR"}], [{"status": "FAIL"}]) == "FAIL"


def test_the_file_is_the_document_as_json_writes_it(tmp_path: Path) -> None:
    """Rows are encoded once as they arrive; the file must still read exactly as one json.dumps of the
    whole document (indent 1, non-ASCII kept), revised rows and top-level lists included."""
    store = ResultsStore(tmp_path / "results.json", {"id": "r", "argv": ["-e", "x=ü"]})
    store.add_checks(
        [
            CheckResult(
                "gpu.nvlink", "n1", "H", "FAIL", {"0": {"links": [1, 2]}, "empty": {}}, [], "a\nb «c»"
            ),
            CheckResult("net.port_range", None, "3", "PASS", observed=Path("/x")),
        ]
    )
    store.replace_check(CheckResult("gpu.nvlink", "n1", "H", "PASS", message="revised"))
    store.add_record("fleet", {"hosts": []})
    document = store.finish(finished="now")
    text = (tmp_path / "results.json").read_text(encoding="utf-8")
    assert text == json.dumps(document, indent=1, ensure_ascii=False, default=str)
    assert json.loads(text)["checks"][0]["message"] == "revised"


def test_the_finished_document_carries_its_coverage_beside_the_verdict(tmp_path: Path) -> None:
    """Written when the run ends (issue 23): the intermediate writes of a large run skip the count."""
    store = ResultsStore(tmp_path / "results.json", {"id": "r"})
    store.add_checks([_check("PASS", "a"), _check("PASS", "b")])
    skipped = CheckResult("ib.port_state", "a", "1", "SKIP", message="no HCA on a (no /dev/infiniband)")
    store.add_checks([skipped, CheckResult("k8s.shm", "a", "2", "SKIP", message="a is not a Kubernetes pod")])
    store.add_benchmark({"collective": "all_reduce", "status": "SKIP", "message": "one rank in all"})
    assert "coverage" not in json.loads((tmp_path / "results.json").read_text())
    store.finish(finished="now")
    on_disk = json.loads((tmp_path / "results.json").read_text())
    assert on_disk["verdict"] == "PASS"
    assert on_disk["coverage"] == {
        "measured": 2,
        "total": 5,  # the benchmark has no bench.all_reduce row here: it is a result of its own
        "skipped": 3,
        "unjudged": 0,
        "shown": 0,
        "by_reason": {"no fabric": 1, "not a pod": 1, "one rank": 1},
        "counts": {"PASS": 2, "WARN": 0, "FAIL": 0, "ERROR": 0, "SKIP": 3},
        "limited": True,
        "limited_below": 0.5,
    }
    assert list(on_disk)[list(on_disk).index("verdict") + 1] == "coverage"


def test_a_revised_verdict_takes_the_place_of_the_first_row_of_its_check_on_its_host(tmp_path: Path) -> None:
    store = ResultsStore(tmp_path / "results.json", {"id": "r"})
    store.add_checks([_check("PASS", f"h{i}") for i in range(1000)])
    store.add_check(CheckResult("gpu.nvlink", None, "H", "PASS", message="cluster-wide"))
    store.replace_check(_check("FAIL", "h500"))
    store.replace_check(CheckResult("gpu.nvlink", None, "H", "WARN", message="revised"))
    store.replace_check(_check("WARN", "new"))  # no earlier row: added at the end
    document = store.finish(finished="now")
    rows = document["checks"]
    assert len(rows) == 1002
    assert rows[500]["host"] == "h500" and rows[500]["status"] == "FAIL"
    assert rows[1000]["message"] == "revised" and rows[1001]["host"] == "new"
    assert json.loads((tmp_path / "results.json").read_text())["checks"] == rows


def test_results_json_is_written_in_pieces_never_as_one_string(tmp_path: Path) -> None:
    store = ResultsStore(tmp_path / "results.json", {"id": "r"})
    store.add_checks([_check("PASS", f"h{i}") for i in range(2000)])
    document = store.finish(finished="now")
    pieces = list(document_json(document, [row_json(row) for row in document["checks"]]))
    text = "".join(pieces)
    assert text == json.dumps(document, indent=1, ensure_ascii=False, default=str)
    assert max(len(piece) for piece in pieces) < len(text) / 100


class _Port(int):
    """An int of another type, as an enum or numpy-like integer would reach a row."""


def test_a_row_is_written_as_the_indenting_json_encoder_writes_it_whatever_its_values() -> None:
    """row_json writes flat rows itself: every kind of value a row may hold gives json's own text."""
    rows = [
        _check("PASS").to_dict(),
        CheckResult("gpu.nvlink", None, "H", "FAIL", observed={"GPU 0": [1, 2.5, None]}).to_dict(),
        {
            "id": 'quote " backslash \\ tab \t newline \n',
            "host": "nœud-07 ✓",
            "observed": [{"a": {}}, [], (1, "x"), {"k": [True, False]}],
            "expected": float("nan"),
            "low": float("-inf"),
            "high": float("inf"),
            "ratio": 0.1 + 0.2,
            "flag": True,
            "off": False,
            "none": None,
            "port": _Port(7),
            "count": -12,
            "path": Path("raw/n1/ibstat.txt"),
            "control": "\x00\x1f\u2028",
        },
        {1: "a key that is not a string", "id": "x"},
        {},
    ]
    for row in rows:
        expected = json.dumps(row, indent=1, ensure_ascii=False, default=str).replace("\n", "\n  ")
        assert row_json(row) == expected
