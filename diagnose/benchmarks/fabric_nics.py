"""Which NICs carried the collectives, and whether they belong to the compute fabric.

A DGX-class node has a 400G compute fabric, often a 200G storage (or BlueField) fabric and a slow
management network; NCCL picks by what it finds, and if it picks the wrong NIC the collectives still run,
only far slower. The compute NICs of a host are the profile's ``expected_compute_hcas`` (names or globs,
``mlx5_[0-7]``), else the HCAs of its ``expected_compute_hca_types`` in ibstat (NCCL opens every
InfiniBand HCA, an HGX B300's NVLink-switch management ConnectX-7s included, unless told otherwise), or,
lacking both, the NICs that ``nvidia-smi topo -m`` puts next to a GPU (PIX or PXB): the ones a GPU-direct
path is built for.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import Any

from diagnose.core.check import Facts
from diagnose.core.hosts import Host

GPU_LOCAL = ("PIX", "PXB")


def compute_nics(host: Host, facts: Mapping[str, Facts]) -> tuple[list[str], str] | None:
    """(patterns, where they come from) for one host, or None when nothing says which NICs compute."""
    named = host.vars.list("expected_compute_hcas")
    if named:
        return named, "expected_compute_hcas"
    typed = _typed_hcas(host.vars.list("expected_compute_hca_types"), facts)
    if typed:
        return typed
    nearest = (facts.get("gpu.topology") or {}).get("nearest_nic") or {}
    local = sorted({n["nic"] for n in nearest.values() if n.get("relation") in GPU_LOCAL and n.get("nic")})
    if local:
        return local, "the GPU-local NICs in nvidia-smi topo -m"
    return None


def _typed_hcas(types: list[str] | None, facts: Mapping[str, Facts]) -> tuple[list[str], str] | None:
    """The HCAs of the profile's compute CA types in ibstat (an HGX B300's ConnectX-8s and not its
    NVLink-switch management ConnectX-7s, whose topo -m lists no NIC at all), or None."""
    ibstat = facts.get("ib.port_state") or facts.get("ib.link_rate") or {}
    wanted = {t.strip().upper() for t in types or ()}
    devices = sorted(
        {p["device"] for p in ibstat.get("ports") or [] if str(p.get("ca_type") or "").upper() in wanted}
    )
    if not wanted or not devices:
        return None
    return devices, f"the {', '.join(sorted(wanted))} HCAs in ibstat (expected_compute_hca_types)"


def is_compute(device: str, patterns: list[str]) -> bool:
    """``mlx5_0:1`` (device:port as NCCL names it) against ``mlx5_0``, ``mlx5_0:1`` or a glob."""
    bare = device.split(":")[0]
    return any(fnmatch.fnmatchcase(device, p) or fnmatch.fnmatchcase(bare, p) for p in patterns)


def wrong_nics(
    nics_used: Mapping[str, list[str]], hosts: list[Host], facts: Mapping[str, Mapping[str, Facts]]
) -> list[str]:
    """One line per host whose inter-node traffic left through a NIC outside its compute fabric."""
    problems = []
    for host in hosts:
        used = [n for n in nics_used.get(host.name, []) if not n.startswith("NET/")]
        known = compute_nics(host, facts.get(host.name, {}))
        if not used or known is None:
            continue
        patterns, source = known
        outside = [n for n in used if not is_compute(n, patterns)]
        if outside:
            problems.append(
                f"{host.name} sent inter-node traffic over {', '.join(outside)}, not a compute-fabric NIC "
                f"(compute: {', '.join(patterns)}, from {source})"
            )
    return problems


def nics_phrase(nics_used: Mapping[str, list[str]]) -> str:
    """``NICs: mlx5_0:1, mlx5_1:1 on every node`` or per host, for the transport message."""
    if not nics_used:
        return ""
    sets = {tuple(v) for v in nics_used.values()}
    if len(sets) == 1:
        return f"; NICs used: {', '.join(next(iter(sets)))} on every node"
    return "; NICs used: " + "; ".join(f"{h} {', '.join(v)}" for h, v in nics_used.items())


def observed_nics(summary: Mapping[str, Any]) -> dict[str, list[str]]:
    return {host: list(names) for host, names in (summary.get("nics_used") or {}).items()}


def mnnvl_phrase(mnnvl: Mapping[str, Any] | None) -> tuple[str, bool]:
    """What the transport message adds about multi-node NVLink, and whether it warrants a WARN.

    Between trays of an NVL72 rack the collectives should run over NVLink (P2P/MNNVL); a job with
    ``NCCL_MNNVL_ENABLE=0`` or a GPU whose fabric line was not healthy falls back to the network or runs
    degraded while every figure inside one tray looks right, so the sweep says which of the two it measured.
    """
    if not mnnvl:
        return "", False
    if mnnvl["disabled_by_env"]:
        return (
            "; multi-node NVLink turned off (NCCL_MNNVL_ENABLE=0): trays of a rack talk over the network",
            True,
        )
    parts = []
    if mnnvl["enabled"]:
        size = mnnvl["domain_size"]
        parts.append(
            f"multi-node NVLink on (NVLink domain of {size} GPUs)" if size else "multi-node NVLink on"
        )
    if mnnvl["unhealthy"]:
        parts.append("NVLink fabric not healthy: " + "; ".join(mnnvl["unhealthy"]))
    return ("; " + "; ".join(parts) if parts else ""), bool(mnnvl["unhealthy"])
