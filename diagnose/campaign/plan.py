"""What ``campaign next`` runs: exactly the missing phases on exactly the hosts that miss them. Pure.

Hosts are taken repaired first (the operator is waiting on them), then failed, then pending; within each,
hosts missing the same phases share a run, cut into batches of ``campaign_batch`` hosts. A host alone cannot
prove a cross-node collective: a batch's runs leave the collective to the full-scale step, which comes once
enough hosts are accepted (``campaign_min_fraction`` of those not excluded) and runs every accepted host,
with those still waiting only for a collective, at once — with the training reference where it is due.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from diagnose.campaign import phases as ph
from diagnose.campaign.standing import HostStanding, Standing

DEFAULT_MIN_FRACTION = 0.95
#: What a run on one batch cannot prove: both need the other hosts.
_CROSS_HOST = (ph.COLLECTIVE,)


@dataclass(frozen=True)
class Step:
    hosts: tuple[str, ...]
    phases: tuple[str, ...]
    why: str

    def describe(self) -> str:
        shown = ", ".join(self.hosts[:8]) + (
            f" and {len(self.hosts) - 8} more" if len(self.hosts) > 8 else ""
        )
        words = ", ".join(ph.WORDS[p] for p in self.phases)
        return f"{self.why}: {len(self.hosts)} host{'s' if len(self.hosts) != 1 else ''} ({shown}) — {words}"


def _batches(hosts: list[str], size: int | None) -> list[list[str]]:
    if not size or size >= len(hosts):
        return [hosts] if hosts else []
    return [hosts[i : i + size] for i in range(0, len(hosts), size)]


def plan(
    state: Standing,
    batch: int | None = None,
    min_fraction: float = DEFAULT_MIN_FRACTION,
    done: Collection[str] = (),
) -> list[Step]:
    """The steps still to run; ``done``: hosts this invocation already ran (each is tried once per call,
    so a host that fails again does not loop)."""
    steps: list[Step] = []
    waiting: list[str] = []
    for order, why in (("repaired", "retest repaired"), ("failed", "retest failed"), ("pending", "pending")):
        groups: dict[tuple[str, ...], list[str]] = {}
        for host in state.hosts:
            if host.state != order:
                continue
            alone = tuple(p for p in host.missing if p not in _CROSS_HOST)
            if order == "repaired" and not alone and not host.checked_since_repair:
                alone = (ph.HOST,)  # its own host checks first: a part replaced in the repair voids more
            if ph.COLLECTIVE in host.missing:
                waiting.append(host.host)
            if alone and host.host not in done:
                groups.setdefault(alone, []).append(host.host)
        for phases, hosts in groups.items():
            phases = tuple(ph.ordered({ph.HOST, *phases}))
            steps.extend(Step(tuple(chunk), phases, why) for chunk in _batches(hosts, batch))
    full = _full_scale(state, waiting, min_fraction)
    return steps + ([full] if full is not None else [])


def _full_scale(state: Standing, waiting: list[str], min_fraction: float) -> Step | None:
    counted = state.counts["hosts"] - state.counts["excluded"]
    due = [c.phase for c in state.cluster if not c.satisfied]
    by_name = {h.host: h for h in state.hosts}
    hosts = sorted({*state.accepted, *(h for h in waiting if _only_cross_host(by_name.get(h)))})
    if not hosts or counted < 1 or (not due and len(hosts) == len(state.accepted)):
        return None
    if len(state.accepted) / counted < min_fraction and len(hosts) / counted < min_fraction:
        return None
    phases = [ph.HOST, ph.COLLECTIVE] + ([ph.TRAINING] if ph.TRAINING in due else [])
    if counted < 2:
        phases.remove(ph.COLLECTIVE)
    why = "full scale" if ph.FULL_SCALE in due or waiting else "training reference"
    return Step(tuple(hosts), tuple(phases), why)


def _only_cross_host(found: HostStanding | None) -> bool:
    """Whether the host misses nothing a run of its own could give (so the full-scale step completes it)."""
    return (
        found is not None
        and found.state in ("pending", "repaired")
        and all(p in _CROSS_HOST for p in found.missing)
    )
