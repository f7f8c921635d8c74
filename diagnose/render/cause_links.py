"""Which results a root cause explains: one fault, one cause line, its consequences under it.

A foreign process on a GPU makes that GPU's GEMM slow, the collectives across it slow, the training probe's
overlap poor and the KV transfer short of its figure; ``NCCL_P2P_DISABLE=1`` in the environment makes every
collective, the KV transfer and the staging probe slow. Reported one by one, that is six problems with six
"fix the configuration" lines where the operator has one thing to do. A *root* here is a result that names a
condition which, while it stood, makes other measurements meaningless or low; its *consequences* are the
non-PASS results of the kinds that condition affects, measured on its hosts (or, for a cluster-wide result,
in a run those hosts took part in).

The table is ordered: the first root that may explain a result claims it, so a host that could not be
reached explains its own errors before anything else does, and a foreign process is blamed for a slow
GEMM before the clocks it also pulled down. A root claimed by an earlier root is no longer a root of its
own (``nccl.transport`` on NET/Socket under an ``nccl.env`` that disabled P2P and SHM). Unrelated findings
stay separate causes. Pure: rows in, links out; the verdict and each row's status are untouched.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from diagnose.catalog.stage_ids import (
    BENCH_LINK,
    BENCH_STRAGGLER,
    FLEET_BUSBW,
    FLEET_NVLINK,
    GPU_BURNIN,
    GPU_GEMM,
    GPU_HBM,
    GPU_MEMTEST,
    GPU_SDC,
    HOST_TORCH,
    IB_LATENCY,
    IB_WRITE_BW,
    NCCL_TRANSPORT,
    TRAIN_OVERLAP,
    TRAIN_TAIL,
)
from diagnose.catalog.stage_ids import (
    STRESS as STRESS_IDS,
)

#: What moves bytes between GPUs or hosts: a transport fault shows in every one of these.
COMMUNICATION = (
    NCCL_TRANSPORT,
    "bench.*",
    FLEET_BUSBW,
    FLEET_NVLINK,
    "train.*",
    "infer.*",
)
#: The same over the fabric's own tools as well: a port or HCA fault shows in perftest too.
FABRIC = (*COMMUNICATION, IB_WRITE_BW, IB_LATENCY)
#: What a GPU computes or copies: a GPU shared, throttled or failing shows in every one of these.
GPU_WORK = (GPU_GEMM, GPU_HBM, GPU_MEMTEST, GPU_SDC, GPU_BURNIN, "fleet.*")


@dataclass(frozen=True)
class Root:
    """A check whose non-PASS result explains non-PASS results of ``explains`` (ids, ``*`` patterns)."""

    check: str
    explains: tuple[str, ...]
    cluster: bool = True  # False: explains the root's own hosts' results only, never a cluster-wide one
    # Only results of these statuses (empty: any). A host lost mid-run explains what could not be measured
    # on it (ERROR), not what was measured before it went (a lifetime ECC count WARNed at the host stage).
    statuses: tuple[str, ...] = ()

    def covers(self, check_id: str) -> bool:
        return check_id != self.check and any(fnmatchcase(check_id, p) for p in self.explains)


#: First match wins: the deeper condition before what it may also have caused.
ROOTS: tuple[Root, ...] = (
    Root("host.reachable", ("*",), cluster=False, statuses=("ERROR",)),
    # torch missing on a host: every launch that needed it there could not start (ERROR), one cause.
    Root(HOST_TORCH, ("bench.*", "fleet.*", "train.*", "infer.*", *STRESS_IDS), statuses=("ERROR",)),
    Root("gpu.processes", (*GPU_WORK, *FABRIC)),
    Root("k8s.rdma_devices", (*FABRIC, "gpu.gpudirect", "ib.*")),
    Root("nccl.env", FABRIC),
    Root("ib.devices", (*FABRIC, "ib.*", "gpu.gpudirect")),
    Root("ib.port_state", (*FABRIC, "ib.link_rate", "ib.mtu", "ib.counters", "ib.consistency")),
    Root("ib.link_rate", (*FABRIC, "ib.consistency")),
    Root("ib.flaps", (*FABRIC, "ib.counters")),
    Root("ib.optics", (*FABRIC, "ib.counters")),
    Root("ib.mtu", FABRIC),
    Root("gpu.gpudirect", FABRIC),
    Root("pci.acs", (*FABRIC, "fleet.*")),
    Root("gpu.xid", (*GPU_WORK, *FABRIC, "gpu.clocks", "gpu.memory")),
    Root("gpu.sxid", (*FABRIC, "gpu.nvlink", "gpu.fabricmanager")),
    Root("gpu.fabricmanager", (*FABRIC, "gpu.nvlink")),
    # A tray out of the NVLink domain: its IMEX peers and the rack's rule see the same fault.
    Root("gpu.nvlink_domain", (*FABRIC, "gpu.imex", "nvlink.rack")),
    Root("gpu.imex", (*FABRIC, "nvlink.rack")),
    Root("gpu.nvlink", FABRIC),
    Root("gpu.memory", (GPU_HBM, GPU_MEMTEST, GPU_SDC)),
    Root("gpu.pcie", ("fleet.*", *FABRIC)),
    Root("gpu.clocks", (*GPU_WORK, *FABRIC)),
    Root(NCCL_TRANSPORT, ("bench.*", FLEET_BUSBW, FLEET_NVLINK, "train.*", "infer.*")),
    # The searches name the slow host or link where no condition of the host explains it: the cluster-wide
    # busbw below its floor is what they found, not a second fault.
    Root(BENCH_STRAGGLER, ("bench.*", "fleet.*", "train.*", "infer.*")),
    Root(BENCH_LINK, ("bench.*", "fleet.*", "train.*", "infer.*")),
    # An all-reduce below its floor with no deeper cause: the training probe's exposed communication is that
    # fabric's (train.overlap says so in its words), not a second fault of the job.
    Root("bench.all_reduce", (TRAIN_OVERLAP, TRAIN_TAIL), statuses=("FAIL", "WARN")),
)
ROOT_IDS = frozenset(root.check for root in ROOTS)


def root_of(check_id: str) -> Root | None:
    return next((root for root in ROOTS if root.check == check_id), None)


#: took_part's key prefix for the hosts a benchmark names as the ones it failed on (``failed_hosts``).
FAILED = "failed:"


def took_part(document: dict[str, Any], accused: frozenset[str]) -> dict[str, frozenset[str]]:
    """For each benchmark id, the hosts its measurement ran across (every host of the run where the
    record does not say): a cluster-wide result is a consequence only of a fault on one of them. Where
    the straggler search or the link search accused hosts (``accused``), only those: the slow all_reduce
    is the host it named, not whichever other host also has a finding. A ``failed:<id>`` key holds the hosts
    a benchmark failed on (``failed_hosts``: a host lost during the sweep)."""
    everyone = frozenset(
        str(h["name"]) for h in document.get("hosts") or [] if isinstance(h, dict) and h.get("name")
    )
    out: dict[str, frozenset[str]] = {}
    for entry in document.get("benchmarks") or []:
        if not isinstance(entry, dict) or not isinstance(entry.get("collective"), str):
            continue
        hosts = entry.get("hosts")
        named = frozenset(str(h) for h in hosts) if isinstance(hosts, list) and hosts else everyone
        key = f"bench.{entry['collective']}"
        out[key] = out.get(key, frozenset()) | named
        failed = entry.get("failed_hosts")
        if isinstance(failed, list) and failed:
            out[f"{FAILED}{key}"] = out.get(f"{FAILED}{key}", frozenset()) | frozenset(map(str, failed))
    out["*"] = everyone
    if accused:
        out = {key: hosts & accused or hosts for key, hosts in out.items()}
    return out


def in_scope(
    root: Root, hosts: Iterable[str | None], row: dict[str, Any], participants: dict[str, frozenset[str]]
) -> bool:
    """A result on one of the root's hosts; a cluster-wide result of a measurement they took part in;
    anything at all under a cluster-wide root (NET/Socket between the nodes slows every host's probe)."""
    if root.statuses and row.get("status") not in root.statuses:
        return False
    wanted = set(hosts)
    if None in wanted:
        return True
    host = row.get("host")
    if isinstance(host, str):
        return host in wanted
    if not root.cluster:
        # A host root explains a measurement across hosts only where that host broke it (lost mid-sweep).
        return bool(wanted & participants.get(f"{FAILED}{row.get('id')}", frozenset()))
    ran_on = participants.get(str(row.get("id")), participants["*"])
    return bool(wanted & ran_on)
