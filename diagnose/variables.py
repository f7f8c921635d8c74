"""The expected-value variables a profile (or any inventory level, or ``-e``) may set.

Profiles are data; this registry is their schema. A profile key that is not listed here is rejected with
the file and line, so a typo can never silently disable a rule.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Variable:
    name: str
    kind: type  # int, float, bool, str or list
    meaning: str


PROFILE_VARIABLES: dict[str, Variable] = {
    v.name: v
    for v in (
        Variable("expected_gpu_count", int, "GPUs per host"),
        Variable("expected_gpu_model", str, "substring of the GPU name, e.g. H100"),
        Variable("expected_nvlink", bool, "every GPU pair joined by NV#"),
        Variable(
            "expected_hca_count", int, "RDMA ports in State Active per host (0: no fabric, IB checks SKIP)"
        ),
        Variable("expected_link_rate_gbps", float, "minimum port rate in Gb/s"),
        Variable("expected_mtu", int, "active MTU on every RDMA port"),
        Variable("expected_link_layer", str, "InfiniBand, Ethernet (RoCE) or efa"),
        Variable("min_port_range", int, "minimum width of net.ipv4.ip_local_port_range"),
        Variable(
            "line_rate_gbps", float, "per-NIC line rate the inter-node busbw expectation is computed from"
        ),
        Variable("nvlink_busbw_gbps", float, "intra-node busbw the single-node expectation is computed from"),
    )
}
