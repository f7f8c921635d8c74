"""results.json folded into what the report shows, chapter by chapter.

The templates only lay out what the view modules decide: which findings come first, how 512 hosts fold
into a few matrix rows, which environment values stand out, which evidence files the appendix quotes.
Keeping these choices in plain functions makes them testable without rendering anything, and keeps the
templates free of logic that would otherwise be duplicated between HTML and PDF. This module holds the
cover page and assembles the chapters: findings and matrix (``view_findings``), benchmarks
(``view_benchmarks``), environment (``view_environment``), trend (``view_history``) and the parts.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from diagnose.core.model import SEVERITY, STATUSES, worst
from diagnose.core.units import MISSING, counted, duration
from diagnose.render.causes import causes_of
from diagnose.render.checklist import NOT_COVERED, OTHER_SECTION, SectionResult, build_checklist
from diagnose.render.hostlist import summarize
from diagnose.render.parts import Part, build_parts
from diagnose.render.stage_times import stage_text
from diagnose.render.tally import coverage_line, coverage_of
from diagnose.render.text import MESSAGE_CHARS, format_time, show
from diagnose.render.values import Shown, shown
from diagnose.render.view_benchmarks import Benchmark, build_benchmarks
from diagnose.render.view_environment import Environment, build_environment
from diagnose.render.view_findings import (
    ActionRow,
    EvidenceIndex,
    Finding,
    Matrix,
    build_actions,
    build_findings,
    build_matrix,
    column_order,
)
from diagnose.render.view_history import History, build_history


def _duration(started: Any, finished: Any) -> str | None:
    try:
        seconds = (datetime.fromisoformat(finished) - datetime.fromisoformat(started)).total_seconds()
    except (TypeError, ValueError):
        return None
    return duration(seconds)


def _profile(run: dict[str, Any]) -> str:
    """The cover's profile line: the profile, the run's note on it and the suggested one, each only when
    recorded. A run without a profile has a note that says so, which must not follow a placeholder dash
    (the cover read "— — no profile chosen")."""
    suggested = run.get("profile_suggestion")
    parts = [
        str(run["profile"]) if run.get("profile") else "",
        run["profile_note"] if isinstance(run.get("profile_note"), str) else "",
        str(suggested.get("text") or "") if isinstance(suggested, dict) else "",
    ]
    return " — ".join(p for p in parts if p) or MISSING


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
    limited: bool  # a PASS on under half of its results: the cover must not read as an acceptance
    coverage: str  # what the verdict stands on, one line (diagnose.render.tally.coverage_line)
    checklist_coverage: str  # how many checklist items the run answered, and how many it did not
    stages: list[str]  # each stage's time as the progress lines said it; a stage cut short says so


def build_cover(results: dict[str, Any], checklist: list[SectionResult] | None = None) -> Cover:
    """The sign-off page: what ran where and when, and the verdict the run recorded (derived only if none).
    ``checklist``: the run's, when the caller has built it already (it reads every row)."""
    run = results.get("run") or {}
    hosts = results.get("hosts") or []
    coverage = coverage_of(results)
    counts = coverage.counts
    bench_counts = Counter(str(b.get("status")) for b in results.get("benchmarks") or [])
    verdict = results.get("verdict")
    note = ""
    if verdict == "INCOMPLETE":
        found = ", ".join(f"{counts[s]} {s}" for s in ("FAIL", "ERROR") if counts.get(s))
        note = "the run was interrupted: hosts or stages are missing" + (
            f"; found so far: {found}" if found else ""
        )
        if run.get("stopped"):
            note += f"; stopped: {'; '.join(map(str, run['stopped']))}"
        if run.get("not_stopped"):
            note += f"; could not stop: {'; '.join(map(str, run['not_stopped']))}"
    elif verdict not in ("PASS", "FAIL", "ERROR"):
        judged = worst([s for s, n in counts.items() if n and s in SEVERITY])
        verdict = "FAIL" if judged == "FAIL" else "ERROR" if judged == "ERROR" else "INCOMPLETE"
        note = "the run did not record a verdict (interrupted?); this one is derived from the checks present"
    elif verdict == "PASS" and counts.get("WARN"):
        note = f"accepted with {counted(counts['WARN'], 'warning')}: see the findings"
    gpus = sum(
        h["environment"]["gpu_count"]
        for h in hosts
        if isinstance(h.get("environment"), dict) and isinstance(h["environment"].get("gpu_count"), int)
    )
    argv = run.get("argv")
    return Cover(
        cluster=str(run.get("cluster") or run.get("inventory") or MISSING),
        run_id=str(run.get("id") or MISSING),
        started=format_time(run.get("started")),
        finished=format_time(run.get("finished")) if run.get("finished") else "— (not finished)",
        duration=_duration(run.get("started"), run.get("finished")),
        tool_version=str(run.get("tool_version") or MISSING),
        operator=str(run.get("operator") or os.environ.get("USER") or MISSING),
        playbook=str(run.get("playbook") or MISSING),
        profile=_profile(run),
        argv=" ".join(str(a) for a in argv) if isinstance(argv, list) else show(argv),
        nodes=len(hosts),
        reachable=sum(1 for h in hosts if h.get("reachable")),
        unreachable=summarize(str(h.get("name")) for h in hosts if not h.get("reachable")),
        gpus=gpus,
        verdict=str(verdict),
        verdict_note=note,
        counts=dict(counts),
        benchmark_counts={s: bench_counts.get(s, 0) for s in STATUSES if s != "SKIP"},
        limited=verdict == "PASS" and coverage.limited,
        coverage=coverage_line(str(verdict), coverage),
        checklist_coverage=checklist_coverage(build_checklist(results) if checklist is None else checklist),
        stages=[stage_text(e) for e in run.get("stages") or [] if isinstance(e, dict)],
    )


def checklist_coverage(sections: list[SectionResult]) -> str:
    """``12 of 31 checklist items answered; 9 skipped, 10 NOT COVERED by this run``.

    Items no check of the run answers are not results of the run, so they are outside the verdict's
    coverage (docs/contracts.md); the cover says how many there are, since they are not passed either.
    """
    items = [i for s in sections if s.number != OTHER_SECTION[0] for i in s.items]
    status = Counter(i.status for i in items)
    answered = len(items) - status[NOT_COVERED] - status["SKIP"]
    rest = [
        f"{n} {word}" for n, word in ((status["SKIP"], "skipped"), (status[NOT_COVERED], NOT_COVERED)) if n
    ]
    tail = ", ".join(rest)
    return f"{answered} of {len(items)} checklist items answered" + (f"; {tail} by this run" if tail else "")


@dataclass
class ClusterRow:
    check_id: str
    status: str
    message: str
    observed: Shown
    expected: Shown


#: Causes the first page lists, worst first; the findings chapter holds every one.
COVER_CAUSES = 5


@dataclass(frozen=True)
class Chapter:
    """A chapter's anchor, number and title: the contents and the headings read them from one list."""

    key: str
    number: str
    title: str


BENCHMARKS_TITLE = "Benchmarks"
APPENDIX_TITLE = "Appendix: evidence excerpts"


def chapters(
    parts: list[tuple[Part, Any]], has_history: bool, has_benchmarks: bool = True, has_evidence: bool = True
) -> dict[str, Chapter]:
    """The report's chapters in order, numbered 1, 2, 3, ... and the appendix A, by anchor. The benchmarks
    and the appendix are left out when the run has none to show (see :func:`left_out`)."""
    titles = [
        ("checklist", "Operational checklist"),
        ("findings", "Findings by cause, worst first"),
        ("matrix", "Host × check matrix"),
        *((("benchmarks", BENCHMARKS_TITLE),) if has_benchmarks else ()),
        *((part.key, part.title) for part, _data in parts),
        ("environment", "Environment record"),
        *((("history", "History"),) if has_history else ()),
    ]
    numbered = {key: Chapter(key, str(n), title) for n, (key, title) in enumerate(titles, start=1)}
    return numbered | ({"appendix": Chapter("appendix", "A", APPENDIX_TITLE)} if has_evidence else {})


def left_out(empty_parts: list[Part], has_benchmarks: bool, has_evidence: bool) -> list[str]:
    """The chapters a run has nothing for, each with why where the title does not say it: a small run's
    report was mostly pages that said "not measured", so they are named in one line of the contents
    instead. The findings, matrix, checklist and environment stay: they say what was and was not judged."""
    named = (
        [] if has_benchmarks else [f"{BENCHMARKS_TITLE} (none ran: checklist items 3.2 and 3.3 not covered)"]
    )
    named += [f"{part.title} ({part.left_out_because})" for part in empty_parts]
    return named + ([] if has_evidence else [f"{APPENDIX_TITLE} (no finding cites evidence)"])


@dataclass
class Report:
    """Everything the template needs."""

    cover: Cover
    checklist: list[SectionResult]
    findings: list[Finding]
    top_causes: list[Finding]  # the first page's: empty on a PASS (warnings are in the findings chapter)
    actions: list[ActionRow]
    cluster_checks: list[ClusterRow]
    matrix: Matrix
    benchmarks: list[Benchmark]
    environment: Environment
    evidence: EvidenceIndex
    history: History | None
    parts: list[tuple[Part, Any]]
    chapters: dict[str, Chapter]
    left_out: list[str]  # chapters with nothing measured: named in the contents, not printed


def build_report(results: dict[str, Any], base_dir: Path) -> Report:
    """The whole report's content from a cleaned results dict and the folder its evidence paths start in."""
    checks = [c for c in results.get("checks") or [] if isinstance(c, dict)]
    evidence = EvidenceIndex(base_dir)
    causes = causes_of(results)
    findings = build_findings(causes, evidence)
    parts, empty_parts = build_parts(results)
    history = build_history(results.get("history"))
    checklist = build_checklist(results)
    benchmarks = build_benchmarks(results)
    cited = bool(evidence.excerpts or evidence.omitted)  # the findings above filled it
    return Report(
        cover=build_cover(results, checklist),
        checklist=checklist,
        findings=findings,
        top_causes=findings[:COVER_CAUSES] if results.get("verdict") != "PASS" else [],
        actions=build_actions(causes),
        cluster_checks=[
            ClusterRow(
                str(c.get("id", "?")),
                str(c.get("status")),
                show(c.get("message") or "", MESSAGE_CHARS),
                shown(c.get("observed"), str(c.get("id", ""))),
                shown(c.get("expected"), str(c.get("id", ""))),
            )
            # the cluster-wide rows only, then sorted: not every host's rows sorted to keep a few
            for c in sorted(
                (c for c in checks if c.get("host") is None),
                key=lambda c: column_order(str(c.get("id", "?"))),
            )
        ],
        matrix=build_matrix(results),
        benchmarks=benchmarks,
        environment=build_environment(results),
        evidence=evidence,
        history=history,
        parts=parts,
        chapters=chapters(parts, history is not None, bool(benchmarks), cited),
        left_out=left_out(empty_parts, bool(benchmarks), cited),
    )
