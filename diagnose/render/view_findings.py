"""The findings and the host × check matrix: many hosts failing alike folded into few lines.

On a healthy 512-host cluster nearly every host looks the same; the reader needs one line for the healthy
majority and one per distinct kind of trouble, worst first, with a few quoted excerpts of evidence each.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from diagnose.core.model import SEVERITY, worst
from diagnose.render.checklist import SECTIONS
from diagnose.render.hostlist import natural_key, summarize
from diagnose.render.load import Excerpt, read_excerpt
from diagnose.render.text import MESSAGE_CHARS, host_label, show

# Evidence quoted per finding line: the first few hosts show what the others look like; the rest are listed
# by path. Without this bound, 300 failing hosts would turn the appendix into a printout of raw/.
EXCERPTS_PER_FINDING = 3
MAX_EXCERPTS = 150


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
            rows.sort(key=lambda r: natural_key(host_label(r.get("host"))))
            cited = [r for r in rows if r.get("evidence")]
            links = [
                (
                    host_label(r.get("host")),
                    str(r["evidence"]),
                    evidence.cite(str(r["evidence"]), f"{check_id} on {host_label(r.get('host'))}"),
                )
                for r in cited[:EXCERPTS_PER_FINDING]
            ]
            names = [host_label(r.get("host")) for r in rows]
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
