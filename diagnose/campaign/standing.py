"""Where a campaign stands: each host accepted, pending, failed, repaired or excluded, and the cluster's
phases. Pure: a :class:`~diagnose.campaign.ledger.Ledger` in, a :class:`Standing` out, which
``campaign status`` prints, ``campaign next`` plans from and the certificate is made of.

A host is *accepted* when every phase its campaign needs has standing evidence that passed (a SKIP counts: the
phase does not apply there, and the row says why). It is *failed* while a phase's latest evidence failed, and
*repaired* once the operator (or a replaced part) said it was repaired after that failure: it needs a retest.
Otherwise it is *pending*, with the phases still missing and, for each one voided, the event that voided it.
The cluster needs a collective over at least every accepted host, and the training reference where the
playbook runs one.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from diagnose.campaign import phases as ph
from diagnose.campaign.ledger import ClusterRow, Ledger, Row
from diagnose.core.units import counted

STATES = ("accepted", "pending", "failed", "repaired", "excluded")


@dataclass(frozen=True)
class HostStanding:
    host: str
    state: str
    missing: tuple[str, ...] = ()  # phases without standing evidence
    voided: dict[str, str] = field(default_factory=dict)  # phase -> the event that voided it
    cause: str | None = None  # failed / repaired: the failure's words
    action: str | None = None
    failed_run: str | None = None
    note: str | None = None  # excluded: the reason; repaired: the repair note
    checked_since_repair: bool = False  # repaired: its host checks ran after the repair (its parts are read)

    def line(self) -> str:
        """One line for the status table's last column."""
        if self.state == "accepted":
            return ""
        if self.state == "excluded":
            return self.note or ""
        if self.state in ("failed", "repaired"):
            prefix = f"repaired ({self.note}), needs a retest; was: " if self.state == "repaired" else ""
            action = f" → {self.action}" if self.action and self.action != "none" else ""
            return f"{prefix}{self.cause}{action} (run {self.failed_run})"
        parts = []
        for phase in self.missing:
            why = self.voided.get(phase)
            parts.append(f"{ph.WORDS[phase]} (void: {why})" if why else ph.WORDS[phase])
        return "missing " + ", ".join(parts)


@dataclass(frozen=True)
class ClusterStanding:
    phase: str
    satisfied: bool
    row: ClusterRow | None
    why: str


@dataclass
class Standing:
    name: str
    needs: ph.Needs
    hosts: list[HostStanding]
    cluster: list[ClusterStanding]
    counts: dict[str, int]
    runs: int
    first_run: str | None
    last_run: str | None

    @property
    def accepted(self) -> list[str]:
        return [h.host for h in self.hosts if h.state == "accepted"]

    @property
    def verdict(self) -> str:
        done = self.counts["accepted"] > 0 and all(
            self.counts[s] == 0 for s in ("pending", "failed", "repaired")
        )
        return "ACCEPTED" if done and all(c.satisfied for c in self.cluster) else "NOT ACCEPTED"

    def fraction_accepted(self) -> float:
        counted = len(self.hosts) - self.counts["excluded"]
        return self.counts["accepted"] / counted if counted else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "campaign": self.name,
            "verdict": self.verdict,
            "counts": dict(self.counts),
            "runs": self.runs,
            "first_run": self.first_run,
            "last_run": self.last_run,
            "needs": self.needs.to_dict(),
            "cluster": [
                {
                    "phase": c.phase,
                    "satisfied": c.satisfied,
                    "why": c.why,
                    "run_id": c.row.run_id if c.row else None,
                    "at": c.row.at if c.row else None,
                    "verdict": c.row.verdict if c.row else None,
                    "nodes": len(c.row.hosts) if c.row else None,
                    "detail": c.row.detail if c.row else None,
                }
                for c in self.cluster
            ],
            "hosts": [
                {
                    "host": h.host,
                    "state": h.state,
                    "missing": list(h.missing),
                    "voided": h.voided,
                    "cause": h.cause,
                    "action": h.action,
                    "failed_run": h.failed_run,
                    "note": h.note,
                }
                for h in self.hosts
            ],
        }


def _host(ledger: Ledger, host: str, needed: tuple[str, ...]) -> HostStanding:
    marks = ledger.hosts.get(host) or {}
    if marks.get("excluded"):
        excluded = marks["excluded"]
        return HostStanding(
            host,
            "excluded",
            note=f"{excluded.get('reason')} ({excluded.get('by')}, {str(excluded.get('at'))[:10]})",
        )
    rows: dict[str, Row] = ledger.rows.get(host, {})
    missing, voided = [], {}
    for phase in ph.ordered({*needed, *(r.phase for r in rows.values() if not r.passed)}):
        row = rows.get(phase)
        if row is not None and row.passed and row.voided is None:
            continue
        missing.append(phase)
        if row is not None and row.voided is not None:
            voided[phase] = ledger.voiding.get(row.voided, f"event {row.voided}")
    failures = sorted((r for r in rows.values() if not r.passed), key=lambda r: r.at, reverse=True)
    if not failures:
        return HostStanding(host, "pending" if missing else "accepted", tuple(missing), voided)
    latest = failures[0]
    repair = marks.get("repaired")
    state = "repaired" if repair and str(repair.get("at")) >= latest.at else "failed"
    checks = rows.get(ph.HOST)
    checked = bool(repair and checks and checks.passed and checks.at > str(repair.get("at")))
    return HostStanding(
        host,
        state,
        missing=tuple(missing),
        voided=voided,
        cause=f"{ph.WORDS[latest.phase]}: {latest.detail.get('message') or latest.verdict}",
        action=latest.detail.get("action"),
        failed_run=latest.run_id,
        note=str(repair.get("note") or repair.get("by") or "") if state == "repaired" and repair else None,
        checked_since_repair=checked,
    )


def _cluster(ledger: Ledger, phase: str, accepted: list[str], total: int) -> ClusterStanding:
    row = ledger.cluster.get(phase)
    if row is None:
        return ClusterStanding(phase, False, None, "not run yet")
    if row.voided is not None:
        return ClusterStanding(phase, False, row, f"void: {ledger.voiding.get(row.voided, row.voided)}")
    if row.verdict not in ("PASS", "WARN", "SKIP"):
        return ClusterStanding(phase, False, row, f"{row.verdict} in run {row.run_id}: {row.detail}")
    if phase == ph.FULL_SCALE:
        left = sorted(set(accepted) - set(row.hosts))
        if left or (total > 1 and len(row.hosts) < 2):
            return ClusterStanding(
                phase, False, row, f"ran on {len(row.hosts)} hosts; {len(left)} accepted since are not in it"
            )
    return ClusterStanding(
        phase, True, row, f"{row.verdict} in run {row.run_id} ({row.at[:10]}): {row.detail}"
    )


def standing(ledger: Ledger) -> Standing:
    hosts = sorted(ledger.hosts)
    needed = ledger.needs.host
    if sum(1 for h in hosts if not (ledger.hosts[h] or {}).get("excluded")) < 2:  # nobody to pair with
        needed = tuple(p for p in needed if p != ph.COLLECTIVE)
    rows = [_host(ledger, host, needed) for host in hosts]
    counts = Counter(h.state for h in rows)
    accepted = [h.host for h in rows if h.state == "accepted"]
    counted = len(hosts) - counts["excluded"]
    cluster_needs = (
        ledger.needs.cluster if counted > 1 else tuple(p for p in ledger.needs.cluster if p != ph.FULL_SCALE)
    )
    cluster = [_cluster(ledger, phase, accepted, counted) for phase in cluster_needs]
    return Standing(
        name=ledger.name,
        needs=ph.Needs(needed, cluster_needs),
        hosts=rows,
        cluster=cluster,
        counts={"hosts": len(hosts), **{state: counts[state] for state in STATES}},
        runs=ledger.runs,
        first_run=ledger.first_run,
        last_run=ledger.last_run,
    )


def status_lines(state: Standing, width: int = 0) -> list[str]:
    """``campaign status``: the counts first, then the cluster's phases, then one line per host that is not
    accepted (the accepted ones are counted, not listed: 16,384 lines of "accepted" hide the few that matter)."""
    counts = state.counts
    lines = [
        f"campaign {state.name}: {state.verdict} — {counts['accepted']} of {counts['hosts']} hosts accepted, "
        f"{counts['pending']} pending, {counts['failed']} failed, {counts['repaired']} repaired (retest), "
        f"{counts['excluded']} excluded; {counted(state.runs, 'run')}"
        + (
            f" from {state.first_run[:16]} to {state.last_run[:16]}"
            if state.first_run and state.last_run
            else ""
        )
    ]
    for c in state.cluster:
        why = c.why if len(c.why) <= 150 else c.why[:149] + "…"
        lines.append(f"  {ph.WORDS[c.phase]:<22} {'done' if c.satisfied else 'not yet':<8} {why}")
    listed = [h for h in state.hosts if h.state != "accepted"]
    if listed:
        name_width = max(len(h.host) for h in listed)
        lines.append("")
        for order in ("failed", "repaired", "pending", "excluded"):
            for h in listed:
                if h.state == order:
                    lines.append(f"  {h.host:<{name_width}} {h.state:<9} {h.line()}")
    return lines
