"""The action of each result in JUnit (a property, and the end of the failure's message) and in the
Prometheus textfile (a label of the per-check and per-benchmark series, bounded to the nine words)."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from typing import Any

from diagnose.core.model import ACTIONS
from diagnose.render.junit import render_junit
from diagnose.render.load import clean_tree, normalize
from diagnose.render.prometheus import render_prometheus
from tests.support.paths import FIXTURES

_SAMPLE = re.compile(r"^(?P<name>[a-z_]+)\{(?P<labels>.*)\} (?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_exposition(text: str) -> list[tuple[str, dict[str, str], float]]:
    """The samples of a textfile with labels (the comment lines and label-less samples left out)."""
    found = []
    for line in text.splitlines():
        sample = _SAMPLE.match(line)
        if sample:
            labels = dict(_LABEL.findall(sample.group("labels")))
            found.append((sample.group("name"), labels, float(sample.group("value"))))
    return found


def _results() -> dict[str, Any]:
    def row(check_id: str, host: str | None, status: str, message: str, action: str | None = None) -> dict:
        entry = {"id": check_id, "host": host, "checklist": "1", "status": status, "message": message}
        return {**entry, "action": action} if action else entry

    return normalize(
        clean_tree(
            {
                "schema": 1,
                "run": {"id": "20261125T170000Z-ab12", "started": "2026-11-25T17:00:00+00:00"},
                "hosts": [],
                "checks": [
                    row("ib.port_state", "gpu01", "PASS", "all 8 ports Active"),
                    row("ib.port_state", "gpu03", "FAIL", "mlx5_9/1 Down/Polling", "reseat_or_replace_cable"),
                    row("gpu.xid", "gpu03", "FAIL", "Xid 79 on GPU 2", "reboot"),
                    row("gpu.xid", "gpu03", "FAIL", "Xid 64 on GPU 5", "rma_gpu"),  # one series, two rows
                    row("gpu.clocks", "gpu02", "WARN", "SW thermal slowdown", "contact_support"),
                    row("nccl.env", "gpu04", "ERROR", "nccl.conf unreadable", "check_config"),
                    row("ib.mtu", "gpu05", "FAIL", "an older file: no action recorded"),
                    row("ib.flaps", "gpu06", "FAIL", "hand-made", "unplug_everything"),
                ],
                "benchmarks": [
                    {
                        "collective": "all_reduce",
                        "status": "FAIL",
                        "message": "below",
                        "action": "check_config",
                        "tool": "torch",
                        "backend": "nccl",
                        "nodes": 2,
                        "ranks": 16,
                        "rows": [],
                    },
                ],
                "verdict": "FAIL",
            }
        )
    )


def test_junit_names_the_action_in_a_property_and_the_failure_message() -> None:
    root = ET.fromstring(render_junit(_results()))
    cases = {(c.get("classname"), c.get("name")): c for c in root.iter("testcase")}
    down = cases[("ib.port_state", "gpu03")]
    assert down.find("properties/property[@name='action']").get("value") == "reseat_or_replace_cable"
    failure = down.find("failure")
    assert failure.get("message") == "mlx5_9/1 Down/Polling (action: reseat_or_replace_cable)"
    assert "action: reseat_or_replace_cable (reseat the cable" in failure.text
    assert cases[("nccl.env", "gpu04")].find("error").get("message").endswith("(action: check_config)")
    warn = cases[("gpu.clocks", "gpu02")]
    assert warn.find("properties/property").get("value") == "contact_support"
    assert "action: contact_support" in warn.find("system-out").text
    assert cases[("ib.port_state", "gpu01")].find("properties") is None  # a PASS has nothing to do
    assert cases[("ib.mtu", "gpu05")].find("properties") is None  # an older file: nothing invented
    assert cases[("ib.flaps", "gpu06")].find("properties") is None  # a word outside the nine: dropped
    bench = cases[("bench.all_reduce", "all_reduce 2 nodes 16 ranks (torch/nccl)")]
    assert bench.find("properties/property").get("value") == "check_config"


def test_prometheus_carries_the_action_as_a_bounded_label() -> None:
    samples = parse_exposition(render_prometheus(_results()).decode())
    status = {
        (s[1]["check"], s[1]["host"]): s[1].get("action", "")
        for s in samples
        if s[0] == "diagnose_check_status"
    }
    assert status[("ib.port_state", "gpu01")] == "none"
    assert status[("ib.port_state", "gpu03")] == "reseat_or_replace_cable"
    assert status[("gpu.xid", "gpu03")] == "rma_gpu"  # two FAILs of one series: the action covering both
    assert status[("nccl.env", "gpu04")] == "check_config"
    assert status[("ib.mtu", "gpu05")] == "" and status[("ib.flaps", "gpu06")] == ""
    bench = [s for s in samples if s[0] == "diagnose_benchmark_status"]
    assert bench[0][1]["action"] == "check_config"
    labels = {s[1]["action"] for s in samples if "action" in s[1]}
    assert labels <= {*ACTIONS, ""}  # empty: no label, as Prometheus reads it


def test_an_older_results_file_renders_without_actions() -> None:
    older = normalize(clean_tree(json.loads((FIXTURES / "results" / "cluster_failures.json").read_text())))
    assert not any("action" in c for c in older["checks"])
    assert ET.fromstring(render_junit(older)).find(".//property[@name='action']") is None
    samples = parse_exposition(render_prometheus(older).decode())
    assert {s[1]["action"] for s in samples if s[0] == "diagnose_check_status"} <= {"none", ""}
