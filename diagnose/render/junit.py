"""JUnit XML for CI systems: one testcase per result (check × host), as the terminal and the report count.

CI dashboards (GitLab, Jenkins, GitHub test reporters) show ``classname`` as the group and ``name`` as the
test, so a check id becomes the group and the host the test: a failing ``ib.port_state`` lists the hosts
it failed on. FAIL maps to ``<failure>``, ERROR (could not be judged) to ``<error>``, SKIP and a PASS that
judged no figure (``judged: false``, type SHOWN) to ``<skipped>``; WARN passes, with its message kept in ``<system-out>`` so that it is not lost. A result's action (what the
operator does first, docs/actions.md) is a ``<property name="action">`` of its testcase and closes the
failure's message, so a CI view shows it without opening the detail. Where one cause explains other
results (results.json ``causes``), the root's message opens with ``[cause: +N consequences (ids)]`` and
each consequence's with ``[consequence of <check> on <hosts>]``: the counts stay one per result. A benchmark is the testcase
of its ``bench.<collective>`` result, its size sweep in the detail; only an entry no such result stands for
(an older file) gets a testcase of its own, in the ``benchmarks`` suite (:mod:`diagnose.render.tally`).
An INCOMPLETE run (interrupted) adds one testcase beyond its results, ``run`` / ``complete``, an error of
type INCOMPLETE: what was measured before the stop may all have passed, and no CI may show such a run green.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from diagnose.catalog.actions import MEANING
from diagnose.catalog.stage_ids import bench_id
from diagnose.core.model import SHOWN
from diagnose.render.causes import causes_of
from diagnose.render.checklist import CLUSTER
from diagnose.render.hostlist import natural_key
from diagnose.render.tally import check_rows, orphan_benchmarks, shown_only
from diagnose.render.text import count_of, show

# A PASS that judged no figure is skipped, so that no CI counts it as a pass.
_ELEMENT = {"FAIL": "failure", "ERROR": "error", "SKIP": "skipped", SHOWN: "skipped"}


def _detail(row: dict[str, Any]) -> str:
    parts = [
        f"status: {row.get('status')}",
        f"message: {row.get('message') or ''}",
        f"observed: {show(row.get('observed'), 2000)}",
        f"expected: {show(row.get('expected'), 2000)}",
    ]
    if row.get("action") in MEANING:
        parts.append(f"action: {row['action']} ({MEANING[row['action']]})")
    if row.get("remediation"):
        parts.append(f"remediation: {row['remediation']}")
    if row.get("evidence"):
        parts.append(f"evidence: {row['evidence']}")
    return "\n".join(parts)


def _case(
    suite: ET.Element,
    classname: str,
    name: str,
    status: str,
    message: str,
    detail: str,
    action: object = None,
) -> str:
    case = ET.SubElement(suite, "testcase", classname=classname, name=name, time="0")
    element = _ELEMENT.get(status)
    if element is None and status not in ("PASS", "WARN"):
        element = "error"  # a status this version does not know cannot count as a pass
    if action in MEANING and status != "PASS":
        properties = ET.SubElement(case, "properties")
        ET.SubElement(properties, "property", name="action", value=str(action))
        if element in ("failure", "error"):
            message = f"{message or status} (action: {action})"
    if element:
        ET.SubElement(case, element, message=message or status, type=status).text = detail
    elif status == "WARN":
        ET.SubElement(case, "system-out").text = f"WARN: {message}\n{detail}"
    return element or "pass"


def _count(suite: ET.Element, outcomes: list[str]) -> None:
    suite.set("tests", str(len(outcomes)))
    for attribute, element in (("failures", "failure"), ("errors", "error"), ("skipped", "skipped")):
        suite.set(attribute, str(outcomes.count(element)))


def _bench_detail(bench: dict[str, Any]) -> str:
    transport = bench.get("transport") if isinstance(bench.get("transport"), dict) else {}
    lines = [
        f"status: {bench.get('status')}",
        f"message: {bench.get('message') or ''}",
        *([f"action: {bench['action']}"] if bench.get("action") in MEANING else []),
        f"expected busbw: {show(bench.get('expected_busbw_gbps'))} GB/s",
        f"transport: inter_node={show(transport.get('inter_node'))} intra_node={show(transport.get('intra_node'))}",
        "bytes busbw_gbps algbw_gbps wrong",
    ]
    for row in bench.get("rows") or []:
        if isinstance(row, dict):
            lines.append(
                f"{row.get('bytes')} {row.get('busbw_gbps')} {row.get('algbw_gbps')} {row.get('wrong')}"
            )
    return "\n".join(lines)


def _cause_roles(results: dict[str, Any]) -> dict[int, str]:
    """What each row is in the run's causes (:func:`diagnose.render.causes.causes_of`), by the row's
    identity: a root opens its message with the consequences it explains, a consequence with its cause."""
    roles: dict[int, str] = {}
    for cause in causes_of(results):
        if not cause.consequences:
            continue
        for row in cause.rows:
            roles[id(row)] = f"[cause: {cause.consequences_text}]"
        where = ", ".join(cause.hosts)
        for row in cause.consequences:
            roles[id(row)] = f"[consequence of {cause.check_ids[0]} on {where}]"
    return roles


def _incomplete(root: ET.Element, run: dict[str, Any]) -> str:
    """The testcase that fails a run cut short: its results alone would pass when all measured so far did."""
    suite = ET.SubElement(root, "testsuite", name="run", timestamp=str(run.get("started") or ""))
    why = "the run was interrupted" if run.get("interrupted") else "the run did not finish"
    detail = [f"stopped: {line}" for line in run.get("stopped") or []]
    detail += [f"could not stop: {line}" for line in run.get("not_stopped") or []]
    for stage in run.get("stages") or []:
        if isinstance(stage, dict) and stage.get("interrupted"):
            detail += [f"{stage.get('stage')} cut short; {line}" for line in stage.get("still_running") or []]
    outcome = _case(
        suite, "run", "complete", "INCOMPLETE", f"{why}: hosts or stages are missing", "\n".join(detail)
    )
    _count(suite, [outcome])
    return outcome


def render_junit(results: dict[str, Any]) -> bytes:
    """The JUnit XML document for a cleaned results dict (strings already legal in XML 1.0)."""
    run = results.get("run") or {}
    root = ET.Element("testsuites", name=f"diagnose {run.get('id') or ''}".strip())
    by_check: dict[str, list[dict[str, Any]]] = {}
    for row in check_rows(results):
        by_check.setdefault(str(row.get("id", "?")), []).append(row)
    sweeps: dict[str, list[str]] = {}
    for bench in results.get("benchmarks") or []:
        if isinstance(bench, dict):
            sweeps.setdefault(bench_id(bench.get("collective")), []).append(_bench_detail(bench))
    roles = _cause_roles(results)
    totals: list[str] = []
    for check_id, rows in by_check.items():
        suite = ET.SubElement(root, "testsuite", name=check_id, timestamp=str(run.get("started") or ""))
        rows.sort(key=lambda r: natural_key(CLUSTER if r.get("host") is None else str(r.get("host"))))
        outcomes = [
            _case(
                suite,
                check_id,
                CLUSTER if row.get("host") is None else str(row.get("host")),
                SHOWN if shown_only(row) else str(row.get("status")),
                " ".join(filter(None, (roles.get(id(row), ""), str(row.get("message") or "")))),
                "\n\n".join([_detail(row), *(sweeps.get(check_id, []) if row.get("host") is None else [])]),
                row.get("action"),
            )
            for row in rows
        ]
        _count(suite, outcomes)
        totals += outcomes
    benchmarks = orphan_benchmarks(results)
    if benchmarks:
        suite = ET.SubElement(root, "testsuite", name="benchmarks", timestamp=str(run.get("started") or ""))
        outcomes = [
            _case(
                suite,
                bench_id(b.get("collective")),
                f"{b.get('collective')} {count_of(b.get('nodes'), 'node')} {count_of(b.get('ranks'), 'rank')} ({b.get('tool')}/"
                f"{b.get('backend')})",
                str(b.get("status")),
                str(b.get("message") or ""),
                _bench_detail(b),
                b.get("action"),
            )
            for b in benchmarks
        ]
        _count(suite, outcomes)
        totals += outcomes
    if results.get("verdict") == "INCOMPLETE":
        totals.append(_incomplete(root, run))
    _count(root, totals)
    ET.indent(root, space=" ")
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"
