"""ib.link_rate — every Active fabric port runs at the profile's rate (NDR 400, HDR 200 Gb/s, …).

A port that trained down (an NDR port at 200 because of a bad cable or a split-mode mistake) is Active and
passes every connectivity test, yet halves the node's bandwidth; only the rate tells. Ports that are not
Active report a meaningless rate (``Rate: 40`` on a Down port) and are left to ``ib.port_state``. Ports of
HCAs that are no compute rail (``expected_compute_hca_types``, ``expected_compute_hcas``) are not judged
either: an HGX B300's NVLink-switch management ConnectX-7s run at 100 Gb/s by design, and an XDR profile's
800 would fail them while saying nothing of the rails.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from diagnose.config.profiles import no_fabric_reason
from diagnose.core.check import Check, Command, Facts
from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.vars import Vars
from diagnose.parsers.ibstat import parse_ibstat
from diagnose.parsers.rdma import (
    describe_kind,
    is_active,
    normalise_kind,
    port_name,
    profile_rails,
    set_aside,
)


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    return outputs["ibstat"].parsed(parse_ibstat)


def rate_summary(ports: list[dict]) -> str:
    """``8x 400 Gb/s`` or ``7x 400, 1x 200 Gb/s``: the shape of a host's links at a glance."""
    counts = Counter(p.get("rate") for p in ports)
    return (
        ", ".join(f"{n}x {rate}" for rate, n in sorted(counts.items(), key=lambda kv: -(kv[0] or 0)))
        + " Gb/s"
    )


def judge(facts: Facts, host_vars: Vars) -> Outcome:
    host = host_vars.host or "this host"
    kind = normalise_kind(host_vars.str("expected_link_layer"))
    label = describe_kind(kind) if kind else "RDMA"
    minimum = host_vars.float("expected_link_rate_gbps")
    rails, others = profile_rails(facts["ports"], kind, host_vars)
    active = [p for p in rails if is_active(p)]
    aside = set_aside(others)
    observed = rate_summary(active) if active else "no Active port"
    wanted = f">= {minimum:g} Gb/s on every Active {label} port" if minimum else "any rate"
    reason = no_fabric_reason(host_vars)
    if reason:
        return Outcome("SKIP", f"link rate not judged on {host}: {reason}", observed, wanted)
    if not active:
        return Outcome(
            "FAIL",
            f"no Active compute {label} port on {host} carries a rate to judge (see ib.port_state){aside}",
            observed,
            wanted,
        )
    if minimum is None:
        return Outcome(
            "PASS",
            f"{label} ports on {host} run at {rate_summary(active)} (no expected_link_rate_gbps){aside}",
            observed,
            wanted,
        )
    slow = [p for p in active if (p.get("rate") or 0) < minimum]
    if slow:
        listed = ", ".join(f"{port_name(p)} at {p.get('rate')} Gb/s" for p in slow)
        return Outcome(
            "FAIL",
            f"{len(slow)} {label} ports on {host} below {minimum:g} Gb/s: {listed}{aside}",
            observed,
            wanted,
            remediation="A port trained below its rated speed: check the cable/transceiver type and seating, "
            "the switch port's speed setting and split mode, and `mlxlink -d <dev> -p 1` for the negotiated "
            "width and speed.",
        )
    return Outcome(
        "PASS",
        f"all {len(active)} Active {label} ports on {host} at {rate_summary(active)}{aside}",
        observed,
        wanted,
    )


CHECK = Check(
    id="ib.link_rate",
    checklist="1",
    summary="ibstat rate >= the expected Gb/s on every Active fabric port",
    commands=(Command("ibstat", "ibstat", tool="ibstat", timeout=15),),
    parse=parse,
    judge=judge,
    remediation="Bring every fabric port to its rated speed (cable, transceiver, switch port configuration).",
    no_hardware=no_fabric_reason,
    folded_under="ib.devices",
    action="reseat_or_replace_cable",
)
