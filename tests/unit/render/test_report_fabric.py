"""The report's fabric chapter and the per-NIC Prometheus gauges, from the records the per-NIC benchmark
makes of a modelled fabric (tests/support/perftest.py: one slow NIC, one slow cable), added to the real run
document tests/fixtures/results/h200_local.json."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from diagnose.probes import fleet_judge
from diagnose.probes.perftest_campaign import Campaign
from diagnose.probes.perftest_settings import Settings
from diagnose.render.prometheus import render_prometheus
from diagnose.render.render import render_from_dict
from diagnose.render.view_fabric import ALL_ROWS_UP_TO, build_fabric
from tests.support.paths import FIXTURES
from tests.support.perftest import Fabric, rails_for

RUN = FIXTURES / "results" / "h200_local.json"


def results_of(hosts: int, fabric: Fabric) -> dict[str, Any]:
    names = [f"gpu{i:03d}" for i in range(1, hosts + 1)]
    outcome = Campaign(rails_for(names), Settings(), fleet_judge.Thresholds(), fabric).run(names)
    results = json.loads(RUN.read_text())
    results["checks"] += [c.to_dict() for c in outcome.conclusion.checks]
    records = [r.to_dict() for r in outcome.readings] + outcome.conclusion.records
    summary = {
        "kind": "summary",
        "hosts": names,
        "message_bytes": 1 << 20,
        "duration_s": 5,
        "rounds": outcome.rounds,
    }
    results["fabric"] = [*records, {**summary, "launches": outcome.launches, "seconds": 120.0}]
    return results


def test_the_chapter_shows_every_host_by_rail_with_the_slow_nic_and_the_link(tmp_path: Path) -> None:
    fabric = Fabric(nic={("gpu004", 1): 0.5}, link={("gpu001", "gpu002", 0): 0.6})
    results = results_of(6, fabric)
    view = build_fabric(results)
    assert view is not None and view.rails == ["rail 0 (mlx5_0)", "rail 1 (mlx5_1)"]
    slow = next(r for r in view.rows if r.host == "gpu004")
    assert slow.worst == "FAIL" and slow.cells[1] is not None and slow.cells[1].ratio == "49 %"
    assert view.ratios[3][1] == 0.489 and view.ratios[0][0] == 0.978
    assert [line.cells[0] for line in view.links] == ["gpu001 mlx5_0 ↔ gpu002 mlx5_0"]
    (written,) = render_from_dict(results, {"html"}, tmp_path)
    html = written.read_text()
    assert re.search(r"<h2>\d+ Fabric: RDMA write bandwidth of every NIC, by rail</h2>", html)
    chapter = html.split('<section class="chapter" id="fabric">')[1].split("</section>")[0]
    assert "<svg" in chapter and "share of line rate" in chapter
    assert "gpu001" not in chapter.split("<svg")[1].split("</svg>")[0]  # names stay out of the plot
    assert "slow NIC on gpu004: mlx5_1 (rail 1)" in html
    assert "Every NIC writes at line rate (ib_write_bw per rail)" in html  # its checklist line


def test_a_large_fleet_lists_only_the_hosts_with_a_finding_and_maps_them_all(tmp_path: Path) -> None:
    results = results_of(ALL_ROWS_UP_TO + 6, Fabric(nic={("gpu010", 0): 0.5}))
    view = build_fabric(results)
    assert view is not None
    assert [r.host for r in view.rows] == ["gpu009", "gpu010"] or [r.host for r in view.rows] == ["gpu010"]
    assert len(view.ratios) == ALL_ROWS_UP_TO + 6 and view.hidden == len(view.ratios) - len(view.rows)


def test_prometheus_has_every_nic_by_host_hca_and_rail() -> None:
    text = render_prometheus(results_of(4, Fabric(nic={("gpu003", 0): 0.5}))).decode()
    assert 'diagnose_nic_write_bw_gbps{host="gpu001",hca="mlx5_0",rail="0"} 391.2' in text
    assert 'diagnose_nic_write_bw_line_ratio{host="gpu003",hca="mlx5_0",rail="0"} 0.489' in text
    assert 'diagnose_nic_status{host="gpu003",hca="mlx5_0",rail="0"} 4' in text
    assert len(re.findall(r"^diagnose_nic_write_bw_gbps\{", text, re.M)) == 8
