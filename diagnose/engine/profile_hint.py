"""A cluster judged without a hardware profile: say so, and suggest one from what its hosts report.

Without ``diagnose_profile`` no expected value is set: ``expected_hca_count`` and ``expected_gpu_count`` are
absent, so the fabric checks and the GPU-count rule SKIP as "not required" and only the consistency and health
rules judge. A run that ends PASS that way has accepted nothing about the fabric, which an operator must hear
before reading the verdict. The note is known before any host is touched; the suggestion needs the hosts'
facts (GPU model and count, NVLink, active RDMA ports, their kind and rate), so the engine asks for it after
the host stage and records it in ``run.profile_suggestion`` (docs/contracts.md).

Everything here is pure: hosts or facts in, words and plain data out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from diagnose.config.playbook import PROFILE_VARIABLE
from diagnose.config.profile_files import Profile
from diagnose.core.hosts import Host
from diagnose.parsers.nvidia_smi import model_matches
from diagnose.parsers.rdma import describe_kind, is_active, normalise_kind
from diagnose.render.hostlist import summarize

#: What judging without a profile means, in the words the terminal and the report's cover use.
NO_PROFILE_MEANING = (
    "expected values absent: fabric and GPU-count checks SKIP as not required; only consistency and "
    "health rules judge"
)


def hosts_without_profile(hosts: Sequence[Host]) -> list[str]:
    """The hosts whose merged variables name no profile (inventory, playbook and ``-e`` all silent)."""
    return [h.name for h in hosts if not h.vars.get(PROFILE_VARIABLE)]


def no_profile_note(hosts: Sequence[Host]) -> str | None:
    """The run's profile note when some host has no profile, else None."""
    missing = hosts_without_profile(hosts)
    if not missing:
        return None
    where = (
        ""
        if len(missing) == len(hosts)
        else f" for {summarize(missing, 120)} ({len(missing)} of {len(hosts)} hosts)"
    )
    return (
        f"no profile chosen{where} ({PROFILE_VARIABLE} unset): {NO_PROFILE_MEANING}; "
        f"choose one with -e {PROFILE_VARIABLE}=NAME or in the inventory"
    )


@dataclass(frozen=True)
class Fabric:
    """The Active RDMA ports of one kind on a host: how many, and the slowest one's rate."""

    kind: str
    active: int
    rate_gbps: float | None


@dataclass(frozen=True)
class Hardware:
    """What a host reported about the hardware a profile describes; None where nothing was read."""

    gpu_model: str | None
    gpu_count: int | None
    nvlink_all_pairs: bool | None
    fabrics: tuple[Fabric, ...] | None  # None: no RDMA facts; (): read, and no port is Active

    def describe(self) -> str:
        """``8× NVIDIA H100 80GB HBM3, NVLink on every pair, 8 InfiniBand ports Active at 400 Gb/s``."""
        parts = []
        if self.gpu_count == 0:
            parts.append("no GPU")
        elif self.gpu_count is not None:
            parts.append(f"{self.gpu_count}× {self.gpu_model or 'GPU'}")
        if self.nvlink_all_pairs is not None and (self.gpu_count or 0) > 1:
            parts.append("NVLink on every pair" if self.nvlink_all_pairs else "not every GPU pair on NVLink")
        if self.fabrics == ():
            parts.append("no RDMA port Active")
        for fabric in self.fabrics or ():
            rate = f" at {fabric.rate_gbps:g} Gb/s" if fabric.rate_gbps else ""
            noun = "port" if fabric.active == 1 else "ports"
            parts.append(f"{fabric.active} {describe_kind(fabric.kind)} {noun} Active{rate}")
        return ", ".join(parts) or "nothing read"

    def fabric(self, kind: str) -> Fabric | None:
        return next((f for f in self.fabrics or () if f.kind == kind), None)


def _fabrics(ports: Sequence[Mapping[str, Any]]) -> tuple[Fabric, ...]:
    active = [p for p in ports if is_active(dict(p))]
    kinds = sorted({str(p.get("fabric")) for p in active})
    fabrics = []
    for kind in kinds:
        mine = [p for p in active if p.get("fabric") == kind]
        rates = [float(p["rate"]) for p in mine if isinstance(p.get("rate"), int | float)]
        fabrics.append(Fabric(kind, len(mine), min(rates) if rates else None))
    return tuple(sorted(fabrics, key=lambda f: -f.active))


def hardware_of(facts_by_check: Mapping[str, Mapping[str, Any]]) -> Hardware | None:
    """The hardware a host's check facts show (gpu.topology; ib.port_state's ibstat ports, else ib.devices'
    ibv_devinfo ports); None when neither the GPUs nor the RDMA ports were read."""
    gpu = facts_by_check.get("gpu.topology")
    ports = None
    for check in ("ib.port_state", "ib.devices"):
        facts = facts_by_check.get(check)
        if facts is not None and isinstance(facts.get("ports"), list):
            ports = facts["ports"]
            break
    if gpu is None and ports is None:
        return None
    count = gpu.get("gpu_count") if gpu else None
    pairs = gpu.get("gpu_pairs") if gpu else None
    nvlink = all(p.get("nvlinks") is not None for p in pairs) if isinstance(pairs, list) and pairs else None
    if count == 1:  # no pair to join: judged like a PCIe-only machine, as the default target is
        nvlink = False
    return Hardware(
        gpu_model=gpu.get("gpu_model") if gpu else None,
        gpu_count=count if isinstance(count, int) else None,
        nvlink_all_pairs=nvlink,
        fabrics=_fabrics(ports) if ports is not None else None,
    )


@dataclass(frozen=True)
class Match:
    """One profile against one host's hardware: what agrees, what contradicts (unread facts do neither)."""

    profile: str
    agrees: tuple[str, ...]
    differs: tuple[str, ...]

    @property
    def fits(self) -> bool:
        return not self.differs


def _gpu_expectations(expected: Mapping[str, Any], hw: Hardware) -> list[tuple[str, bool | None]]:
    count, model, nvlink = (
        expected.get(k) for k in ("expected_gpu_count", "expected_gpu_model", "expected_nvlink")
    )
    found: list[tuple[str, bool | None]] = []
    if hw.gpu_count is not None:
        want = f"{count} GPUs" if count is not None else "1 or more GPUs"
        ok = hw.gpu_count == count if count is not None else hw.gpu_count >= 1
        found.append((f"expects {want}, host has {hw.gpu_count}", ok))
    if model and hw.gpu_model is not None:
        found.append(
            (f"expects {model} GPUs, host has {hw.gpu_model}", model_matches(str(model), hw.gpu_model))
        )
    if nvlink is not None and hw.nvlink_all_pairs is not None:
        state = "NVLink on every GPU pair" if hw.nvlink_all_pairs else "a GPU pair without NVLink"
        if hw.gpu_count == 1:
            state = "one GPU, no pair"
        found.append(
            (
                f"expects NVLink {'on every pair' if nvlink else 'absent'}, host has {state}",
                bool(nvlink) == hw.nvlink_all_pairs,
            )
        )
    return found


def _fabric_expectations(expected: Mapping[str, Any], hw: Hardware) -> list[tuple[str, bool | None]]:
    if hw.fabrics is None:
        return []
    count, rate = expected.get("expected_hca_count"), expected.get("expected_link_rate_gbps")
    kind = normalise_kind(expected.get("expected_link_layer"))
    if count is None:
        return []
    if count == 0:
        total = sum(f.active for f in hw.fabrics)
        return [(f"expects no RDMA fabric, host has {total} Active RDMA ports", total == 0)]
    fabric = hw.fabric(kind) if kind else (hw.fabrics[0] if hw.fabrics else None)
    label = describe_kind(kind) if kind else "RDMA"
    active = fabric.active if fabric else 0
    found: list[tuple[str, bool | None]] = [
        (f"expects {count} {label} ports Active, host has {active}", active == count)
    ]
    if rate and fabric and fabric.rate_gbps is not None:
        found.append(
            (
                f"expects {rate:g} Gb/s ports, host's slowest is {fabric.rate_gbps:g}",
                fabric.rate_gbps >= float(rate),
            )
        )
    return found


def match(profile: Profile, hw: Hardware) -> Match:
    """How well ``profile``'s expected values describe ``hw``: each set expectation the facts can answer."""
    judged = _gpu_expectations(profile.vars, hw) + _fabric_expectations(profile.vars, hw)
    return Match(
        profile.name,
        tuple(text for text, ok in judged if ok),
        tuple(text for text, ok in judged if ok is False),
    )


def best_match(profiles: Sequence[Profile], hw: Hardware) -> Match | None:
    """The profile that fits with the most confirmed expectations, else the closest one (fewest
    contradictions); ties go to the first name. None without profiles.

    A profile none of whose expectations the host's facts answer (one that leaves the fabric to the fleet,
    against a host that reported only its fabric) says nothing about the host: it is no candidate while
    any profile says something, else it would "fit" every host it cannot judge."""
    every = [match(p, hw) for p in sorted(profiles, key=lambda p: p.name)]
    matches = [m for m in every if m.agrees or m.differs] or every
    if not matches:
        return None
    return min(matches, key=lambda m: (len(m.differs), -len(m.agrees)))


#: Hardware groups the one line names; the rest are counted (a fleet with odd hosts can have many).
SHOWN_GROUPS = 4


def suggest(hardware: Mapping[str, Hardware | None], profiles: Sequence[Profile]) -> dict[str, Any] | None:
    """``run.profile_suggestion`` for the hosts without a profile: one group per distinct hardware, with the
    profile that fits it (or the closest and how it differs), and one line of ``text`` for people.
    None when no host reported anything to match."""
    groups: dict[Hardware, list[str]] = {}
    for name, hw in hardware.items():
        if hw is not None:
            groups.setdefault(hw, []).append(name)
    entries, phrases = [], []
    for hw, names in sorted(groups.items(), key=lambda item: -len(item[1])):
        best = best_match(profiles, hw)
        if best is None:
            continue
        fits = best.fits and bool(best.agrees)
        entries.append(
            {
                "hosts": names,
                "hardware": hw.describe(),
                "profile": best.profile if fits else None,
                "closest": best.profile,
                "differs": list(best.differs),
            }
        )
        who = f"{summarize(names, 120)}: " if len(groups) > 1 else ""
        if fits:
            phrases.append(f"{who}{best.profile} ({hw.describe()})")
        else:
            phrases.append(
                f"{who}no packaged profile fits {hw.describe()}; closest {best.profile} "
                f"({'; '.join(best.differs)}): copy it under a new name and adjust"
            )
    if not entries:
        return None
    if len(phrases) > SHOWN_GROUPS:
        phrases[SHOWN_GROUPS:] = [
            f"{len(phrases) - SHOWN_GROUPS} more hardware groups in run.profile_suggestion"
        ]
    # One profile fits every group that any fits: name the option. The hosts that fit none are named above
    # with what differs, which is what that profile's checks will then report on them.
    chosen = {e["profile"] for e in entries if e["profile"]}
    how = f"; -e {PROFILE_VARIABLE}={next(iter(chosen))}" if len(chosen) == 1 else ""
    return {"text": "suggested profile: " + "; ".join(phrases) + how, "groups": entries}
