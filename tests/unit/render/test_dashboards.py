"""The Grafana dashboard and the Prometheus alert rules in dashboards/ read only metrics the textfile writes.

The writer's metric names come from its code (every ``_Family("diagnose_...")`` of
diagnose/render/prometheus.py, read with ``ast``), not from a list kept here; every PromQL expression of the
dashboard and the rules is stripped of strings, label matchers, ranges, grouping clauses and function names,
and what is left must be numbers, operators, keywords and those metric names. A renamed metric, a typo in a
panel or an alert on a metric nothing writes fails here rather than as an empty panel at 3 a.m.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
import yaml

from diagnose.render import prometheus
from tests.support.paths import REPO

DASHBOARDS = REPO / "dashboards"
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_FUNCTION = re.compile(r"\b[a-zA-Z_]\w*\s*\(")
_NAME = re.compile(r"[a-zA-Z_:][\w:]*")
_KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "e", "Inf", "NaN"})


def written_metrics() -> set[str]:
    tree = ast.parse(Path(prometheus.__file__).read_text(encoding="utf-8"))
    return {
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", None) == "_Family"
        and isinstance(node.args[0], ast.Constant)
    }


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


def test_the_writer_names_are_read_from_its_code() -> None:
    names = written_metrics()
    assert {"diagnose_verdict", "diagnose_check_status", "diagnose_watch_component"} <= names
    assert all(name.startswith("diagnose_") for name in names)


@pytest.mark.parametrize("source", [dashboard_exprs, alert_exprs], ids=["grafana", "alerts"])
def test_every_expression_reads_only_written_metrics(source) -> None:
    exprs = source()
    assert exprs
    written = written_metrics()
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
