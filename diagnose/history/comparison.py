"""Regressions of a run against the last good run and the pinned baseline of its series.

Comparison rules (each finding becomes one ``history.regression`` result):

* a check (per host, or cluster-wide) that was PASS or WARN in the reference and is FAIL now — FAIL;
* a host that answered in the reference and now could not be reached, or stopped answering during the run
  (``host.reachable`` FAIL, or ERROR: lost mid-run, which no other result of that host can say) — FAIL;
* a host of the reference run that is absent from this run (an unreachable host is still present: it
  already FAILs ``host.reachable``) — FAIL;
* driver, CUDA, NCCL or torch changed on some hosts — WARN when every host now agrees (an upgrade), FAIL
  when the change left the hosts disagreeing;
* the median busbw of a collective within a size band fell by more than its series' own run-to-run noise
  allows, and by at least ``busbw_drop_pct`` — FAIL: a nightly health check exists to catch a degraded link
  or a bad upgrade, and a WARN would not change the exit code a scheduler or monitor acts on. Only judged
  figures count, and first nights have their own rule (:mod:`diagnose.history.noise`).

Pinning a baseline (``diagnose baseline RUN_ID``) also acknowledges change: runs older than the pinned
baseline are never used as references, so after a planned removal of a host or an accepted bandwidth
change, pinning the first run of the new state stops the findings from repeating.

The comparison itself is pure (results-shaped dicts in, regressions out); only ``regressions()`` reads
the database, for the references.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from diagnose.catalog.stage_ids import HISTORY_PREFIX, HISTORY_REGRESSION
from diagnose.core.model import SEVERITY, CheckResult
from diagnose.history.bands import BANDS, Band, busbw_by_size
from diagnose.history.noise import WINDOW, noise, regressed
from diagnose.history.storage import Reference, good_run_ids, load_results, open_db, run_references

REGRESSION_ID = HISTORY_REGRESSION
DEFAULT_BUSBW_DROP_PCT = 10.0
VERSION_FIELDS = ("driver", "cuda", "nccl", "torch")

#: The check whose ERROR is a finding of its own: a host lost during the run.
REACHABLE_ID = "host.reachable"

BenchKey = tuple[str, str | None, int | None, int | None]  # collective, tool, nodes, ranks


@dataclass
class Snapshot:
    """What a comparison needs from a run: hosts' versions, check statuses, busbw per size."""

    hosts: dict[str, dict[str, Any]] = field(default_factory=dict)
    checks: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    busbw: dict[BenchKey, dict[int, float]] = field(default_factory=dict)


def snapshot(results: Mapping[str, Any]) -> Snapshot:
    """Reduce a results document to what a comparison reads.

    Several results of one check on one host fold into the worst. Benchmarks that could not run (ERROR or
    SKIP), benchmarks whose bandwidth was not judged (no ``expected_busbw_gbps``: gloo on CPU hosts, a
    profile without a fabric) and rows with wrong results or no busbw carry no bandwidth to compare.
    """
    snap = Snapshot()
    for host in results.get("hosts", []):
        snap.hosts[host["name"]] = dict(host.get("environment") or {})
    for check in results.get("checks", []):
        if check["id"].startswith(HISTORY_PREFIX):
            continue
        key = (check["id"], check.get("host") or "")
        seen = snap.checks.get(key)
        if seen is None or SEVERITY.get(check["status"], 0) > SEVERITY.get(seen[0], 0):
            snap.checks[key] = (check["status"], str(check.get("message") or ""))
    for bench in results.get("benchmarks", []):
        if bench.get("status") not in ("ERROR", "SKIP") and bench.get("expected_busbw_gbps") is not None:
            key = (bench["collective"], bench.get("tool"), bench.get("nodes"), bench.get("ranks"))
            snap.busbw.setdefault(key, {}).update(busbw_by_size(bench))
    return snap


@dataclass(frozen=True)
class Regression:
    """One finding: ``summary`` is the short form for the cron line, ``result`` the results.json row."""

    kind: str  # check | host | version | busbw
    summary: str
    result: CheckResult
    # (check id, host or "") of a check regression: how instability folds it (diagnose.history.stability)
    check: tuple[str, str] | None = None


def _since(ref: Reference) -> str:
    return f"run {ref.run_id} ({ref.role}, {ref.started})"


def _evidence_hint(ref: Reference) -> str:
    return f" The reference run's evidence is in {ref.run_dir}." if ref.run_dir else ""


def _check_regressions(ref_snap: Snapshot, ref: Reference, cur: Snapshot) -> list[Regression]:
    found = []
    for (check_id, host), (status, message) in sorted(cur.checks.items()):
        before = ref_snap.checks.get((check_id, host))
        lost = check_id == REACHABLE_ID and status == "ERROR"
        if (status != "FAIL" and not lost) or before is None or before[0] not in ("PASS", "WARN"):
            continue
        where = host or "cluster"
        found.append(
            Regression(
                "check",
                f"{where} {check_id} {before[0]}→{status}",
                CheckResult(
                    id=REGRESSION_ID,
                    host=host or None,
                    checklist="–",
                    status="FAIL",
                    observed=status,
                    expected=f"{before[0]} (run {ref.run_id})",
                    message=f"{check_id} on {where} went {before[0]}→{status} since {_since(ref)}: {message}",
                    remediation=f"See the {check_id} result of this run for the cause.{_evidence_hint(ref)}",
                ),
                check=(check_id, host),
            )
        )
    return found


def _host_regressions(ref_snap: Snapshot, ref: Reference, cur: Snapshot) -> list[Regression]:
    return [
        Regression(
            "host",
            f"{name} disappeared",
            CheckResult(
                id=REGRESSION_ID,
                host=name,
                checklist="–",
                status="FAIL",
                observed="absent from this run",
                expected=f"present (run {ref.run_id})",
                message=f"{name} was checked in {_since(ref)} and is not part of this run",
                remediation=(
                    "Put the host back in the inventory (or drop the --limit that excluded it). If it left "
                    "the cluster on purpose, pin this run as the new baseline: diagnose baseline RUN_ID."
                ),
            ),
        )
        for name in sorted(set(ref_snap.hosts) - set(cur.hosts))
    ]


def _version_regressions(ref_snap: Snapshot, ref: Reference, cur: Snapshot) -> list[Regression]:
    found = []
    for name in VERSION_FIELDS:
        changes: dict[tuple[str, str], list[str]] = {}
        for host, env in sorted(cur.hosts.items()):
            old = ref_snap.hosts.get(host, {}).get(name)
            new = env.get(name)
            if old and new and str(old) != str(new):
                changes.setdefault((str(old), str(new)), []).append(host)
        if not changes:
            continue
        now_values = {str(env[name]) for env in cur.hosts.values() if env.get(name)}
        consistent = len(now_values) == 1
        compared = sum(1 for h in cur.hosts if cur.hosts[h].get(name) and ref_snap.hosts.get(h, {}).get(name))
        for (old, new), hosts in sorted(changes.items()):
            shown = ", ".join(hosts[:5]) + (f", +{len(hosts) - 5} more" if len(hosts) > 5 else "")
            where = hosts[0] if len(hosts) == 1 else f"{len(hosts)} hosts"
            state = (
                "every host now agrees"
                if consistent
                else f"hosts now disagree: {', '.join(sorted(now_values))}"
            )
            found.append(
                Regression(
                    "version",
                    f"{name} {old}→{new} on {where}",
                    CheckResult(
                        id=REGRESSION_ID,
                        host=hosts[0] if len(hosts) == 1 else None,
                        checklist="3",
                        status="WARN" if consistent else "FAIL",
                        observed=new,
                        expected=f"{old} (run {ref.run_id})",
                        message=(
                            f"{name} changed {old} → {new} on {len(hosts)} of {compared} hosts ({shown}) "
                            f"since {_since(ref)}; {state}"
                        ),
                        remediation=(
                            f"If the {name} change was planned, finish it on every host and pin a run of the "
                            "new state as baseline (diagnose baseline RUN_ID); if not, find what changed it."
                        ),
                    ),
                )
            )
    return found


def _band_medians(
    cur: dict[int, float], ref: dict[int, float], band: Band
) -> tuple[float, float, int] | None:
    """Median busbw of both runs over the sizes both measured in the band (busbw rises with size, so
    medians over different size sets would compare sweeps, not the fabric)."""
    sizes = sorted(s for s in cur if s in ref and band.holds(s))
    if not sizes:
        return None
    return statistics.median(cur[s] for s in sizes), statistics.median(ref[s] for s in sizes), len(sizes)


def _good_values(good: list[Snapshot], key: BenchKey, cur: dict[int, float], band: Band) -> list[float]:
    """The figure in each good run (oldest first), over the sizes that run shares with tonight's."""
    values = []
    for snap in good:
        medians = _band_medians(cur, snap.busbw.get(key) or {}, band)
        if medians is not None:
            values.append(medians[1])
    return values


def _busbw_regressions(
    ref_snap: Snapshot, ref: Reference, cur: Snapshot, drop_pct: float, good: list[Snapshot]
) -> dict[tuple[BenchKey, str], Regression]:
    found = {}
    min_drop = drop_pct / 100.0
    for key, sizes in sorted(cur.busbw.items(), key=lambda item: str(item[0])):
        ref_sizes = ref_snap.busbw.get(key)
        if not ref_sizes:
            continue  # another node or rank count, or not judged there: nothing comparable
        collective, tool, nodes, ranks = key
        for band in BANDS:
            medians = _band_medians(sizes, ref_sizes, band)
            if medians is None:
                continue
            now, before, count = medians
            spread = noise(_good_values(good, key, sizes, band), min_drop)
            if not regressed(now, before, spread.threshold):
                continue
            factor = 1.0 - spread.threshold
            change = (now / before - 1.0) * 100.0
            found[(key, band.key)] = Regression(
                "busbw",
                f"{collective} {band.label} busbw {change:+.0f}%",
                CheckResult(
                    id=REGRESSION_ID,
                    host=None,
                    checklist="3",
                    status="FAIL",
                    observed=f"{now:.1f} GB/s",
                    expected=f"≥ {factor:.2g} × {before:.1f} GB/s (run {ref.run_id})",
                    message=(
                        f"{collective} busbw in the {band.label} band (median of {count} sizes, {nodes} nodes, "
                        f"{ranks} ranks, {tool}) is {now:.1f} GB/s, {change:+.0f}% against {before:.1f} GB/s "
                        f"in {_since(ref)}; {spread.words(min_drop)}"
                    ),
                    remediation=(
                        "Compare the transport NCCL chose with the reference run (nccl.transport), look for "
                        "version changes, and run the acceptance playbook with straggler isolation to find "
                        "the slow host or link."
                    ),
                ),
            )
    return found


def compare(
    references: list[tuple[Reference, Snapshot]],
    current: Snapshot,
    drop_pct: float,
    good: list[Snapshot] | None = None,
) -> list[Regression]:
    """All regressions of ``current`` against the references (newest first), worst first.

    State changes (checks, hosts, versions) are judged against the newest reference only: an older one
    would report the same change again every night. Bandwidth is judged against each, so the baseline
    catches a slow drift that no single night-to-night step shows; one finding per collective and band.
    ``good``: the series' last good runs (oldest first), whose spread says how far a figure may move on
    noise alone; without them every figure is on its first nights.
    """
    if not references:
        return []
    ref, ref_snap = references[0]
    found = _check_regressions(ref_snap, ref, current)
    found += _host_regressions(ref_snap, ref, current)
    found += _version_regressions(ref_snap, ref, current)
    busbw: dict[tuple[BenchKey, str], Regression] = {}
    for ref, ref_snap in references:
        for key, regression in _busbw_regressions(ref_snap, ref, current, drop_pct, good or []).items():
            busbw.setdefault(key, regression)
    found += list(busbw.values())
    return sorted(found, key=lambda r: -SEVERITY[r.result.status])


def regressions(
    db_path: str | Path, results: Mapping[str, Any], busbw_drop_pct: float = DEFAULT_BUSBW_DROP_PCT
) -> list[Regression]:
    """The run's regressions against the last good run and the pinned baseline of its series, bandwidth
    judged against the noise of the series' last good runs.

    Call with the complete results document, before ``record_run`` or after (the run itself is never its
    own reference). Empty when the series has no reference yet.
    """
    if not Path(db_path).is_file():  # the series' first run: nothing to compare with
        return []
    with open_db(db_path) as conn:
        refs = [
            (ref, snapshot(load_results(conn, ref.run_id))) for ref in run_references(conn, results["run"])
        ]
        good = [snapshot(load_results(conn, i)) for i in good_run_ids(conn, results["run"], WINDOW)]
    return compare(refs, snapshot(results), busbw_drop_pct, good)
