"""Instability: a check that keeps flipping between PASS and FAIL on one host, over the recent runs.

The comparison with the last good run (:mod:`diagnose.history.comparison`) judges one step at a time, so a
host with an intermittent fault — a link that flaps, a GPU that throttles on warm nights — is accepted one
night and refused the next, and every refusal reads as a fresh regression. Looking at the last
``history_unstable_window`` runs of the series (this one included) names it for what it is: a check that
changed between PASS (or WARN) and FAIL at least ``history_unstable_flips`` times on a host is
``history.unstable`` (WARN, e.g. "unstable: failed 3 of the last 6 runs"), reported on every run while the
flapping stays in the window, the passing ones included. On such a host the check's own PASS→FAIL
regression is folded into this finding instead of being raised again on every other night.

ERROR and SKIP results are not verdicts and are left out of the sequence; runs older than the series'
pinned baseline are not looked at (pinning acknowledges a repair). The judgement is pure
(:func:`unstable_checks`); :func:`instability` reads the past runs from the database.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from diagnose.catalog.stage_ids import HISTORY_PREFIX, HISTORY_UNSTABLE
from diagnose.core.model import SEVERITY, CheckResult
from diagnose.core.vars import Vars
from diagnose.history.comparison import Regression
from diagnose.history.storage import epoch_seconds, open_db, series_key

UNSTABLE_ID = HISTORY_UNSTABLE
DEFAULT_FLIPS = 3
DEFAULT_WINDOW = 6
#: Statuses that are verdicts; the others (ERROR, SKIP) say nothing about the host's health.
_JUDGED = ("PASS", "WARN", "FAIL")

CheckKey = tuple[str, str]  # check id, host ("" for a cluster-wide result)


@dataclass(frozen=True)
class Flapping:
    """One check on one host whose verdict flipped too often; ``statuses`` oldest first, this run last."""

    check_id: str
    host: str
    statuses: tuple[str, ...]
    flips: int

    @property
    def failures(self) -> int:
        return sum(1 for s in self.statuses if s == "FAIL")


def statuses_of(checks: Sequence[Mapping[str, Any]]) -> dict[CheckKey, str]:
    """The worst status per (check, host) of one run; history's own findings left out."""
    folded: dict[CheckKey, str] = {}
    for check in checks:
        if str(check["id"]).startswith(HISTORY_PREFIX):
            continue
        key = (str(check["id"]), str(check.get("host") or ""))
        status = str(check["status"])
        if key not in folded or SEVERITY.get(status, 0) > SEVERITY.get(folded[key], 0):
            folded[key] = status
    return folded


def count_flips(statuses: Sequence[str]) -> int:
    """Changes between failing and not failing along a sequence of verdicts."""
    failing = [s == "FAIL" for s in statuses]
    return sum(1 for a, b in itertools.pairwise(failing) if a != b)


def unstable_checks(runs: Sequence[Mapping[CheckKey, str]], flips_needed: int) -> list[Flapping]:
    """The checks of the last run (``runs`` oldest first) that flipped at least ``flips_needed`` times."""
    if not runs or flips_needed < 1:
        return []
    found = []
    for key, now in sorted(runs[-1].items()):
        if now not in _JUDGED:
            continue
        sequence = tuple(run[key] for run in runs if run.get(key) in _JUDGED)
        flips = count_flips(sequence)
        if flips >= flips_needed:
            found.append(Flapping(key[0], key[1], sequence, flips))
    return found


def as_result(item: Flapping, window: int) -> CheckResult:
    where = item.host or "the cluster"
    runs = len(item.statuses)
    return CheckResult(
        id=UNSTABLE_ID,
        host=item.host or None,
        checklist="–",
        status="WARN",
        observed=list(item.statuses),
        expected=f"fewer PASS↔FAIL changes of {item.check_id} within {window} runs",
        message=(
            f"{item.check_id} on {where} is unstable: failed {item.failures} of the last {runs} runs "
            f"({' '.join(item.statuses)}, oldest first), {item.flips} PASS↔FAIL changes; this run's "
            f"verdict ({item.statuses[-1]}) alone should neither accept nor refuse it"
        ),
        remediation=(
            f"An intermittent fault (a flapping link, a marginal GPU, a thermal or power limit): read the "
            f"failing runs' evidence (diagnose history --check {item.check_id}"
            + (f" --host {item.host}" if item.host else "")
            + f"), repair, and keep the host out of production until {item.check_id} passes {window} runs "
            "in a row (or pin a baseline after the repair)."
        ),
    )


def _past_statuses(db_path: str | Path, run: Mapping[str, Any], count: int) -> list[dict[CheckKey, str]]:
    """The statuses of the ``count`` newest earlier runs of the series since its baseline, oldest first."""
    if count <= 0 or not Path(db_path).exists():
        return []
    inventory, playbook = series_key(run)
    ceiling = epoch_seconds(run.get("started"))
    with open_db(db_path) as conn:
        baseline = conn.execute(
            "SELECT r.started_ts FROM baselines b JOIN runs r ON r.id = b.run_id"
            " WHERE b.inventory = ? AND b.playbook = ?",
            (inventory, playbook),
        ).fetchone()
        ids = [
            row[0]
            for row in conn.execute(
                "SELECT id FROM runs WHERE inventory = ? AND playbook = ? AND id != ? AND started_ts >= ?"
                " AND started_ts <= ? ORDER BY started_ts DESC LIMIT ?",
                (
                    inventory,
                    playbook,
                    str(run.get("id")),
                    baseline[0] if baseline else float("-inf"),
                    ceiling if ceiling is not None else float("inf"),
                    count,
                ),
            )
        ]
        past = []
        for run_id in reversed(ids):
            rows = conn.execute("SELECT check_id, host, status FROM checks WHERE run_id = ?", (run_id,))
            past.append(statuses_of([{"id": c, "host": h, "status": s} for c, h, s in rows]))
    return past


def instability(
    db_path: str | Path,
    results: Mapping[str, Any],
    regressions: Sequence[Regression],
    host_vars: Vars | None = None,
) -> tuple[list[Regression], list[CheckResult]]:
    """``history.unstable`` results for this run, and the regressions left once those of flapping checks
    are folded into them. Thresholds: ``history_unstable_flips`` and ``history_unstable_window`` in
    ``host_vars`` (the first host's variables; their types were checked when the inventory was read)."""
    settings = host_vars or Vars()
    flips = settings.int("history_unstable_flips", DEFAULT_FLIPS) or DEFAULT_FLIPS
    window = max(2, settings.int("history_unstable_window", DEFAULT_WINDOW) or DEFAULT_WINDOW)
    runs = [*_past_statuses(db_path, results["run"], window - 1), statuses_of(results.get("checks", []))]
    found = unstable_checks(runs, flips)
    flapping = {(f.check_id, f.host) for f in found}
    kept = [r for r in regressions if r.check is None or r.check not in flapping]
    return kept, [as_result(f, window) for f in found]
