"""What the per-NIC benchmark measures, where and in which order: rails, pairs, rounds, steps, ports, scripts.

Pure: host facts and settings in, plans and shell text out; :mod:`diagnose.probes.perftest` runs them.

* **Rails.** A host's rails are its compute HCAs in name order (``mlx5_0, mlx5_1, mlx5_4, ...``): the
  Active ports of the profile's fabric (``expected_link_layer``), kept to the compute HCAs' CA types
  (``expected_compute_hca_types``: an HGX B300's NVLink-switch management ConnectX-7s are no rail) and
  names (``expected_compute_hcas``, names or globs read as :func:`diagnose.benchmarks.fabric_nics.is_compute`
  reads them) where they are set. Rail *i* of one host
  meets rail *i* of another:
  on a rail-optimised fabric they hang off the same leaf. Each NIC carries its port's rate (``ibstat``)
  and the GPU nearest to it (PIX or PXB in ``topo -m``), whose memory its buffer lives in when
  GPUDirect RDMA passed on both hosts of a pair (``--use_cuda=<gpu>``).
* **Pairs and rounds.** A round is a set of host pairs in which every host is busy once, so that no host
  serves two tests at the same time; the first round pairs neighbours in inventory order, an odd host out
  meets the first host in a round of its own.
* **Steps.** A pair's launch walks a list of steps on both hosts in lockstep: every rail alone in both
  directions, then all rails at once in both directions (PCIe and NUMA contention shows only there),
  then optionally the latency of every rail. The writer of a step is perftest's client, its server the
  other host; both hosts run the same script, each playing its part of every step, so a step starts on
  both sides once both finished the one before.
* **Ports.** The servers of a step listen on ``base + parity × rails + rail`` of a block of the
  ``perftest_ports`` range; consecutive steps alternate between the two halves of the block, so a server
  still tearing down never meets the next step's client. Pairs whose servers share an address get
  blocks of their own (on a cluster every host has its own address; on one machine they share it).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from diagnose.benchmarks.fabric_nics import GPU_LOCAL
from diagnose.config.profiles import no_fabric_reason
from diagnose.core.check import Facts
from diagnose.core.hosts import Host
from diagnose.parsers.rdma import is_active, normalise_kind, rail_ports
from diagnose.probes.perftest_settings import LATENCY_BYTES, Settings

BW_TOOL = "ib_write_bw"
LAT_TOOL = "ib_write_lat"
#: The Debian/Ubuntu and RHEL package that carries both tools.
PACKAGE = "perftest"
#: A line each script writes after a step's output, carrying the exit status of the tool.
RC_MARK = "@@rc="

Kind = Literal["bw", "lat"]
Mode = Literal["single", "together", "check"]


def natural_key(name: str) -> list[Any]:
    """mlx5_2 before mlx5_10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


@dataclass(frozen=True)
class Nic:
    """One rail of one host: its HCA and port, the port's rate and the GPU nearest to it."""

    host: str
    rail: int
    hca: str
    port: int
    rate_gbps: float | None
    gpu: int | None


@dataclass(frozen=True)
class HostRails:
    """A host's rails, whether its GPUs can take part (GPUDirect RDMA passed), and where the list came from."""

    host: str
    address: str
    nics: tuple[Nic, ...]
    gpudirect: bool
    source: str


def gpudirect_ok(facts: Mapping[str, Facts]) -> bool:
    """gpu.gpudirect's facts say what its PASS says: nvidia_peermem loaded, or DMA-BUF possible."""
    direct = facts.get("gpu.gpudirect") or {}
    return bool(direct.get("peermem") or direct.get("dmabuf"))


def _nearest_gpu(facts: Mapping[str, Facts], hca: str) -> int | None:
    nearest = (facts.get("gpu.topology") or {}).get("nearest_nic") or {}
    gpus = [
        int(gpu[3:])
        for gpu, info in nearest.items()
        if info.get("nic") == hca and info.get("relation") in GPU_LOCAL and gpu[3:].isdigit()
    ]
    return min(gpus) if gpus else None


def rails_of(host: Host, facts: Mapping[str, Facts]) -> HostRails | str:
    """The host's rails, or why it has none to measure (a sentence)."""
    reason = no_fabric_reason(host.vars)
    if reason:
        return f"no fabric to measure ({reason})"
    ibstat = facts.get("ib.link_rate") or facts.get("ib.port_state")
    if not ibstat or not isinstance(ibstat.get("ports"), list):
        return "no ibstat facts (the playbook runs neither ib.link_rate nor ib.port_state)"
    kind = normalise_kind(host.vars.str("expected_link_layer"))
    types, patterns = host.vars.list("expected_compute_hca_types"), host.vars.list("expected_compute_hcas")
    # An HGX B300's NVLink-switch management ConnectX-7s share the rails' link layer: its profile's compute
    # CA types keep them out, as they are kept out of the ib.* checks.
    rails, _ = rail_ports(ibstat["ports"], kind, types, patterns)
    active = [p for p in rails if is_active(p)]
    source = "the Active ports of the fabric in ibstat"
    if patterns:
        source = "expected_compute_hcas"
    elif types:
        source = f"the Active ports of the fabric in ibstat of CA type {', '.join(types)}"
    if not active:
        return f"no Active compute port in ibstat ({source})"
    active.sort(key=lambda p: (natural_key(p["device"]), p["port"]))
    direct = gpudirect_ok(facts)
    nics = tuple(
        Nic(host.name, rail, p["device"], int(p["port"]), p.get("rate"), _nearest_gpu(facts, p["device"]))
        for rail, p in enumerate(active)
    )
    address = host.vars.str("perftest_address") or host.address
    return HostRails(host.name, address, nics, direct, source)


# ---------------------------------------------------------------------------------------------------------
# Pairs and rounds


def first_rounds(hosts: Sequence[str]) -> list[list[tuple[str, str]]]:
    """Neighbours in order; an odd host out meets the first host in a second round."""
    pairs = [(hosts[i], hosts[i + 1]) for i in range(0, len(hosts) - 1, 2)]
    rounds = [pairs] if pairs else []
    if len(hosts) % 2 and len(hosts) > 1:
        rounds.append([(hosts[-1], hosts[0])])
    return rounds


def schedule(pairs: Sequence[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """Rounds in which every host is busy at most once, pairs kept in their order (greedy first fit)."""
    rounds: list[list[tuple[str, str]]] = []
    busy: list[set[str]] = []
    for a, b in pairs:
        for taken, chosen in zip(busy, rounds, strict=True):
            if a not in taken and b not in taken:
                chosen.append((a, b))
                taken.update((a, b))
                break
        else:
            rounds.append([(a, b)])
            busy.append({a, b})
    return rounds


# ---------------------------------------------------------------------------------------------------------
# Steps


@dataclass(frozen=True)
class Step:
    """One step of a pair's launch: ``writer`` runs perftest's clients, ``server`` its servers, on ``rails``."""

    index: int
    kind: Kind
    mode: Mode
    writer: str
    server: str
    rails: tuple[int, ...]

    def describe(self) -> str:
        what = "latency" if self.kind == "lat" else "write bandwidth"
        where = (
            f"rail {self.rails[0]}"
            if len(self.rails) == 1
            else f"rails {self.rails[0]}-{self.rails[-1]} at once"
        )
        return f"{what} {self.writer}→{self.server} on {where}"


def _numbered(specs: list[tuple[Kind, Mode, str, str, tuple[int, ...]]]) -> list[Step]:
    return [Step(i, kind, mode, w, s, rails) for i, (kind, mode, w, s, rails) in enumerate(specs)]


def pair_steps(a: str, b: str, rails: int, latency: bool) -> list[Step]:
    """A first-round pair: each rail alone both ways, all rails at once both ways, then latencies."""
    specs: list[tuple[Kind, Mode, str, str, tuple[int, ...]]] = []
    for rail in range(rails):
        specs += [("bw", "single", a, b, (rail,)), ("bw", "single", b, a, (rail,))]
    if rails > 1:
        every = tuple(range(rails))
        specs += [("bw", "together", a, b, every), ("bw", "together", b, a, every)]
    if latency:
        specs += [("lat", "single", a, b, (rail,)) for rail in range(rails)]
    return _numbered(specs)


def check_steps(a: str, b: str, rails: Sequence[int]) -> list[Step]:
    """A localization pair: the suspect rails alone, both ways."""
    specs: list[tuple[Kind, Mode, str, str, tuple[int, ...]]] = []
    for rail in rails:
        specs += [("bw", "check", a, b, (rail,)), ("bw", "check", b, a, (rail,))]
    return _numbered(specs)


# ---------------------------------------------------------------------------------------------------------
# Ports


@dataclass
class PortBlocks:
    """Blocks of the port range handed to launches, per server address; a launch holds one per address."""

    low: int
    high: int
    size: int
    used: dict[str, set[int]] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return max(0, (self.high - self.low + 1) // self.size)

    def take(self, addresses: Sequence[str]) -> int | None:
        """The first port of a block free on every one of ``addresses``, now held; None when none is."""
        for block in range(self.count):
            if all(block not in self.used.get(a, set()) for a in addresses):
                for address in addresses:
                    self.used.setdefault(address, set()).add(block)
                return self.low + block * self.size
        return None

    def give_back(self, addresses: Sequence[str], first_port: int) -> None:
        block = (first_port - self.low) // self.size
        for address in addresses:
            self.used.get(address, set()).discard(block)


def block_size(rails: int) -> int:
    """Ports one launch needs: two halves (alternating steps) of one port per rail."""
    return 2 * max(1, rails)


def step_port(first_port: int, step: Step, rail: int, rails: int) -> int:
    return first_port + (step.index % 2) * rails + rail


# ---------------------------------------------------------------------------------------------------------
# The script each host of a pair runs

_FUNCTIONS = """\
d=$1
serve() { out=$1; shift; "$@" >"$out" 2>&1; echo "@@rc=$?" >>"$out"; }
write() {
  out=$1; shift; end=$(( $(date +%s) + CONNECT_S ))
  while :; do
    "$@" >"$out" 2>&1; rc=$?
    if [ $rc -eq 0 ] || ! grep -q "Couldn't connect" "$out" || [ "$(date +%s)" -ge $end ]; then
      echo "@@rc=$rc" >>"$out"; return
    fi
    sleep 0.2
  done
}
"""


def output_name(step: Step, rail: int) -> str:
    """The file one side of one rail of one step writes its tool's output to."""
    return f"s{step.index}-r{rail}.txt"


def _tool_args(
    step: Step, nic: Nic, port: int, settings: Settings, cuda: int | None, server_address: str | None
) -> list[str]:
    tool = BW_TOOL if step.kind == "bw" else LAT_TOOL
    program = f"{settings.path}/{tool}" if settings.path else tool
    args = [program, "-d", nic.hca, "-i", str(nic.port), "-p", str(port), "-F"]
    if step.kind == "bw":
        args += ["-s", str(settings.message_bytes), "-D", str(settings.duration_s)]
        if cuda is not None:
            args.append(f"--use_cuda={cuda}")
    else:
        args += ["-s", str(LATENCY_BYTES), "-n", str(settings.latency_iters)]
    if server_address is not None:
        args.append(server_address)
    return args


def memory_gpu(host: HostRails, nic: Nic, settings: Settings) -> int | None:
    """The GPU whose memory ``nic``'s buffers live in, or None for host memory."""
    return nic.gpu if settings.gpudirect and host.gpudirect else None


def memory_of(host: HostRails, nic: Nic, settings: Settings) -> str:
    """``cuda:<gpu>`` or ``host``, as records and messages name a buffer's place."""
    gpu = memory_gpu(host, nic, settings)
    return "host" if gpu is None else f"cuda:{gpu}"


def step_seconds(step: Step, settings: Settings, server: bool) -> int:
    """The bound ``timeout`` puts on one tool run: what it needs, plus the connect window on a server."""
    work = settings.duration_s if step.kind == "bw" else 5 + settings.latency_iters // 10_000
    return int(work + 20 + (settings.connect_s if server else 0))


def host_script(
    host: str,
    steps: Sequence[Step],
    rails: Mapping[str, HostRails],
    first_port: int,
    settings: Settings,
) -> str:
    """The shell script one host of a pair runs (``$1``: its launch folder): its side of every step.

    Buffers live in the memory of the GPU nearest each NIC where the host passed GPUDirect RDMA (and
    ``perftest_gpudirect`` allows it), in host memory otherwise (:func:`memory_of`). A step's outputs go to one file per rail (:func:`output_name`) ending with the tool's exit status;
    ``progress`` gets ``end <step>`` once this host's side of a step is over, and ``done`` at the end.
    """
    width = max(max(s.rails) for s in steps) + 1 if steps else 1
    lines = ["#!/bin/sh", _FUNCTIONS.replace("CONNECT_S", str(int(settings.connect_s)))]
    for step in steps:
        if host not in (step.writer, step.server):
            continue
        server = host == step.server
        own = rails[host].nics
        lines.append(f"# step {step.index}: {step.describe()}")
        for rail in step.rails:
            nic = own[rail]
            port = step_port(first_port, step, rail, width)
            gpu = memory_gpu(rails[host], nic, settings)
            address = None if server else rails[step.server].address
            seconds = step_seconds(step, settings, server)
            args = ["timeout", "-k", "2", str(seconds), *_tool_args(step, nic, port, settings, gpu, address)]
            verb = "serve" if server else "write"
            lines.append(f'{verb} "$d/{output_name(step, rail)}" {shlex.join(args)} &')
        lines.append("wait")
        lines.append(f'echo "end {step.index}" >>"$d/progress"')
    lines.append('echo done >>"$d/progress"')
    return "\n".join(lines) + "\n"
