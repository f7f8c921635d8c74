"""The report's fleet chapter, built from records the fleet probes produce on captured probe output.

The run document is tests/fixtures/results/h200_local.json (a real run on the lent H200 machine); its
``fleet`` list is what :func:`diagnose.probes.fleet.judge_fleet` makes of the H200 probe captured
there, printed by as many hosts as a test needs (tests/support/fleet.py).
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

from diagnose.probes.fleet import judge_fleet, single_host
from diagnose.render.render import render_from_dict
from diagnose.render.view_fleet import ALL_ROWS_UP_TO, build_fleet
from tests.support.fleet import host, settings
from tests.support.paths import FIXTURES

RUN = FIXTURES / "results" / "h200_local.json"


def with_fleet(records: list[dict[str, Any]], checks: list[Any] = ()) -> dict[str, Any]:
    results = json.loads(RUN.read_text())
    results["fleet"] = copy.deepcopy(records)
    results["checks"] += [c.to_dict() for c in checks]
    return results


def fleet_of(count: int, slow: dict[int, dict[str, float]]) -> dict[str, Any]:
    hosts = [host(f"gpu{i:03d}", **slow.get(i, {})) for i in range(1, count + 1)]
    judgement = judge_fleet(hosts, settings(min_host_copy_gbps=40), {})
    return with_fleet(judgement.records, judgement.checks)


def html_of(results: dict[str, Any], tmp_path: Path) -> str:
    (written,) = render_from_dict(results, {"html"}, tmp_path)
    return written.read_text()


def test_the_odd_host_leads_the_table_and_is_shaded(tmp_path: Path) -> None:
    results = fleet_of(16, {7: {"h2d": 0.9}})
    view = build_fleet(results)
    assert view is not None and view.labels == ["host→device", "device→host", "GPU peer", "memory copy"]
    first = view.rows[0]
    assert first.host == "gpu007" and first.worst == "FAIL"
    h2d = first.cells[0]
    assert h2d is not None and h2d.status == "FAIL" and h2d.deviation == "−10.0 %"
    assert h2d.where == "slowest of 2: GPU 0" and "odd: robust z" in h2d.why
    assert [r.worst for r in view.rows[1:]] == ["PASS"] * 15
    html = html_of(results, tmp_path)
    assert re.search(r"<h2>\d+ Fleet: hosts against their peers</h2>", html)
    cell = re.search(r'<td class="f-cell st-fail"[^>]*>\s*<span class="f-value">([\d.]+)</span>', html)
    assert cell is not None and cell.group(1) == h2d.value
    assert html.count('class="f-cell st-fail"') == 1
    assert "the median clears the profile floor 40.0 GB/s" in html


def test_a_large_fleet_lists_every_odd_host_and_counts_the_rest(tmp_path: Path) -> None:
    results = fleet_of(100, {3: {"peer": 0.6}, 77: {"h2d": 0.5}})
    view = build_fleet(results)
    assert view is not None and ALL_ROWS_UP_TO < 100 and len(view.rows) == 2 and view.hidden == 98
    assert [r.host for r in view.rows] == ["gpu003", "gpu077"]
    assert re.search(r"98 more hosts are within the fleet\S*s spread", html_of(results, tmp_path))


def test_one_host_shows_its_figures_and_says_there_is_no_fleet(tmp_path: Path) -> None:
    judgement = single_host(host("gpu01"), {})
    results = with_fleet(judgement.records, judgement.checks)
    view = build_fleet(results)
    assert view is not None and view.single and view.summaries == []
    assert {c.status for c in view.rows[0].cells if c is not None} == {"SKIP"}
    assert "there is no fleet to judge it against" in html_of(results, tmp_path)


def test_no_fleet_records_no_chapter(tmp_path: Path) -> None:
    results = with_fleet([])
    assert build_fleet(results) is None
    assert 'id="fleet"' not in html_of(results, tmp_path)


def test_a_hand_edited_fleet_list_does_not_break_the_report(tmp_path: Path) -> None:
    good = fleet_of(4, {})["fleet"]
    hostile = [
        "not a record",
        {"metric": 7, "host": "x"},
        {"metric": "h2d", "host": "<script>alert(1)</script>", "value": "fast", "detail": "many"},
        {"metric": "peer", "host": None, "hosts": "lots", "verdict": "GREAT", "message": "<b>hi</b>"},
        *good,
    ]
    results = with_fleet(hostile)
    view = build_fleet(results)
    assert view is not None and any(r.host.startswith("<script>") for r in view.rows)
    html = html_of(results, tmp_path)
    assert "<script>alert(1)</script>" not in html and "&lt;b&gt;hi&lt;/b&gt;" in html
