"""ib.mtu — the active MTU NCCL's verbs transport uses is the profile's on every Active fabric port.

``ibv_devinfo``'s ``active_mtu`` is the path MTU libibverbs negotiates: 4096 on a healthy InfiniBand fabric;
on RoCE it follows the Ethernet interface (an interface left at MTU 1500 gives 1024). A smaller MTU costs
bandwidth on every message, and a mismatch between hosts is caught cluster-wide by ``ib.consistency``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from diagnose.config.profiles import no_fabric_reason
from diagnose.core.check import Check, Command, Facts
from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.vars import Vars
from diagnose.parsers.ibv_devinfo import parse_ibv_devinfo
from diagnose.parsers.rdma import describe_kind, is_active, normalise_kind, port_name, profile_rails


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    return outputs["ibv_devinfo"].parsed(parse_ibv_devinfo)


def mtu_summary(ports: list[dict]) -> str:
    counts = Counter(p.get("active_mtu") for p in ports)
    return ", ".join(f"{n}x {mtu}" for mtu, n in sorted(counts.items(), key=lambda kv: -(kv[0] or 0)))


def judge(facts: Facts, host_vars: Vars) -> Outcome:
    host = host_vars.host or "this host"
    kind = normalise_kind(host_vars.str("expected_link_layer"))
    label = describe_kind(kind) if kind else "RDMA"
    expected = host_vars.int("expected_mtu")
    rails, _ = profile_rails(facts["ports"], kind, host_vars)
    active = [p for p in rails if is_active(p)]
    observed = f"active_mtu {mtu_summary(active)}" if active else "no Active port"
    wanted = f"active_mtu {expected} on every Active {label} port" if expected else "any MTU"
    reason = no_fabric_reason(host_vars)
    if reason:
        return Outcome("SKIP", f"MTU not judged on {host}: {reason}", observed, wanted)
    if not active:
        return Outcome("FAIL", f"ibv_devinfo shows no Active {label} port on {host}", observed, wanted)
    if expected is None:
        return Outcome("PASS", f"{label} ports on {host}: {observed} (no expected_mtu)", observed, wanted)
    wrong = [p for p in active if p.get("active_mtu") != expected]
    if wrong:
        if len(wrong) == len(active) and len({p.get("active_mtu") for p in wrong}) == 1:
            listed = f"all {len(active)} {label} ports at {wrong[0].get('active_mtu')}"
        else:
            listed = ", ".join(f"{port_name(p)} {p.get('active_mtu')}" for p in wrong)
        return Outcome(
            "FAIL",
            f"active MTU differs from {expected} on {host}: {listed}",
            observed,
            wanted,
            remediation="InfiniBand: set the partition MTU on the subnet manager (opensm partitions.conf "
            "mtu=5 for 4096). RoCE: raise the Ethernet interface MTU (ip link set <if> mtu 9000) on hosts and "
            "switches alike.",
        )
    return Outcome(
        "PASS", f"active_mtu {expected} on all {len(active)} {label} ports of {host}", observed, wanted
    )


CHECK = Check(
    id="ib.mtu",
    checklist="1",
    summary="ibv_devinfo active_mtu as expected on every Active fabric port",
    commands=(Command("ibv_devinfo", "ibv_devinfo", tool="ibv_devinfo", timeout=15),),
    parse=parse,
    judge=judge,
    remediation="Make the active MTU the profile's on every port (subnet manager partition MTU on "
    "InfiniBand, interface MTU on RoCE).",
    no_hardware=no_fabric_reason,
    folded_under="ib.devices",
    action="check_config",
)
