"""Find the slow host or link behind a multi-node result that fell short: the stage's side of the search.

The search itself is pure and lives in :mod:`diagnose.localize` (the simulator drives the same code);
this module gives it what a real run has:

* :func:`localize_settings`: the search's settings from the first host's variables;
  :func:`refuse_shared_master`: a rendezvous address the search's groups cannot use;
* :class:`LaunchMeasure`: its Measure — one launch of the collective per host group, the groups of a
  wave launched at once (they share no host, and every launch picks its own rendezvous port on its own
  first host), each value the launch's busbw at the largest size, None when it failed or hung;
* :func:`straggler_checks`: the verdicts as checks — ``bench.straggler`` FAIL per slow host,
  ``bench.link`` FAIL per slow link, each with the numbers behind it; a WARN when nothing stands out
  (cluster-wide when even the healthy pairs miss the two-node range) or the budget ran out, naming what
  is still suspected — suspects, not accusations — with the measurements against each;
* :func:`localization_record`: the ``localization`` entry of results.json — every round's groups,
  values and verdicts, the finding, its confidence and the time spent.

Variables (first host; any inventory level, the playbook's ``vars`` or ``-e``): ``localize_budget_s``
(default 600; the stage's own deadline caps it), ``localize_concurrency`` launches at once (default 0:
every host at once), ``localize_repeats`` / ``localize_max_repeats`` measurements of a group per round
(3 for every group / 10 for those still near the line),
``localize_quorum`` distinct partners before a host is accused (2), ``localize_min_deficit`` the
smallest shortfall named (0.05).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from diagnose.benchmarks.expect import Expectation, large_message_busbw
from diagnose.benchmarks.setup import CHECKLIST, PairLaunch, Setup
from diagnose.catalog.stage_ids import BENCH_LINK, BENCH_STRAGGLER
from diagnose.core.errors import ConfigError
from diagnose.core.hosts import Host
from diagnose.core.model import CheckResult
from diagnose.core.units import counted
from diagnose.core.vars import Vars
from diagnose.launchers.base import launch_in_parallel
from diagnose.localize import Accusation, Finding, Judged, Settings
from diagnose.localize.model import Suspect, as_plain

REMEDIATION_HOST = (
    "Check this host's NICs (ibstat rates, error counters), cables and switch ports, its PCIe links and "
    "GPU clocks; re-run the pair test after the fix."
)
REMEDIATION_LINK = (
    "Both hosts are fast with others: check the path between them (the switch ports and cables on it, "
    "the spine link their traffic hashes onto, adaptive routing), then re-run the pair."
)


def localize_settings(host_vars: Vars) -> Settings:
    """The search's settings from the ``localize_*`` variables; ConfigError names a bad one."""
    base = Settings()
    try:
        return replace(
            base,
            budget_s=host_vars.float("localize_budget_s", base.budget_s) or base.budget_s,
            concurrency=host_vars.int("localize_concurrency", base.concurrency) or base.concurrency,
            repeats=host_vars.int("localize_repeats", base.repeats) or base.repeats,
            max_repeats=host_vars.int("localize_max_repeats", base.max_repeats) or base.max_repeats,
            quorum=host_vars.int("localize_quorum", base.quorum) or base.quorum,
            min_deficit=host_vars.float("localize_min_deficit", base.min_deficit) or 0.0,
        )
    except ValueError as exc:
        raise ConfigError(f"localize_* variables: {exc}") from None


def refuse_shared_master(hosts: Sequence[Host]) -> None:
    """ConfigError where one ``bench_master_addr`` is set for several hosts (a group variable): the search's
    groups are led by other hosts than the first, and a torchrun agent led elsewhere would wait at that
    address for a rendezvous store nobody opened there until the launch's startup timeout (300 s each)."""
    by_value: dict[str, list[str]] = {}
    for host in hosts:
        value = host.vars.str("bench_master_addr")
        if value:
            by_value.setdefault(value, []).append(host.name)
    shared = {value: names for value, names in by_value.items() if len(names) > 1}
    if shared:
        value, names = next(iter(shared.items()))
        listed = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        raise ConfigError(
            f"bench_master_addr is one value ({value}) for {listed}; the search's pair tests are "
            "led by other hosts than the first and cannot meet there: set it per host, to each host's own "
            "address (host_vars), or leave it unset"
        )


def busbw_of(rows: list[dict[str, Any]], status: str) -> float | None:
    """A launch's value: its large-message busbw (else its best row) when it finished, None otherwise."""
    if status != "done":
        return None
    value, _ = large_message_busbw(rows)
    if value is None and rows:
        value = max(r["busbw_gbps"] for r in rows)
    return value


class LaunchMeasure:
    """The search's Measure on real hosts: one launch of ``collective`` at ``nbytes`` per group, all at
    once. ``launches`` keeps every launch (tag, hosts, outcome, value) for the record."""

    def __init__(self, launch: PairLaunch, setup: Setup, collective: str, nbytes: int) -> None:
        self.launch = launch
        self.setup = setup
        self.collective = collective
        self.nbytes = nbytes
        self.by_name = {h.name: h for h in setup.hosts}
        self.calls = 0
        self.launches: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def __call__(self, groups: list[list[str]]) -> list[float | None]:
        self.calls += 1
        tags = [f"loc{self.calls:03d}-{g[0]}-{g[-1]}" for g in groups]
        jobs = list(zip(groups, tags, strict=True))
        return launch_in_parallel(lambda job: self._one(*job), jobs, len(jobs), name="localize")

    def _one(self, group: list[str], tag: str) -> float | None:
        hosts = [self.by_name[name] for name in group]
        outcome = self.launch(self.setup, hosts, tag, [self.collective], self.nbytes, self.nbytes)
        value = busbw_of(outcome.rows, outcome.status)
        with self._lock:
            self.launches.append(
                {
                    "tag": tag,
                    "hosts": group,
                    "status": outcome.status,
                    "busbw_gbps": value,
                    "message": outcome.message or None,
                }
            )
        return value


def _gbps(value: float | None) -> str:
    return "failed" if value is None else f"{value:.3g}"


def _measurement(j: Judged) -> str:
    values = ", ".join(_gbps(v) for v in j.values)
    pair = "+".join(j.task.group)
    if j.verdict == "failed":
        return f"{pair}: [{values}] GB/s (a launch failed or hung)"
    ratio = "" if j.ratio is None else f" = ×{j.ratio:.2f} of the healthy {_gbps(j.reference_gbps)} GB/s"
    z = "" if j.z is None else f", z {j.z:.1f}"
    return f"{pair}: [{values}] GB/s{ratio}{z}"


def _confidence(value: float) -> str:
    return "> 99.99 %" if value > 0.9999 else f"{100 * value:.2f} %"


def _accusation_check(accusation: Accusation, collective: str) -> CheckResult:
    evidence = "; ".join(_measurement(j) for j in accusation.evidence)
    repeats = sorted({len(j.values) for j in accusation.evidence})
    observed = {
        "deficit_pct": round(100 * accusation.deficit, 1),
        "confidence": accusation.confidence,
        "measurements": [j.to_dict() for j in accusation.evidence],
    }
    if accusation.kind == "host":
        host = accusation.hosts[0]
        partners = len(accusation.evidence)
        return CheckResult(
            BENCH_STRAGGLER,
            host,
            CHECKLIST,
            "FAIL",
            observed=observed,
            expected="as fast as the healthy pairs of the same round",
            message=(
                f"{host} is {100 * accusation.deficit:.0f} % slow in {collective}: slow with {partners} distinct "
                f"partners that are fast elsewhere ({evidence}; {'/'.join(map(str, repeats))} repeats each); "
                f"confidence {_confidence(accusation.confidence)}"
            ),
            remediation=REMEDIATION_HOST,
        )
    a, b = accusation.hosts
    cleared = "; ".join(_measurement(j) for j in accusation.cleared_by)
    observed["link"] = [a, b]
    observed["cleared_by"] = [j.to_dict() for j in accusation.cleared_by]
    return CheckResult(
        BENCH_LINK,
        None,
        CHECKLIST,
        "FAIL",
        observed=observed,
        expected="as fast as the healthy pairs of the same round",
        message=(
            f"the link {a}↔{b} is {100 * accusation.deficit:.0f} % slow in {collective}: the pair alone is slow "
            f"({evidence}) while each host is fast with others ({cleared}); "
            f"confidence {_confidence(accusation.confidence)}"
        ),
        remediation=REMEDIATION_LINK,
    )


def summary(finding: Finding, collective: str, two: Expectation) -> str:
    """One sentence on what the search found, for the checks and the report."""
    named = ", ".join(f"{a.kind} {a.name} ({100 * a.deficit:.0f} % slow)" for a in finding.accused)
    spent = f"{counted(finding.rounds, 'round')}, {counted(finding.launches, 'launch', 'launches')}, {finding.seconds:.0f} s"
    if finding.accused:
        text = f"{collective}: named {named} in {spent}"
        if finding.unresolved:
            text += f"; still suspected, not proven: {', '.join(finding.unresolved)}"
        return text
    if finding.status == "incomplete":
        left = ", ".join(finding.unresolved) or "nothing named"
        why = "within the budget" if finding.stopped else "from the partners and repeats available"
        return f"{collective}: no verdict {why} ({spent}); still suspected: {left}"
    pair = finding.healthy_gbps.get(2)
    if pair is not None and two.low_gbps is not None and pair < two.low_gbps:
        return (
            f"{collective}: no host or link stands out and every pair is slow as well (pairs at "
            f"{pair:.3g} GB/s, normal from {two.low_gbps:.0f}): the shortfall is cluster-wide (fabric settings), "
            f"not one host; {spent}"
        )
    return (
        f"{collective}: no host or link stands out among the groups measured ({spent}): the shortfall shows "
        "only with all nodes together (spine, routing) or is spread evenly over the fleet"
    )


def _suspect(suspect: Suspect) -> str:
    """One suspect and the measurements against it, for a WARN that must not read as a verdict."""
    deficit = "" if suspect.deficit is None else f", {100 * suspect.deficit:.0f} % slow so far"
    shown = "; ".join(f"{_measurement(j)} ({j.verdict})" for j in suspect.evidence) or "no measurement yet"
    return f"{suspect.kind} {suspect.name}{deficit} ({shown})"


def straggler_checks(finding: Finding, collective: str, two: Expectation) -> list[CheckResult]:
    """``bench.straggler`` / ``bench.link`` checks for a finding; what is suspected but not proven goes into
    one WARN that names each suspect with the evidence against it, so that a search cut short by its
    budget still says where to look."""
    checks = [_accusation_check(a, collective) for a in finding.accused]
    if not finding.accused or finding.unresolved:
        message = summary(finding, collective, two)
        if finding.suspects:
            message += "; suspects, not accusations: " + " | ".join(
                _suspect(x) for x in finding.suspects[:16]
            )
            if len(finding.suspects) > 16:
                message += f" | and {len(finding.suspects) - 16} more (results.json)"
        checks.append(
            CheckResult(
                BENCH_STRAGGLER,
                None,
                CHECKLIST,
                "WARN",
                observed={
                    "status": finding.status,
                    "unresolved": finding.unresolved,
                    "suspects": [x.to_dict() for x in finding.suspects],
                },
                message=message,
            )
        )
    return checks


def localization_record(
    finding: Finding,
    settings: Settings,
    collective: str,
    setup: Setup,
    trigger: dict[str, Any],
    launches: list[dict[str, Any]],
    two: Expectation,
) -> dict[str, Any]:
    """The ``localization`` entry of results.json."""
    plain = finding.to_dict()
    return {
        "collective": collective,
        "backend": setup.backend,
        "hosts": [h.name for h in setup.hosts],
        "ranks_per_host": setup.nproc,
        "trigger": trigger,
        "settings": as_plain(settings),
        "steps": plain["steps"],
        "finding": {
            "status": finding.status,
            "summary": summary(finding, collective, two),
            "accused": plain["accused"],
            "unresolved": plain["unresolved"],
            "suspects": plain["suspects"],
            "healthy_gbps": plain["healthy_gbps"],
            "notes": plain["notes"],
        },
        "confidence": finding.confidence,
        "measurements": finding.launches,
        "rounds": finding.rounds,
        "real_seconds": round(finding.seconds, 1),
        "launches": launches,
    }
