"""The findings and the host × check matrix: many hosts failing alike folded into few lines.

On a healthy 512-host cluster nearly every host looks the same; the reader needs one line for the healthy
majority and one per distinct kind of trouble, worst first, with a few quoted excerpts of evidence each.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from diagnose.core.model import SEVERITY, worst
from diagnose.render.actions import action_text, needs_doing
from diagnose.render.causes import Cause
from diagnose.render.checklist import CLUSTER, SECTIONS
from diagnose.render.hostlist import natural_key, summarize
from diagnose.render.load import Excerpt, read_excerpt
from diagnose.render.tally import status_of
from diagnose.render.text import MESSAGE_CHARS, host_label, show
from diagnose.render.values import Shown, shown

# Evidence named per finding line: the first few hosts' files by path, the rest counted. Only the first is
# quoted in the appendix: the hosts of one line share check, message, observed and expected, so a second
# quote repeats the first (at 16,384 hosts the appendix was 52 of the PDF's 85 pages, mostly ibstat outputs
# three to a line). Without these bounds, 300 failing hosts would turn the appendix into a printout of raw/.
EXCERPTS_PER_FINDING = 3
MAX_EXCERPTS = 150


@dataclass
class EvidenceIndex:
    """The excerpts the appendix quotes, each under a stable anchor, in the order findings cite them."""

    base_dir: Path
    anchors: dict[str, str] = field(default_factory=dict)
    excerpts: list[tuple[str, Excerpt, list[str]]] = field(default_factory=list)
    omitted: set[str] = field(default_factory=set)

    def cite(self, path: str, cited_by: str, quote: bool = True) -> str | None:
        """The anchor of ``path``'s excerpt, quoting it on first use; None once the appendix is full, or
        when ``quote`` is false and no other finding had it quoted."""
        if path not in self.anchors:
            if not quote:
                return None
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


#: Lines a finding shows (distinct messages or values among its results); the rest are counted.
LINES_PER_FINDING = 6


@dataclass
class FindingLine:
    """Hosts whose results of one cause say exactly the same thing."""

    hosts: str
    host_count: int
    check_id: str
    message: str
    observed: Shown
    expected: Shown
    evidence: list[tuple[str, str, str | None]]  # (host, path, anchor)
    evidence_more: int
    status: str = ""


@dataclass
class Finding:
    """One cause (diagnose.render.causes): however many hosts and checks it shows up in, one block."""

    status: str
    check_id: str  # the first check it shows up in
    check_ids: list[str]
    checklist: str
    remediation: str
    action: str | None  # the recorded action in words, None where the results record none
    todo: str  # the action in words, or without one the remediation's first sentence
    summary: str  # the cause's message in a line, for the cover
    hosts: str
    lines: list[FindingLine]
    where: str  # "3 hosts: node[01-03]", "cluster-wide", "cluster-wide and 1 host: gpu05"
    more_lines: int = 0
    #: ``+5 consequences (gpu.gemm, ...)``: the results measured while this cause stood, which it explains
    consequences: str = ""
    consequence_lines: list[FindingLine] = field(default_factory=list)


def _lines(rows_of_cause: list[dict[str, Any]], evidence: EvidenceIndex) -> list[FindingLine]:
    """The results with identical check, message and values folded into one line, most hosts first."""
    groups: dict[tuple[str, str, str, str], list[dict[str, Any]]] = {}
    for row in rows_of_cause:
        key = (
            str(row.get("id", "?")),
            show(row.get("message") or "", MESSAGE_CHARS),
            show(row.get("observed"), 4000),
            show(row.get("expected"), 4000),
        )
        groups.setdefault(key, []).append(row)
    built = []
    for (check_id, message, _observed, _expected), rows in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        rows.sort(key=lambda r: natural_key(host_label(r.get("host"))))
        cited = [r for r in rows if r.get("evidence")]
        links = [
            (
                host_label(r.get("host")),
                str(r["evidence"]),
                evidence.cite(str(r["evidence"]), f"{check_id} on {host_label(r.get('host'))}", quote=i == 0),
            )
            for i, r in enumerate(cited[:EXCERPTS_PER_FINDING])
        ]
        names = [host_label(r.get("host")) for r in rows]
        built.append(
            FindingLine(
                summarize(names),
                len(names),
                check_id,
                message,
                shown(rows[0].get("observed"), check_id),
                shown(rows[0].get("expected"), check_id),
                links,
                len(cited) - len(links),
                status_of(rows[0]),
            )
        )
    return built


def _where(cause: Cause) -> str:
    hosts = [h for h in cause.hosts if h != CLUSTER]
    named = (
        f"{len(hosts)} host{'' if len(hosts) == 1 else 's'}: {summarize(hosts, limit=160)}" if hosts else ""
    )
    if len(hosts) == len(cause.hosts):
        return named
    return f"{CLUSTER} and {named}" if named else CLUSTER


def build_findings(causes: list[Cause], evidence: EvidenceIndex) -> list[Finding]:
    """One finding per cause, in the causes' order (worst first, then the most hosts): a fault that shows
    up in eleven checks is one block listing them, not eleven blocks saying the same."""
    findings = []
    for cause in causes:
        lines = _lines(cause.rows, evidence)
        consequences = _lines(cause.consequences, evidence)
        checklists = dict.fromkeys(str(r.get("checklist") or "–") for r in cause.rows)
        findings.append(
            Finding(
                status=cause.status,
                check_id=cause.check_ids[0],
                check_ids=cause.check_ids,
                checklist=", ".join(checklists),
                remediation=cause.remediation,
                action=action_text(cause.action),
                todo=cause.what_to_do,
                summary=cause.summary,
                hosts=cause.hosts_text,
                lines=lines[:LINES_PER_FINDING],
                where=_where(cause),
                more_lines=max(0, len(lines) - LINES_PER_FINDING),
                consequences=cause.consequences_text,
                consequence_lines=consequences,
            )
        )
    return findings


@dataclass
class ActionRow:
    """What to do, and on which hosts: the findings grouped by the action their results record."""

    action: str
    hosts: str
    host_count: int
    check_ids: list[str]
    worst: str


def build_actions(causes: list[Cause]) -> list[ActionRow]:
    """Per recorded action (``none`` left out), the hosts it is to be taken on and the checks that ask for
    it, worst first; empty when no result records an action (older results.json)."""
    grouped: dict[str, list[Cause]] = {}
    for cause in causes:
        if needs_doing(cause.action):
            grouped.setdefault(str(cause.action), []).append(cause)
    rows = []
    for action, members in grouped.items():
        hosts = sorted({h for c in members for h in c.hosts}, key=natural_key)
        rows.append(
            ActionRow(
                action=str(action_text(action)),
                hosts=summarize(hosts, limit=300),
                host_count=len(hosts),
                check_ids=list(dict.fromkeys(i for c in members for i in c.check_ids)),
                worst=worst([c.status for c in members]),
            )
        )
    rows.sort(key=lambda r: (-SEVERITY[r.worst], -r.host_count, r.action))
    return rows


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


def column_order(check_id: str) -> tuple[int, int, str]:
    """Where a check's column goes: reachability first, then the checklist's order, unknown ids last."""
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
    for row in results.get("checks") or []:  # some 230,000 rows at 16,384 hosts: the worst kept inline
        host = row.get("host")
        if host is None:
            continue
        cells = per_host.setdefault(str(host), {})
        check_id, status = str(row.get("id", "?")), row.get("status")
        held = cells.get(check_id)  # always a status of SEVERITY: the worst so far
        if status in SEVERITY and (held is None or SEVERITY[status] > SEVERITY[held]):
            cells[check_id] = status
        elif held is None:
            cells[check_id] = worst([])  # no status this version knows: what worst() of none gives
    for host in results.get("hosts") or []:
        per_host.setdefault(str(host.get("name")), {})
    columns = sorted({c for cells in per_host.values() for c in cells}, key=column_order)
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
