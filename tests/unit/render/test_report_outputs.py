"""JUnit XML and the Prometheus textfile, including hostile strings and the atomic write."""

from __future__ import annotations

import json
import os
import re
import stat
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from diagnose.render.atomic import write_atomic
from diagnose.render.junit import render_junit
from diagnose.render.load import clean_tree, normalize
from diagnose.render.prometheus import escape_label, render_prometheus
from diagnose.render.tally import results_of
from tests.support.paths import FIXTURES

RESULTS = FIXTURES / "results"


def _load(name: str) -> dict[str, Any]:
    return normalize(clean_tree(json.loads((RESULTS / name).read_text())))


def test_junit_one_testcase_per_check_and_host() -> None:
    """Each benchmark is the testcase of its bench.<collective> result, not a second one (issue 23)."""
    results = _load("cluster_failures.json")
    root = ET.fromstring(render_junit(results))
    cases = root.findall("./testsuite/testcase")
    assert len(cases) == len(results["checks"]) == len(results_of(results))
    port = root.find("./testsuite[@name='ib.port_state']/testcase[@name='gpu03']")
    assert port is not None
    failure = port.find("failure")
    assert failure is not None and "mlx5_2" in failure.get("message", "")
    assert "remediation: Reseat" in (failure.text or "")
    assert "evidence: raw/gpu03/ibstat.txt" in (failure.text or "")
    assert root.get("failures") == "8" and root.get("errors") == "0"  # the failed benchmark is one of the 8
    warn = root.find("./testsuite[@name='gpu.gpudirect']/testcase[@name='gpu02']")
    assert warn is not None and warn.find("failure") is None
    assert "WARN: nvidia_peermem" in (warn.findtext("system-out") or "")
    bench = root.find("./testsuite[@name='bench.all_reduce']/testcase[@name='cluster-wide']")
    assert bench is not None and bench.find("failure") is not None
    assert "bytes busbw_gbps algbw_gbps wrong" in (bench.findtext("failure") or "")  # its sweep
    assert root.find("./testsuite[@name='benchmarks']") is None


def test_junit_gives_a_benchmark_no_result_stands_for_a_testcase_of_its_own() -> None:
    hostile = _load("hostile.json")
    root = ET.fromstring(render_junit(hostile))
    (orphan,) = root.findall("./testsuite[@name='benchmarks']/testcase")
    assert orphan.find("failure") is not None
    assert root.get("tests") == str(len(results_of(hostile))) == str(len(hostile["checks"]) + 1)


def test_junit_error_and_skip_elements() -> None:
    root = ET.fromstring(render_junit(_load("h200_local.json")))
    skipped = root.find("./testsuite[@name='ib.port_state']/testcase/skipped")
    assert skipped is not None and "no HCA expected" in skipped.get("message", "")
    hostile = ET.fromstring(render_junit(_load("hostile.json")))
    error = hostile.find("./testsuite[@name='weird.status']/testcase/error")
    assert error is not None and "MAYBE" in error.get("message", "")
    assert hostile.find("./testsuite[@name='ib.link_rate']/testcase/error") is not None


def test_junit_keeps_hostile_strings_as_text() -> None:
    root = ET.fromstring(render_junit(_load("hostile.json")))
    names = {case.get("name") for case in root.iter("testcase")}
    assert '<script>alert("host")</script>' in names
    assert "bad\\xff\\xfename\\x1b[31m" in names
    suite = root.find("./testsuite[@name='site.custom\"<x>']")
    assert suite is not None and suite.find("testcase/skipped") is not None


_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\\\|\\"|\\n)*)"(,|$)')


def _parse(text: str) -> list[tuple[str, dict[str, str], float]]:
    """A strict reader of the exposition format, enough to prove every line is well-formed."""
    samples = []
    typed = set()
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            if line.startswith("# TYPE "):
                typed.add(line.split()[2])
                assert line.split()[3] == "gauge"
            continue
        match = _LINE.match(line)
        assert match, line
        name, _, body, value = match.groups()
        assert name in typed, name
        labels: dict[str, str] = {}
        rest = body or ""
        while rest:
            label = _LABEL.match(rest)
            assert label, rest
            raw = label.group(2)
            labels[label.group(1)] = re.sub(
                r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), raw
            )
            rest = rest[label.end() :]
        samples.append((name, labels, float(value)))
    return samples


def test_prometheus_gauges_per_check_and_benchmark() -> None:
    samples = _parse(render_prometheus(_load("cluster_failures.json")).decode())
    status = {(s[1]["check"], s[1]["host"]): s[2] for s in samples if s[0] == "diagnose_check_status"}
    assert status[("ib.port_state", "gpu03")] == 4  # FAIL
    assert status[("ib.port_state", "gpu01")] == 1  # PASS
    assert status[("nccl.version", "gpu04")] == 4  # the cluster rule's FAIL wins over the host's PASS
    assert status[("ib.mtu", "")] == 1
    busbw = [
        s for s in samples if s[0] == "diagnose_benchmark_busbw_gbps" and s[1]["collective"] == "all_reduce"
    ]
    assert len(busbw) == 24 and busbw[-1][1]["bytes"] == str(8 << 30)
    verdict = [s for s in samples if s[0] == "diagnose_verdict"]
    assert verdict == [("diagnose_verdict", {}, 4.0)]
    keys = [(s[0], tuple(sorted(s[1].items()))) for s in samples]
    assert len(keys) == len(set(keys)), "a repeated series makes node_exporter drop the file"


def test_prometheus_label_values_are_escaped() -> None:
    assert escape_label('a"b\\c\nd') == 'a\\"b\\\\c\\nd'
    samples = _parse(render_prometheus(_load("hostile.json")).decode())
    hosts = {s[1].get("host") for s in samples if s[0] == "diagnose_check_status"}
    assert '<script>alert("host")</script>' in hosts
    checks = {s[1].get("check") for s in samples if s[0] == "diagnose_check_status"}
    assert 'site.custom"<x>' in checks


def test_write_atomic_replaces_in_one_step(tmp_path: Path) -> None:
    target = tmp_path / "diagnose.prom"
    target.write_text("old\n")
    inode_before = target.stat().st_ino
    write_atomic(target, b"new\n")
    assert target.read_text() == "new\n"
    assert target.stat().st_ino != inode_before  # renamed over, not rewritten in place
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert os.listdir(tmp_path) == ["diagnose.prom"]  # no temporary file left behind
