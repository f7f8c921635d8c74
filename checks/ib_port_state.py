"""ib.port_state — every expected fabric port is ``State: Active`` and ``Physical state: LinkUp``.

Only ports of the fabric the profile names count: the Ethernet management or storage ports most GPU nodes
also carry (a ConnectX-6 Dx pair, a bonded mlx5_bond_0) may be down without harming the fabric, and are
not reported as if they were fabric ports. Nor are InfiniBand ports of HCAs that are no compute rail
(``expected_compute_hca_types``, ``expected_compute_hcas``): an HGX B300's four ConnectX-7 NVLink-switch
management ports are Active while its ConnectX-8 rails may all be down, and must not stand in for them.
A port that is ``Down``/``Polling`` has no cable or no peer;
``Initializing`` with ``LinkUp`` means the cable is fine but no subnet manager has configured the port.
"""

from __future__ import annotations

from collections.abc import Mapping

from diagnose.config.profiles import no_fabric_reason, profile_label
from diagnose.core.check import Check, Command, Facts
from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.vars import Vars
from diagnose.parsers.ibstat import parse_ibstat
from diagnose.parsers.rdma import (
    NO_RAIL_REMEDIATION,
    describe_kind,
    hca_model,
    is_active,
    natural_key,
    normalise_kind,
    port_name,
    rail_ports,
    set_aside,
)


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    return outputs["ibstat"].parsed(parse_ibstat)


def _state(port: dict) -> str:
    return f"{port_name(port)} {port.get('state', '?')}/{port.get('physical_state', '?')}"


def _advice(ports: list[dict]) -> str:
    states = {(p.get("state"), p.get("physical_state")) for p in ports}
    if any(state == "Initializing" for state, _ in states):
        return (
            "A port in Initializing with LinkUp has a working cable but no subnet manager: check that "
            "opensm (or the UFM/switch SM) runs on this fabric and sees the port. "
        )
    return (
        "A port Down/Polling has no link: reseat or replace the cable/transceiver, check the switch port, "
        "and read `mlxlink -d <dev> -p 1` for the reason. "
    )


def _rails(types: list[str] | None) -> str:
    """``ConnectX-8 (MT4131)`` where the profile names the rails' CA types, else nothing to say."""
    return " or ".join(hca_model(t) for t in types) if types else "compute"


def judge(facts: Facts, host_vars: Vars) -> Outcome:
    host = host_vars.host or "this host"
    kind = normalise_kind(host_vars.str("expected_link_layer"))
    label = describe_kind(kind) if kind else "RDMA"
    expected = host_vars.int("expected_hca_count")
    types = host_vars.list("expected_compute_hca_types")
    ports, others = rail_ports(facts["ports"], kind, types, host_vars.list("expected_compute_hcas"))
    active = [p for p in ports if is_active(p)]
    inactive = [p for p in ports if not is_active(p)]
    aside = set_aside(others)
    observed = f"{len(active)} of {len(ports)} {label} ports Active"
    wanted = (
        f"{expected} {_rails(types) + ' ' if types else ''}{label} ports State Active, Physical state LinkUp"
        if expected
        else ("no RDMA fabric" if expected == 0 else "any RDMA ports")
    )
    panic = f"; ibstat stopped early: {facts['errors'][0]}" if facts["errors"] else ""
    reason = no_fabric_reason(host_vars)
    if reason:
        if not facts["ports"]:
            return Outcome("SKIP", f"ibstat lists no HCA on {host}; {reason}", observed, wanted)
        return Outcome(
            "SKIP", f"{len(facts['ports'])} RDMA ports on {host} not judged: {reason}", observed, wanted
        )
    if not facts["ports"]:
        return Outcome(
            "FAIL",
            f"ibstat lists no HCA on {host}{panic}; {profile_label(host_vars)} expects {expected} {label} ports",
            observed,
            wanted,
            action="check_config",  # no HCA at all: the driver stack, not every adapter at once
        )
    if not ports and others:
        return Outcome(
            "FAIL",
            f"no compute {label} port on {host}{aside}; {profile_label(host_vars)} expects {expected} "
            f"{_rails(types)} ports",
            observed,
            wanted,
            remediation=NO_RAIL_REMEDIATION,
            action="replace_hca",
        )
    if not ports:
        others = sorted({describe_kind(p["fabric"]) for p in facts["ports"]})
        return Outcome(
            "FAIL",
            f"no {label} port on {host}: its {len(facts['ports'])} RDMA ports are {', '.join(others)}",
            observed,
            wanted,
            remediation="Use the profile that matches the hardware (p5-efa for AWS EFA, an Ethernet/RoCE "
            "expectation for RoCE ports) or switch the HCA ports' link type with mlxconfig.",
            action="check_config",
        )
    listed = ", ".join(_state(p) for p in sorted(inactive, key=lambda p: natural_key(port_name(p))))
    if expected is not None and len(active) < expected:
        present = (
            f"; only {len(ports)} {_rails(types)} ports present" if len(ports) < expected and types else ""
        )
        return Outcome(
            "FAIL",
            f"{len(active)} of {expected} expected {label} ports Active on {host}; not Active: {listed}"
            f"{present}{panic}{aside}",
            observed,
            wanted,
            remediation=_advice(inactive)
            + "NCCL skips inactive ports, so the node runs with less bandwidth.",
            # every listed port is up, so the missing ones belong to an adapter that is not there at all
            action=None if inactive else "replace_hca",
        )
    if inactive or panic:
        extra = f"; also not Active: {listed}" if inactive else ""
        return Outcome(
            "WARN",
            f"{len(active)} {label} ports Active on {host} as expected{extra}{panic}{aside}",
            observed,
            wanted,
            remediation=_advice(inactive) if inactive else "Find out why ibstat fails on one device.",
        )
    return Outcome(
        "PASS", f"all {len(active)} {label} ports Active/LinkUp on {host}{aside}", observed, wanted
    )


CHECK = Check(
    id="ib.port_state",
    checklist="1",
    summary="ibstat: every expected fabric port State Active, Physical state LinkUp",
    commands=(Command("ibstat", "ibstat", tool="ibstat", timeout=15),),
    parse=parse,
    judge=judge,
    remediation="Bring every fabric port to Active/LinkUp: cable and switch port for Down/Polling, the "
    "subnet manager for Initializing/Armed.",
    no_hardware=no_fabric_reason,
    folded_under="ib.devices",
    action="reseat_or_replace_cable",
)
