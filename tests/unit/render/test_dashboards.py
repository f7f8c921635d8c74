"""The Grafana dashboard and the Prometheus alert rules in dashboards/ read only metrics the textfile writes.

The metric names are those with a sample in textfiles the writer (diagnose/render/prometheus.py) made: of
every recorded run document under tests/fixtures (the lent GPU runs among them), of a fabric benchmark's
per-NIC records, and of a watch list after five nights (a cable warming toward its alarm, a port counting
steadily). A metric the writer declares but never gives a value is not among them. Every PromQL expression of
the dashboard and the rules is stripped of strings, label matchers, ranges, grouping clauses and function
names, and what is left must be numbers, operators, keywords and those metric names. A renamed metric, a
typo in a panel or an alert on a metric nothing writes fails here rather than as an empty panel at 3 a.m.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from diagnose import history
from diagnose.parsers.ib_counters import parse_ib_counters
from diagnose.parsers.ibstat import parse_ibstat
from diagnose.parsers.mlxlink import parse_mlxlink
from diagnose.probes import fleet_judge
from diagnose.probes.perftest_campaign import Campaign
from diagnose.probes.perftest_settings import Settings
from diagnose.render.prometheus import render_prometheus
from tests.support.nightly import make_results, night
from tests.support.paths import CAPTURED, FIXTURES, REPO
from tests.support.perftest import Fabric, rails_for
from tests.support.watchkit import ib_counters, ibstat_of_host

DASHBOARDS = REPO / "dashboards"
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_FUNCTION = re.compile(r"\b[a-zA-Z_]\w*\s*\(")
_NAME = re.compile(r"[a-zA-Z_:][\w:]*")
_KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "e", "Inf", "NaN"})


OPTIC = "mlxlink/osfp_400g_optic_sichek.txt"


def _recorded_runs() -> list[dict[str, Any]]:
    """Every results.json a run wrote (not the hand-made ones, which say so in their ``_fixture`` note)."""
    documents = []
    for path in sorted(FIXTURES.rglob("*.json")):
        document = json.loads(path.read_text())
        if not isinstance(document, dict) or not {"run", "checks", "verdict"} <= document.keys():
            continue
        if not str(document.get("_fixture", "")).startswith("Hand-made"):
            documents.append(document)
    return documents


def _fabric_run() -> dict[str, Any]:
    """A recorded run with the per-NIC records of the fabric benchmark over a modelled fabric (one slow NIC)."""
    names = ["gpu001", "gpu002", "gpu003"]
    fabric = Fabric(nic={("gpu003", 0): 0.5})
    outcome = Campaign(rails_for(names), Settings(), fleet_judge.Thresholds(), fabric).run(names)
    document = json.loads((FIXTURES / "results" / "h200_local.json").read_text())
    document["fabric"] = [r.to_dict() for r in outcome.readings] + outcome.conclusion.records
    return document


def _watch_night(n: int) -> dict[str, dict[str, Any]]:
    """Two hosts' optics and IB counters on night ``n`` (the captures, serials and counters edited): node0's
    cable two degrees warmer every night toward its 75 °C alarm, node1's mlx5_4 counting ten a night."""
    hosts = {}
    for index in range(2):
        optic = (CAPTURED / OPTIC).read_text().replace("CWJH05025502589", f"CWJH0502550258{index}")
        if index == 0:
            optic = optic.replace(": 54 [-5..75]", f": {54 + 2 * n} [-5..75]")
        counters = {("mlx5_4", "symbol_error"): 10 * n} if index == 1 else {}
        hosts[f"node{index}"] = {
            "ib.optics": parse_mlxlink(optic),
            "ib.counters": parse_ib_counters(ib_counters(counters)),
            "ib.port_state": parse_ibstat(ibstat_of_host(index)),
        }
    return hosts


def _watched_run(tmp_path: Path) -> dict[str, Any]:
    """The fifth nightly run of :func:`_watch_night`, its watch list judged on the four before it (the
    fewest a trend is judged on)."""
    db = tmp_path / "history.sqlite3"
    for n in range(5):
        results = make_results(f"run{n:02d}", night(n))
        found = history.watch(db, results, _watch_night(n))
        results["checks"] += [dataclasses.asdict(c) for c in found.results]
        results["history"] = {"watch": found.summary}
        run_dir = tmp_path / "runs" / results["run"]["id"]
        run_dir.mkdir(parents=True)
        history.record_run(db, results, run_dir)
        history.record_watch(db, results, found)
    return results


def sampled(textfile: str) -> set[str]:
    """The metrics with at least one sample in a textfile (not the ones only declared by HELP and TYPE)."""
    return {
        line.split("{")[0].split()[0] for line in textfile.splitlines() if line and not line.startswith("#")
    }


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    documents = [*_recorded_runs(), _fabric_run(), _watched_run(tmp_path_factory.mktemp("watch"))]
    return set().union(*(sampled(render_prometheus(document).decode()) for document in documents))


def metric_names(expr: str) -> set[str]:
    """The metric names an expression reads; any other bare word is returned too, so that it fails."""
    text = _STRING.sub(" ", expr)
    text = _MATCHERS.sub(" ", text)
    text = _RANGE.sub(" ", text)
    text = _GROUPING.sub(" ", text)
    text = _FUNCTION.sub(" (", text)
    return {word for word in _NAME.findall(text) if word not in _KEYWORDS}


def dashboard_exprs() -> list[str]:
    board = json.loads((DASHBOARDS / "grafana-diagnose.json").read_text())
    return [target["expr"] for panel in board["panels"] for target in panel.get("targets", [])]


def alert_exprs() -> list[str]:
    rules = yaml.safe_load((DASHBOARDS / "prometheus-alerts.yaml").read_text())
    return [rule["expr"] for group in rules["groups"] for rule in group["rules"]]


def test_the_names_are_read_from_written_textfiles(written: set[str]) -> None:
    assert {"diagnose_verdict", "diagnose_check_status", "diagnose_nic_write_bw_line_ratio"} <= written
    assert {
        "diagnose_watch_component",
        "diagnose_watch_nights_to_limit",
        "diagnose_watch_steady_per_night",
    } <= written
    assert all(name.startswith("diagnose_") for name in written)
    assert sampled("# HELP diagnose_declared Only declared.\n# TYPE diagnose_declared gauge\n") == set()


@pytest.mark.parametrize("source", [dashboard_exprs, alert_exprs], ids=["grafana", "alerts"])
def test_every_expression_reads_only_written_metrics(source, written: set[str]) -> None:
    exprs = source()
    assert exprs
    for expr in exprs:
        names = metric_names(expr)
        assert names, f"no metric in {expr!r}"
        assert names <= written, f"{expr!r} reads {sorted(names - written)}, which the textfile never writes"


def test_the_parser_catches_a_misspelt_metric_and_keeps_labels_apart() -> None:
    expr = (
        'max by (check, host) (diagnose_chek_status{action="rma_gpu"}[1d]) == 4 and on(host) diagnose_verdict'
    )
    assert metric_names(expr) == {"diagnose_chek_status", "diagnose_verdict"}


def test_the_dashboard_and_rules_cover_the_fleet_the_checks_the_busbw_and_the_watch_list() -> None:
    read = set().union(*map(metric_names, dashboard_exprs()))
    assert {
        "diagnose_verdict",
        "diagnose_check_status",
        "diagnose_benchmark_peak_busbw_gbps",
        "diagnose_watch_component",
    } <= read
    alerted = set().union(*map(metric_names, alert_exprs()))
    assert {"diagnose_verdict", "diagnose_watch_component", "diagnose_watch_nights_to_limit"} <= alerted
