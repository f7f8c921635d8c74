"""The phases of an acceptance campaign, which results evidence each, and what voids them. Pure.

A phase is one stage of the acceptance playbook, judged per host: the host checks, GPU stress, burn-in, fleet
probes, per-NIC perftest, a cross-node collective, KV-cache transfers. Two more are the cluster's: a collective
at full scale over the accepted hosts and the training reference. Which of them a campaign needs follows its
playbook (a playbook without perftest asks no perftest evidence).

What voids evidence is one table: a replaced GPU voids everything a GPU was measured by, a replaced HCA or
cable what crossed the fabric, new firmware or a new driver everything, a new NCCL what NCCL carried.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from diagnose.catalog.stage_ids import (
    BENCH_PREFIX,
    CUSTOM_PREFIX,
    GPU_BURNIN,
    GPU_GEMM,
    GPU_HBM,
    GPU_MEMTEST,
    GPU_SDC,
    HISTORY_PREFIX,
    IB_LATENCY,
    IB_WRITE_BW,
    NCCL_TRANSPORT,
    QUARANTINE_CAP,
)

HOST, STRESS, BURNIN, FLEET, PERFTEST, COLLECTIVE, KV = (
    "host",
    "stress",
    "burnin",
    "fleet",
    "perftest",
    "collective",
    "kv",
)
#: Per-host phases in the order a run does them.
HOST_PHASES: tuple[str, ...] = (HOST, STRESS, BURNIN, FLEET, PERFTEST, COLLECTIVE, KV)
#: The cluster's phases: a collective over (at least) every accepted host, the training reference run.
FULL_SCALE, TRAINING = "full_scale", "training"
CLUSTER_PHASES: tuple[str, ...] = (FULL_SCALE, TRAINING)

WORDS = {
    HOST: "host checks",
    STRESS: "GPU stress",
    BURNIN: "burn-in",
    FLEET: "fleet probes",
    PERFTEST: "per-NIC perftest",
    COLLECTIVE: "cross-node collective",
    KV: "KV transfer",
    FULL_SCALE: "full-scale collective",
    TRAINING: "training reference",
}

_STRESS_IDS = {GPU_GEMM, GPU_HBM, GPU_MEMTEST, GPU_SDC}
_ALL = frozenset(HOST_PHASES)
_GPU = frozenset({HOST, STRESS, BURNIN, FLEET, COLLECTIVE, KV})
_FABRIC = frozenset({HOST, PERFTEST, COLLECTIVE, KV})
_NCCL = frozenset({FLEET, COLLECTIVE, KV})

#: What a changed part or version voids, by the kind of change (identity.Change.kind).
VOIDS: dict[str, frozenset[str]] = {
    "gpu": _GPU,
    "hca": _FABRIC,
    "cable": _FABRIC,
    "firmware": _ALL,
    "driver": _ALL,
    "nccl": _NCCL,
}
#: The cluster phases each kind of change voids, for the hosts it happened on.
CLUSTER_VOIDS: dict[str, frozenset[str]] = {
    "gpu": frozenset(CLUSTER_PHASES),
    "hca": frozenset({FULL_SCALE}),
    "cable": frozenset({FULL_SCALE}),
    "firmware": frozenset(CLUSTER_PHASES),
    "driver": frozenset(CLUSTER_PHASES),
    "nccl": frozenset(CLUSTER_PHASES),
}


def phase_of(check_id: str) -> str | None:
    """The phase a result row is evidence of; None for rows about the run rather than the host
    (history.*, quarantine.cap) and for the training probe's rows, which are the cluster's."""
    if check_id.startswith(HISTORY_PREFIX) or check_id == QUARANTINE_CAP:
        return None
    if check_id in _STRESS_IDS:
        return STRESS
    if check_id == GPU_BURNIN:
        return BURNIN
    if check_id.startswith("fleet."):
        return FLEET
    if check_id in (IB_WRITE_BW, IB_LATENCY):
        return PERFTEST
    if check_id.startswith(BENCH_PREFIX) or check_id == NCCL_TRANSPORT:
        return COLLECTIVE
    if check_id.startswith("train."):
        return None
    if check_id.startswith("infer."):
        return KV
    if check_id.startswith(CUSTOM_PREFIX):
        return HOST
    return HOST


def failure_kind(check_id: str) -> str | None:
    """The kind of part a failed check points at (a key of :data:`VOIDS`), or None: only its own phase."""
    if check_id.startswith("gpu."):
        return "gpu"
    if check_id.startswith(("ib.", "pci.")):
        return "hca"
    return None


@dataclass(frozen=True)
class Needs:
    """What a campaign asks of every host and of the cluster, from its playbook."""

    host: tuple[str, ...]
    cluster: tuple[str, ...]

    def to_dict(self) -> dict[str, list[str]]:
        return {"host": list(self.host), "cluster": list(self.cluster)}

    @classmethod
    def of(cls, data: object) -> Needs:
        if not isinstance(data, dict):
            return cls(HOST_PHASES, CLUSTER_PHASES)
        return cls(
            tuple(p for p in HOST_PHASES if p in (data.get("host") or ())),
            tuple(p for p in CLUSTER_PHASES if p in (data.get("cluster") or ())),
        )


def needs_of(
    benchmarks_enabled: bool,
    stress: bool,
    burnin_minutes: float,
    fleet: bool,
    perftest: bool,
    training: bool,
    kv: bool,
) -> Needs:
    """The phases a playbook's benchmark plan asks for (the host checks always)."""
    host = [HOST]
    cluster = []
    if benchmarks_enabled:
        host += [STRESS] if stress else []
        host += [BURNIN] if stress and burnin_minutes > 0 else []
        host += [FLEET] if fleet else []
        host += [PERFTEST] if perftest else []
        host += [COLLECTIVE]
        host += [KV] if kv else []
        cluster += [FULL_SCALE] + ([TRAINING] if training else [])
    return Needs(tuple(p for p in HOST_PHASES if p in host), tuple(cluster))


_ORDER = {p: i for i, p in enumerate((*HOST_PHASES, *CLUSTER_PHASES))}


def ordered(phases: Iterable[str]) -> list[str]:
    """Phases in the order a run does them (host phases, then the cluster's)."""
    return sorted(set(phases), key=lambda p: _ORDER.get(p, len(_ORDER)))
