"""results.json folded into what the report shows, page by page.

The templates only lay out what this module decides: which findings come first, how 512 hosts fold into a
few matrix rows, which environment values stand out, which evidence files the appendix quotes. Keeping
these choices in plain functions makes them testable without rendering anything, and keeps the templates
free of logic that would otherwise be duplicated between HTML and PDF.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from diagnose.benchmarks.expect import DEFAULT_TOLERANCE, LARGE_BYTES
from diagnose.core.model import SEVERITY, STATUSES, worst
from diagnose.core.units import human_bytes
from diagnose.render.checklist import CLUSTER, SECTIONS, SectionResult, build_checklist, curve_shape
from diagnose.render.hostlist import natural_key, summarize
from diagnose.render.load import Excerpt, read_excerpt
from diagnose.render.parts import Part, build_parts

ENV_FIELDS = (
    ("gpu_model", "GPU model"),
    ("gpu_count", "GPUs"),
    ("driver", "Driver"),
    ("cuda", "CUDA"),
    ("nccl", "NCCL"),
    ("torch", "torch"),
    ("os", "OS"),
)
# Evidence quoted per finding line: the first few hosts show what the others look like; the rest are listed
# by path. Without this bound, 300 failing hosts would turn the appendix into a printout of raw/.
EXCERPTS_PER_FINDING = 3
MAX_EXCERPTS = 150
UNSET = "(unset)"
# A message is a sentence or two; anything longer is a dumped log that belongs in the evidence.
MESSAGE_CHARS = 2000


def show(value: Any, limit: int = 400) -> str:
    """A results value as one line of text: strings as they are, structures as compact JSON."""
    if value is None:
        return "—"
    text = (
        value
        if isinstance(value, str)
        else json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    )
    return text if len(text) <= limit else f"{text[:limit]}… [+{len(text) - limit} characters]"


def format_time(stamp: Any) -> str:
    """An ISO timestamp as a reader writes it (seconds, offset kept); anything else as given."""
    if not isinstance(stamp, str) or not stamp:
        return "—"
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return stamp
    offset = moment.strftime("%z")
    zone = "UTC" if offset in ("+0000", "") else f"UTC{offset[:3]}:{offset[3:]}"
    return f"{moment:%Y-%m-%d %H:%M:%S} {zone}" if offset else f"{moment:%Y-%m-%d %H:%M:%S}"


def _duration(started: Any, finished: Any) -> str | None:
    try:
        seconds = (datetime.fromisoformat(finished) - datetime.fromisoformat(started)).total_seconds()
    except (TypeError, ValueError):
        return None
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


def _host_label(host: Any) -> str:
    return CLUSTER if host is None else str(host)


@dataclass
class Cover:
    """The sign-off page."""

    cluster: str
    run_id: str
    started: str
    finished: str
    duration: str | None
    tool_version: str
    operator: str
    playbook: str
    profile: str
    argv: str
    nodes: int
    reachable: int
    unreachable: str
    gpus: int
    verdict: str
    verdict_note: str
    counts: dict[str, int]
    benchmark_counts: dict[str, int]


def build_cover(results: dict[str, Any]) -> Cover:
    run = results.get("run") or {}
    hosts = results.get("hosts") or []
    checks = results.get("checks") or []
    counts = Counter(str(c.get("status")) for c in checks)
    bench_counts = Counter(str(b.get("status")) for b in results.get("benchmarks") or [])
    verdict = results.get("verdict")
    note = ""
    if verdict == "INCOMPLETE":
        found = ", ".join(f"{counts[s]} {s}" for s in ("FAIL", "ERROR") if counts.get(s))
        note = "the run was interrupted: hosts or stages are missing" + (
            f"; found so far: {found}" if found else ""
        )
        if run.get("not_stopped"):
            note += f"; could not stop: {'; '.join(map(str, run['not_stopped']))}"
    elif verdict not in ("PASS", "FAIL", "ERROR"):
        judged = worst([s for s in counts if s in SEVERITY])
        verdict = "FAIL" if judged == "FAIL" else "ERROR" if judged == "ERROR" else "INCOMPLETE"
        note = "the run did not record a verdict (interrupted?); this one is derived from the checks present"
    elif verdict == "PASS" and counts.get("WARN"):
        note = f"accepted with {counts['WARN']} warning(s): see the findings"
    gpus = sum(
        h["environment"]["gpu_count"]
        for h in hosts
        if isinstance(h.get("environment"), dict) and isinstance(h["environment"].get("gpu_count"), int)
    )
    argv = run.get("argv")
    return Cover(
        cluster=str(run.get("cluster") or run.get("inventory") or "—"),
        run_id=str(run.get("id") or "—"),
        started=format_time(run.get("started")),
        finished=format_time(run.get("finished")) if run.get("finished") else "— (not finished)",
        duration=_duration(run.get("started"), run.get("finished")),
        tool_version=str(run.get("tool_version") or "—"),
        operator=str(run.get("operator") or os.environ.get("USER") or "—"),
        playbook=str(run.get("playbook") or "—"),
        profile=str(run.get("profile") or "—")
        + (f" — {run['profile_note']}" if isinstance(run.get("profile_note"), str) else ""),
        argv=" ".join(str(a) for a in argv) if isinstance(argv, list) else show(argv),
        nodes=len(hosts),
        reachable=sum(1 for h in hosts if h.get("reachable")),
        unreachable=summarize(str(h.get("name")) for h in hosts if not h.get("reachable")),
        gpus=gpus,
        verdict=str(verdict),
        verdict_note=note,
        counts={s: counts.get(s, 0) for s in STATUSES},
        benchmark_counts={s: bench_counts.get(s, 0) for s in STATUSES if s != "SKIP"},
    )


@dataclass
class EvidenceIndex:
    """The excerpts the appendix quotes, each under a stable anchor, in the order findings cite them."""

    base_dir: Path
    anchors: dict[str, str] = field(default_factory=dict)
    excerpts: list[tuple[str, Excerpt, list[str]]] = field(default_factory=list)
    omitted: set[str] = field(default_factory=set)

    def cite(self, path: str, cited_by: str) -> str | None:
        """The anchor of ``path``'s excerpt, quoting it on first use; None once the appendix is full."""
        if path not in self.anchors:
            if len(self.excerpts) >= MAX_EXCERPTS:
                self.omitted.add(path)
                return None
            self.anchors[path] = f"ev-{len(self.excerpts) + 1}"
            self.excerpts.append((self.anchors[path], read_excerpt(self.base_dir, path), []))
        anchor = self.anchors[path]
        users = self.excerpts[int(anchor.removeprefix("ev-")) - 1][2]
        if cited_by not in users:
            users.append(cited_by)
        return anchor


@dataclass
class FindingLine:
    """Hosts that failed one check the same way."""

    hosts: str
    host_count: int
    message: str
    observed: str
    expected: str
    evidence: list[tuple[str, str, str | None]]  # (host, path, anchor)
    evidence_more: int


@dataclass
class Finding:
    status: str
    check_id: str
    checklist: str
    remediation: str
    lines: list[FindingLine]
    host_count: int


def build_findings(checks: list[dict[str, Any]], evidence: EvidenceIndex) -> list[Finding]:
    """Non-passing results, worst first, with identical failures on many hosts folded into one line."""
    groups: dict[tuple[str, str, str], dict[tuple[str, str, str], list[dict[str, Any]]]] = {}
    for row in checks:
        status = row.get("status")
        if status not in ("FAIL", "ERROR", "WARN"):
            continue
        key = (str(status), str(row.get("id", "?")), str(row.get("remediation") or ""))
        line_key = (
            show(row.get("message") or "", MESSAGE_CHARS),
            show(row.get("observed")),
            show(row.get("expected")),
        )
        groups.setdefault(key, {}).setdefault(line_key, []).append(row)
    ordered = sorted(
        groups.items(), key=lambda kv: (-SEVERITY[kv[0][0]], -sum(len(v) for v in kv[1].values()), kv[0][1])
    )
    findings = []
    for (status, check_id, remediation), lines in ordered:
        built = []
        for (message, observed, expected), rows in sorted(lines.items(), key=lambda kv: -len(kv[1])):
            rows.sort(key=lambda r: natural_key(_host_label(r.get("host"))))
            cited = [r for r in rows if r.get("evidence")]
            links = [
                (
                    _host_label(r.get("host")),
                    str(r["evidence"]),
                    evidence.cite(str(r["evidence"]), f"{check_id} on {_host_label(r.get('host'))}"),
                )
                for r in cited[:EXCERPTS_PER_FINDING]
            ]
            names = [_host_label(r.get("host")) for r in rows]
            built.append(
                FindingLine(
                    summarize(names), len(names), message, observed, expected, links, len(cited) - len(links)
                )
            )
        first = next(iter(lines.values()))[0]
        findings.append(
            Finding(
                status,
                check_id,
                str(first.get("checklist") or "–"),
                remediation,
                built,
                sum(line.host_count for line in built),
            )
        )
    return findings


@dataclass
class MatrixRow:
    hosts: str
    host_count: int
    cells: list[str]  # a status, or "" where the check has no result for these hosts
    worst: str


@dataclass
class Matrix:
    columns: list[str]
    rows: list[MatrixRow]
    host_total: int


def _column_order(check_id: str) -> tuple[int, int, str]:
    if check_id == "host.reachable":
        return (0, 0, check_id)
    for position, (_number, _title, specs) in enumerate(SECTIONS, start=1):
        for index, spec in enumerate(specs):
            if any(check_id == s or (s.endswith("*") and check_id.startswith(s[:-1])) for s in spec.sources):
                return (position, index, check_id)
    return (len(SECTIONS) + 1, 0, check_id)


def build_matrix(results: dict[str, Any]) -> Matrix:
    """The host × check grid with hosts of identical status rows folded together, troubled rows first.

    On a healthy 512-host cluster nearly every host has the same row; folding them leaves one line for the
    healthy majority and one per distinct kind of trouble, which is what the reader needs to see.
    """
    per_host: dict[str, dict[str, str]] = {}
    for row in results.get("checks") or []:
        host = row.get("host")
        if host is None:
            continue
        cells = per_host.setdefault(str(host), {})
        cells[str(row.get("id", "?"))] = worst(
            [s for s in (cells.get(str(row.get("id", "?"))), row.get("status")) if s in SEVERITY]
        )
    for host in results.get("hosts") or []:
        per_host.setdefault(str(host.get("name")), {})
    columns = sorted({c for cells in per_host.values() for c in cells}, key=_column_order)
    folded: dict[tuple[str, ...], list[str]] = {}
    for host, cells in per_host.items():
        folded.setdefault(tuple(cells.get(c, "") for c in columns), []).append(host)
    rows = [
        MatrixRow(
            summarize(hosts, limit=600), len(hosts), list(signature), worst([s for s in signature if s])
        )
        for signature, hosts in folded.items()
    ]
    rows.sort(key=lambda r: (-SEVERITY[r.worst], -sum(SEVERITY[s] >= 2 for s in r.cells if s), -r.host_count))
    return Matrix(columns, rows, len(per_host))


@dataclass
class EnvRow:
    hosts: str
    host_count: int
    values: list[tuple[str, bool]]  # (value, differs from the majority)


@dataclass
class NcclVar:
    name: str
    uniform: bool
    values: list[tuple[str, str, int]]  # (value, folded hosts, count)


@dataclass
class Environment:
    rows: list[EnvRow]
    majority: list[str]
    mismatched: list[str]
    nccl_vars: list[NcclVar]
    missing: str
    missing_count: int
    #: (pod, node) for every host that is a Kubernetes pod, in host order.
    pod_nodes: list[tuple[str, str]] = field(default_factory=list)


def build_environment(results: dict[str, Any]) -> Environment:
    """Hosts grouped by identical software stack; values that differ from the majority are flagged."""
    envs = {
        str(h.get("name")): h["environment"]
        for h in results.get("hosts") or []
        if isinstance(h.get("environment"), dict) and h["environment"]
    }
    missing = [str(h.get("name")) for h in results.get("hosts") or [] if str(h.get("name")) not in envs]
    stacks: dict[tuple[str, ...], list[str]] = {}
    for name, env in envs.items():
        stacks.setdefault(tuple(show(env.get(key), 200) for key, _ in ENV_FIELDS), []).append(name)
    majority = []
    for index in range(len(ENV_FIELDS)):
        votes: Counter[str] = Counter()
        for stack, hosts in stacks.items():
            votes[stack[index]] += len(hosts)
        majority.append(votes.most_common(1)[0][0] if votes else "—")
    rows = [
        EnvRow(
            summarize(hosts),
            len(hosts),
            [(value, value != majority[i]) for i, value in enumerate(stack)],
        )
        for stack, hosts in sorted(stacks.items(), key=lambda kv: -len(kv[1]))
    ]
    mismatched = [label for i, (_key, label) in enumerate(ENV_FIELDS) if any(r.values[i][1] for r in rows)]
    names: set[str] = set()
    for env in envs.values():
        if isinstance(env.get("nccl_env"), dict):
            names.update(env["nccl_env"])
    nccl_vars = []
    for name in sorted(names):
        holders: dict[str, list[str]] = {}
        for host, env in envs.items():
            nccl_env = env.get("nccl_env") if isinstance(env.get("nccl_env"), dict) else {}
            holders.setdefault(show(nccl_env.get(name, UNSET), 300), []).append(host)
        values = [(v, summarize(h), len(h)) for v, h in sorted(holders.items(), key=lambda kv: -len(kv[1]))]
        nccl_vars.append(NcclVar(name, len(values) == 1, values))
    nccl_vars.sort(key=lambda v: (v.uniform, v.name))
    pod_nodes = [(name, str(env["k8s_node"])) for name, env in envs.items() if env.get("k8s_node")]
    return Environment(rows, majority, mismatched, nccl_vars, summarize(missing), len(missing), pod_nodes)


@dataclass
class BenchRow:
    size: str
    bytes: int
    time_us: str
    algbw: str
    busbw: str
    wrong: str
    wrong_bad: bool
    below: bool  # a large message under the expected busbw


@dataclass
class Benchmark:
    index: int
    collective: str
    status: str
    message: str
    tool: str
    backend: str
    nodes: str
    ranks: str
    hosts: str
    expected: float | None
    normal: tuple[float, float] | None  # the range the benchmark rule calls normal
    peak: str
    inter_node: str
    intra_node: str
    gdrdma: str
    straggler: list[str]
    curve: tuple[str, str]
    rows: list[BenchRow]
    raw_rows: list[dict[str, Any]]
    svg: str = ""  # filled in by the HTML renderer, which owns the plotting


def _num(value: Any, digits: int = 2) -> str:
    return f"{value:,.{digits}f}" if isinstance(value, int | float) and not isinstance(value, bool) else "—"


def _straggler(bench: dict[str, Any], checks: list[dict[str, Any]]) -> list[str]:
    """The pair search's verdicts (``bench.straggler`` checks) that concern this benchmark's collective."""
    collective = str(bench.get("collective", ""))
    return [
        f"{_host_label(row.get('host'))} ({row.get('status')}): {show(row.get('message') or '', MESSAGE_CHARS)}"
        for row in checks
        if row.get("id") == "bench.straggler" and collective and collective in str(row.get("message") or "")
    ]


def _normal_range(bench: dict[str, Any]) -> tuple[float, float] | None:
    """The normal busbw range: as recorded, or the benchmark rule's default tolerance around the expected."""
    recorded = bench.get("normal_range_gbps")
    if (
        isinstance(recorded, list)
        and len(recorded) == 2
        and all(isinstance(v, int | float) and not isinstance(v, bool) for v in recorded)
    ):
        return float(recorded[0]), float(recorded[1])
    expected = bench.get("expected_busbw_gbps")
    if isinstance(expected, int | float) and not isinstance(expected, bool):
        return expected * (1 - DEFAULT_TOLERANCE), expected * (1 + DEFAULT_TOLERANCE)
    return None


def _below(row: dict[str, Any], normal: tuple[float, float] | None) -> bool:
    busbw = row.get("busbw_gbps")
    return (
        normal is not None
        and isinstance(busbw, int | float)
        and isinstance(row.get("bytes"), int)
        and row["bytes"] >= LARGE_BYTES
        and busbw < normal[0]
    )


def build_benchmarks(results: dict[str, Any]) -> list[Benchmark]:
    checks = results.get("checks") or []
    out = []
    for index, bench in enumerate(results.get("benchmarks") or [], start=1):
        raw_rows = [r for r in bench.get("rows") or [] if isinstance(r, dict)]
        raw_rows.sort(key=lambda r: r.get("bytes") if isinstance(r.get("bytes"), int) else -1)
        busbws = [r["busbw_gbps"] for r in raw_rows if isinstance(r.get("busbw_gbps"), int | float)]
        transport = bench.get("transport") if isinstance(bench.get("transport"), dict) else {}
        intra = transport.get("intra_node")
        gdr = transport.get("gdrdma")
        expected = bench.get("expected_busbw_gbps")
        normal = _normal_range(bench)
        out.append(
            Benchmark(
                index=index,
                collective=str(bench.get("collective") or "?"),
                status=str(bench.get("status") or "ERROR"),
                message=show(bench.get("message") or "", MESSAGE_CHARS),
                tool=str(bench.get("tool") or "—"),
                backend=str(bench.get("backend") or "—"),
                nodes=show(bench.get("nodes")),
                ranks=show(bench.get("ranks")),
                hosts=summarize(str(h) for h in bench.get("hosts") or []) or "—",
                expected=float(expected) if isinstance(expected, int | float) else None,
                normal=normal,
                peak=_num(max(busbws), 1) if busbws else "—",
                inter_node=str(transport.get("inter_node") or "none (single node or not seen in the log)"),
                intra_node=", ".join(str(x) for x in intra) if isinstance(intra, list) and intra else "—",
                gdrdma="yes" if gdr is True else "no" if gdr is False else "unknown",
                straggler=_straggler(bench, checks),
                curve=curve_shape(raw_rows),
                rows=[
                    BenchRow(
                        size=human_bytes(r["bytes"])
                        if isinstance(r.get("bytes"), int)
                        else show(r.get("bytes")),
                        bytes=r["bytes"] if isinstance(r.get("bytes"), int) else 0,
                        time_us=_num(r.get("time_us"), 1),
                        algbw=_num(r.get("algbw_gbps")),
                        busbw=_num(r.get("busbw_gbps")),
                        wrong=show(r.get("wrong")),
                        wrong_bad=isinstance(r.get("wrong"), int) and r["wrong"] > 0,
                        below=_below(r, normal),
                    )
                    for r in raw_rows
                ],
                raw_rows=raw_rows,
            )
        )
    return out


@dataclass
class ClusterRow:
    check_id: str
    status: str
    message: str
    observed: str
    expected: str


@dataclass
class TrendRun:
    run_id: str
    started: str
    verdict: str
    counts: str
    role: str


@dataclass
class History:
    """The nightly trend (diagnose.history.trend_for_report), or its raw keys when its shape is unknown."""

    series: str
    runs: list[TrendRun]
    # collective -> band label -> busbw per run (None where the run had no such value), aligned with runs
    busbw: dict[str, dict[str, list[float | None]]]
    other: list[tuple[str, str]]
    plots: dict[str, str] = field(default_factory=dict)  # filled in by the HTML renderer


def _floats(values: Any) -> list[float | None] | None:
    if not isinstance(values, list):
        return None
    return [float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None for v in values]


def build_history(history: Any) -> History | None:
    """The trend block a nightly run adds; tolerant of older or newer shapes (shown as key/value rows)."""
    trend = history.get("trend") if isinstance(history, dict) else None
    if not isinstance(trend, dict):
        return None
    known = {"series", "runs", "busbw", "references", "bands"}
    series = trend.get("series") if isinstance(trend.get("series"), dict) else {}
    refs = trend.get("references") if isinstance(trend.get("references"), dict) else {}
    labels = {
        str(b.get("key")): str(b.get("label") or b.get("key"))
        for b in trend.get("bands") or []
        if isinstance(b, dict)
    }
    runs = []
    for run in trend.get("runs") or []:
        if not isinstance(run, dict):
            continue
        counts = run.get("counts") if isinstance(run.get("counts"), dict) else {}
        roles = [
            name
            for key, name in (("last_good", "last good"), ("baseline", "baseline"))
            if refs.get(key) == run.get("id")
        ]
        runs.append(
            TrendRun(
                str(run.get("id") or "—"),
                format_time(run.get("started")),
                str(run.get("verdict") or "—"),
                ", ".join(f"{n} {s}" for s, n in counts.items() if n),
                ", ".join(roles),
            )
        )
    busbw: dict[str, dict[str, list[float | None]]] = {}
    raw_busbw = trend.get("busbw") if isinstance(trend.get("busbw"), dict) else {}
    for collective, bands in raw_busbw.items():
        if isinstance(bands, dict):
            lines = {labels.get(str(k), str(k)): _floats(v) for k, v in bands.items()}
            busbw[str(collective)] = {k: v for k, v in lines.items() if v is not None and len(v) == len(runs)}
    return History(
        series=" · ".join(str(v) for v in series.values()) or "—",
        runs=runs,
        busbw={c: b for c, b in busbw.items() if b},
        other=[(str(k), show(v)) for k, v in trend.items() if k not in known],
    )


@dataclass
class Report:
    """Everything the template needs."""

    cover: Cover
    checklist: list[SectionResult]
    findings: list[Finding]
    cluster_checks: list[ClusterRow]
    matrix: Matrix
    benchmarks: list[Benchmark]
    environment: Environment
    evidence: EvidenceIndex
    history: History | None
    parts: list[tuple[Part, Any]]


def build_report(results: dict[str, Any], base_dir: Path) -> Report:
    """The whole report's content from a cleaned results dict and the folder its evidence paths start in."""
    checks = [c for c in results.get("checks") or [] if isinstance(c, dict)]
    evidence = EvidenceIndex(base_dir)
    return Report(
        cover=build_cover(results),
        checklist=build_checklist(results),
        findings=build_findings(checks, evidence),
        cluster_checks=[
            ClusterRow(
                str(c.get("id", "?")),
                str(c.get("status")),
                show(c.get("message") or "", MESSAGE_CHARS),
                show(c.get("observed")),
                show(c.get("expected")),
            )
            for c in sorted(checks, key=lambda c: _column_order(str(c.get("id", "?"))))
            if c.get("host") is None
        ],
        matrix=build_matrix(results),
        benchmarks=build_benchmarks(results),
        environment=build_environment(results),
        evidence=evidence,
        history=build_history(results.get("history")),
        parts=build_parts(results),
    )
