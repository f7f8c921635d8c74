"""A playbook cut down to the phases one campaign step runs, and the phases a whole playbook asks for.

The host checks always run: they read the identity the evidence is kept with, and the benchmarks start only
on hosts that passed them. The rest maps onto the playbook's own switches, so a step runs the same programs
with the same settings as the full acceptance run.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import replace
from typing import Any

from diagnose.campaign import phases as ph
from diagnose.config.playbook import Playbook


def needs_of_playbook(playbook: Playbook, host_vars: Mapping[str, Any] | None = None) -> ph.Needs:
    """The phases a campaign run with ``playbook`` must gather (burn-in where its minutes are above 0)."""
    plan = playbook.benchmarks
    if plan is None:
        return ph.needs_of(False, False, 0.0, False, False, False, False)
    minutes = (host_vars or {}).get("burnin_minutes", playbook.vars.get("burnin_minutes", 0))
    try:
        burnin = float(minutes or 0)
    except (TypeError, ValueError):
        burnin = 0.0
    return ph.needs_of(
        plan.enabled,
        plan.stress,
        burnin,
        plan.fleet_probes,
        plan.perftest,
        plan.training_probe,
        plan.kv_transfer,
    )


def restrict(playbook: Playbook, phases: Collection[str]) -> tuple[Playbook, dict[str, Any]]:
    """The playbook with only ``phases`` switched on, and the variables that step must set over the
    operator's (no burn-in minutes when burn-in is not asked)."""
    plan = playbook.benchmarks
    wanted = set(phases)
    if plan is None:
        return playbook, {}
    cut = replace(
        plan,
        enabled=plan.enabled and bool(wanted - {ph.HOST}),
        collectives=plan.collectives if ph.COLLECTIVE in wanted else (),
        straggler_isolation=plan.straggler_isolation and ph.COLLECTIVE in wanted,
        stress=plan.stress and bool(wanted & {ph.STRESS, ph.BURNIN}),
        fleet_probes=plan.fleet_probes and ph.FLEET in wanted,
        perftest=plan.perftest and ph.PERFTEST in wanted,
        perftest_latency=plan.perftest_latency and ph.PERFTEST in wanted,
        training_probe=plan.training_probe and ph.TRAINING in wanted,
        kv_transfer=plan.kv_transfer and ph.KV in wanted,
    )
    forced = {"burnin_minutes": 0} if ph.STRESS in wanted and ph.BURNIN not in wanted else {}
    return replace(playbook, benchmarks=cut), forced
