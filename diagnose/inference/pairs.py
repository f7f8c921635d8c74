"""Which prefill → decode pairs to measure, read from the ``gpu.topology`` facts of the hosts.

A KV transfer is as fast as the path between its two GPUs, and a node offers several kinds of path:
``NV#`` (NVLink, # bonded links), ``PIX``/``PXB`` (one or more PCIe switches), ``PHB`` (the CPU's host
bridge), ``NODE`` (across host bridges of one socket), ``SYS`` (across sockets). One pair per kind present
on the first host shows what each costs; one pair per neighbouring host pair shows the network. Pairs the
playbook names (the prefill and decode GPU groups of a deployment, or pairs given their own environment)
are measured as well, so that a placement is judged by what it measured, not by what it should cost.

Pairs are directional (prefill sends, decode receives) and written ``GPU0->GPU1`` inside the first host
or ``node1:GPU0->node2:GPU0`` across hosts; a GPU may also be written by its index alone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from diagnose.parsers.nvidia_smi import PCIE_RANK, nvlink_links

_ENDPOINT = re.compile(r"(?:(?P<host>[A-Za-z0-9_.\[\]%-]+):)?(?:GPU)?(?P<gpu>\d+)\Z", re.IGNORECASE)
#: How many neighbouring host pairs are measured across nodes: enough to see the network, not a full matrix.
MAX_HOST_PAIRS = 4
NETWORK = "NET"
GLOO_LINK = "TCP (gloo)"


@dataclass(frozen=True)
class Endpoint:
    """One side of a pair: a host and a GPU index as nvidia-smi numbers it (None: a CPU rank)."""

    host: str
    gpu: int | None

    def label(self, with_host: bool) -> str:
        gpu = "CPU" if self.gpu is None else f"GPU{self.gpu}"
        return f"{self.host}:{gpu}" if with_host else gpu


@dataclass
class Pair:
    """One prefill → decode pair to measure, why it was chosen and what path joins it."""

    prefill: Endpoint
    decode: Endpoint
    link: str
    roles: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    #: The fastest kind of path between two GPUs of this pair's host(s) (NV18 on an HGX node; across nodes,
    #: "same rail" when the two GPUs' nearest NICs carry the same name).
    fastest: str | None = None
    #: Across nodes: the NIC nearest to each GPU (its rail), when the topology names one.
    rails: tuple[str | None, str | None] = (None, None)
    #: The CUDA device of each side on its host: its place among the GPUs ``CUDA_VISIBLE_DEVICES`` leaves
    #: visible there (the endpoints keep nvidia-smi's numbering, which the topology and the operator use);
    #: None: the same numbers as the endpoints (every GPU visible).
    devices: tuple[int, int] | None = None

    @property
    def inter_node(self) -> bool:
        return self.prefill.host != self.decode.host

    @property
    def label(self) -> str:
        both = self.inter_node
        return f"{self.prefill.label(both)}->{self.decode.label(both)}"

    def cuda_devices(self) -> tuple[int, int]:
        """The CUDA device numbers the two ranks open (a CPU rank's is never read)."""
        return self.devices or (self.prefill.gpu or 0, self.decode.gpu or 0)

    def key(self) -> tuple[Endpoint, Endpoint]:
        return (self.prefill, self.decode)


def path_rank(relation: str | None) -> tuple[int, int]:
    """Lower is faster: NVLink first (more bonded links first), then PCIe from PIX to SYS."""
    if relation is None:
        return (9, 0)
    links = nvlink_links(relation)
    if links is not None:
        return (0, -links)
    return (1, PCIE_RANK.get(relation, 8))


def parse_endpoint(text: str, default_host: str) -> Endpoint:
    """``GPU3``, ``3``, ``node2:GPU3`` or ``node2:3``; raises ValueError for anything else."""
    match = _ENDPOINT.match(str(text).strip())
    if match is None:
        raise ValueError(f"{text!r} is not a GPU (GPU3, 3, or host:GPU3)")
    return Endpoint(match["host"] or default_host, int(match["gpu"]))


def parse_pair(text: str, default_host: str) -> tuple[Endpoint, Endpoint]:
    """``GPU0->GPU1`` or ``node1:GPU0->node2:GPU0``: prefill, then decode."""
    left, sep, right = str(text).partition("->")
    if not sep:
        raise ValueError(f"pair {text!r} must be written prefill->decode, e.g. GPU0->GPU1")
    return parse_endpoint(left, default_host), parse_endpoint(right, default_host)


def _topology(facts: Mapping[str, Mapping[str, Any]], host: str) -> Mapping[str, Any]:
    return facts.get(host, {}).get("gpu.topology") or {}


def relation(topology: Mapping[str, Any], a: int, b: int) -> str | None:
    """The link class between two GPUs of one host, from the topology facts (None when not shown)."""
    names = {f"GPU{a}", f"GPU{b}"}
    for pair in topology.get("gpu_pairs") or []:
        if {pair["a"], pair["b"]} == names:
            return str(pair["relation"])
    return None


def fastest_relation(topology: Mapping[str, Any]) -> str | None:
    """The best path between any two GPUs of a host."""
    relations = [str(p["relation"]) for p in topology.get("gpu_pairs") or []]
    return min(relations, key=path_rank) if relations else None


def visible_gpus(topology: Mapping[str, Any]) -> list[int] | None:
    """nvidia-smi's indexes of the GPUs CUDA sees on a host, in CUDA's order; None when not read (all)."""
    visible = topology.get("visible")
    return list(visible["visible"]) if isinstance(visible, Mapping) else None


def _rail(topology: Mapping[str, Any], gpu: int | None) -> str | None:
    nearest = (topology.get("nearest_nic") or {}).get(f"GPU{gpu}") or {}
    return nearest.get("nic")


class Planner:
    """Builds the list of pairs for one run; ``notes`` say what was left out and why."""

    def __init__(
        self, hosts: Sequence[str], backend: str, facts: Mapping[str, Mapping[str, Any]], nproc: int
    ) -> None:
        self.hosts = list(hosts)
        self.backend = backend
        self.facts = facts
        self.nproc = nproc
        self.pairs: list[Pair] = []
        self.notes: list[str] = []

    def _gpu_count(self, host: str) -> int | None:
        topology = _topology(self.facts, host)
        gpus = topology.get("topo_gpus")
        return len(gpus) if gpus else None

    def make(self, prefill: Endpoint, decode: Endpoint, role: str) -> Pair | None:
        """A pair between two endpoints with its link class, or None (with a note) when it cannot exist."""
        for end in (prefill, decode):
            if end.host not in self.hosts:
                self.notes.append(
                    f"{prefill.label(True)}->{decode.label(True)} ({role}): {end.host} is not a benchmark host"
                )
                return None
            count = self._gpu_count(end.host)
            if end.gpu is not None and count is not None and end.gpu >= count:
                self.notes.append(
                    f"{prefill.label(True)}->{decode.label(True)} ({role}): {end.host} has {count} GPUs"
                )
                return None
            visible = visible_gpus(_topology(self.facts, end.host))
            if end.gpu is not None and visible is not None and end.gpu not in visible:
                note = _topology(self.facts, end.host).get("visible_note") or "not visible to CUDA"
                self.notes.append(
                    f"{prefill.label(True)}->{decode.label(True)} ({role}): {end.label(True)} is not in "
                    f"scope ({note})"
                )
                return None
        if prefill == decode:
            self.notes.append(
                f"{prefill.label(True)}->{decode.label(True)} ({role}): a GPU cannot send to itself"
            )
            return None
        if self.backend == "gloo":
            return Pair(prefill, decode, GLOO_LINK, [role])
        devices = (self._device(prefill), self._device(decode))
        if prefill.host == decode.host:
            topology = _topology(self.facts, prefill.host)
            assert prefill.gpu is not None and decode.gpu is not None
            link = relation(topology, prefill.gpu, decode.gpu) or "unknown"
            return Pair(prefill, decode, link, [role], fastest=fastest_relation(topology), devices=devices)
        rails = (
            _rail(_topology(self.facts, prefill.host), prefill.gpu),
            _rail(_topology(self.facts, decode.host), decode.gpu),
        )
        return Pair(prefill, decode, NETWORK, [role], fastest="same rail", rails=rails, devices=devices)

    def _device(self, end: Endpoint) -> int:
        """The CUDA device an endpoint's GPU is on its host (its nvidia-smi index where all are visible)."""
        visible = visible_gpus(_topology(self.facts, end.host))
        gpu = end.gpu or 0
        return visible.index(gpu) if visible is not None and gpu in visible else gpu

    def add(self, pair: Pair | None) -> Pair | None:
        """Keep a pair once: a second reason to measure it becomes one more role."""
        if pair is None:
            return None
        for known in self.pairs:
            if known.key() == pair.key():
                known.roles.extend(r for r in pair.roles if r not in known.roles)
                return known
        self.pairs.append(pair)
        return pair

    def link_classes(self) -> None:
        """One pair per kind of GPU–GPU path on the first host (the first pair of each kind in the matrix)."""
        first = self.hosts[0]
        topology = _topology(self.facts, first)
        visible = visible_gpus(topology)
        seen: set[str] = set()
        for entry in topology.get("gpu_pairs") or []:
            kind = str(entry["relation"])
            ends = (int(str(entry["a"])[3:]), int(str(entry["b"])[3:]))
            if kind in seen or (visible is not None and not set(ends) <= set(visible)):
                continue
            seen.add(kind)
            self.add(self.make(Endpoint(first, ends[0]), Endpoint(first, ends[1]), "link class"))
        if not seen:
            if self.nproc >= 2:
                self.notes.append(f"no GPU topology facts for {first}: GPU0->GPU1 measured, its link unknown")
                self.add(self.make(Endpoint(first, 0), Endpoint(first, 1), "link class"))
            elif topology.get("visible_note"):
                self.notes.append(
                    f"{first} has one GPU in scope ({topology['visible_note']}): no pair inside it"
                )
            else:
                self.notes.append(f"{first} has one GPU: no pair inside the node")

    def _first_gpu(self, host: str) -> int | None:
        """GPU0, or the first GPU CUDA sees on the host; None (a CPU rank) on gloo."""
        if self.backend == "gloo":
            return None
        visible = visible_gpus(_topology(self.facts, host))
        return visible[0] if visible else 0

    def host_pairs(self) -> None:
        """Neighbouring hosts, GPU0 to GPU0 (the same rail on a rail-optimised fabric), or each host's first
        GPU in scope where ``CUDA_VISIBLE_DEVICES`` leaves GPU0 out."""
        for a, b in list(zip(self.hosts, self.hosts[1:], strict=False))[:MAX_HOST_PAIRS]:
            self.add(self.make(Endpoint(a, self._first_gpu(a)), Endpoint(b, self._first_gpu(b)), "host pair"))
        if len(self.hosts) - 1 > MAX_HOST_PAIRS:
            self.notes.append(f"{MAX_HOST_PAIRS} of {len(self.hosts) - 1} neighbouring host pairs measured")

    def placement(self, prefill: Sequence[str], decode: Sequence[str]) -> None:
        """The deployment's pairs: the i-th prefill GPU hands its requests to the i-th decode GPU."""
        if self.backend == "gloo":
            self.notes.append("placement groups not measured: gloo on hosts without GPUs")
            return
        for left, right in zip(prefill, decode, strict=False):
            one = parse_endpoint(left, self.hosts[0])
            other = parse_endpoint(right, self.hosts[0])
            self.add(self.make(one, other, "placement"))

    def named(self, pair_env: Mapping[str, Mapping[str, str]]) -> None:
        """Pairs given their own environment (a site's NCCL settings, a planted fault), added if new."""
        for spec, env in pair_env.items():
            prefill, decode = parse_pair(spec, self.hosts[0])
            if self.backend == "gloo":
                prefill, decode = Endpoint(prefill.host, None), Endpoint(decode.host, None)
            pair = self.add(self.make(prefill, decode, "named"))
            if pair is not None:
                pair.env.update(env)
                if "named" not in pair.roles:
                    pair.roles.append("named")


def plan_pairs(
    hosts: Sequence[str],
    backend: str,
    nproc: int,
    facts: Mapping[str, Mapping[str, Any]],
    prefill: Sequence[str] = (),
    decode: Sequence[str] = (),
    pair_env: Mapping[str, Mapping[str, str]] | None = None,
) -> tuple[list[Pair], list[str]]:
    """The pairs to measure, in order (link classes, host pairs, placement, named), and notes."""
    planner = Planner(hosts, backend, facts, nproc)
    if backend != "gloo":
        planner.link_classes()
    planner.host_pairs()
    planner.placement(prefill, decode)
    planner.named(pair_env or {})
    return planner.pairs, planner.notes
