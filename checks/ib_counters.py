"""ib.counters — no fabric port flapped or counted link errors during the run.

The IBTA port counters in ``/sys/class/infiniband/<dev>/ports/<port>/counters/`` count since they were last
cleared (a reboot, or ``perfquery -R``), so one snapshot only says that something happened at some time:
``judge`` WARNs on non-zero link-level counters and keeps every absolute value in ``observed``.
``judge_delta`` compares the snapshots taken before and after the benchmarks, which is where a bad cable
shows: the benchmarks push the links at line rate for minutes.

Thresholds for the change during the run, per port:

* link_downed > 0: FAIL. The port lost its link (a flap): every queue pair on it broke, NCCL aborts or
  hangs.
* link_error_recovery > 0, local_link_integrity_errors > 0: FAIL. A recovery is the PHY retraining the link
  (traffic stops meanwhile); a local link integrity error is itself already a threshold crossing of raw
  physical errors. Neither happens on a healthy link under load.
* symbol_error >= ``ib_symbol_error_max_delta`` (default 10): FAIL; fewer: WARN. HDR/NDR links run with
  FEC and a specified bit-error rate, so an isolated symbol error in minutes of line-rate traffic is
  within spec; tens of them point at a marginal cable or transceiver that will get worse.
* port_rcv_errors, port_rcv_remote_physical_errors, excessive_buffer_overrun_errors, port_xmit_discards:
  WARN. Bad packets received (usually after symbol errors on this or the peer's link) and packets dropped
  for congestion or flow-control trouble: they cost retransmissions, not correctness.

Only Active ports of the profile's link layer are judged (an Ethernet management port or a Down port is
listed, not judged: ib.port_state judges state). Saturated counters (see the parser) cannot show growth and
are named as such.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from diagnose.config.profiles import no_fabric_reason
from diagnose.core.check import Check, Command, Facts
from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.vars import Vars
from diagnose.parsers.ib_counters import IB_COUNTERS_SCRIPT, SATURATION, parse_ib_counters
from diagnose.parsers.rdma import hca_model, is_rail, rail_rule

DEFAULT_SYMBOL_ERROR_MAX_DELTA = 10
LINK_LEVEL = ("link_downed", "link_error_recovery", "local_link_integrity_errors", "symbol_error")
FAIL_ON_ANY = ("link_downed", "link_error_recovery", "local_link_integrity_errors")
WARN_ON_ANY = (
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "excessive_buffer_overrun_errors",
    "port_xmit_discards",
)

REMEDIATION = (
    "Link errors on a port: check the cable and transceiver of that port (`mlxlink -d <dev> -m -c` shows the "
    "BER and module state), reseat or replace the cable, look at the switch side of the link (UFM or "
    "`ibdiagnet`), then clear the counters (`perfquery -x -R` or a reboot) and rerun. Drops and receive "
    "errors without link errors point at congestion or at the peer's link."
)


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    return parse_ib_counters(outputs["ib_counters"].stdout)


def _name(port: dict[str, Any]) -> str:
    return f"{port['device']} port {port['port']}"


def fabric_ports(facts: Facts, host_vars: Vars) -> tuple[list[dict[str, Any]], list[str]]:
    """The ports judged (Active compute rails of the expected link layer) and a note for each one left out.

    An HGX B300's four NVLink-switch management ConnectX-7s are InfiniBand and Active beside its ConnectX-8
    rails: their counters are not the compute fabric's (``expected_compute_hca_types``)."""
    layer = (host_vars.str("expected_link_layer") or "").lower()
    types, patterns = rail_rule(
        host_vars.list("expected_compute_hca_types"), host_vars.list("expected_compute_hcas")
    )
    judged, skipped = [], []
    for port in facts["ports"]:
        port_layer = (port["link_layer"] or "").lower()
        if layer in ("infiniband", "ethernet") and port_layer and port_layer != layer:
            skipped.append(f"{_name(port)} ({port['link_layer']}, not judged)")
        elif not is_rail(port, types, patterns):
            kind = hca_model(port["ca_type"]) if port.get("ca_type") else "not in expected_compute_hcas"
            skipped.append(f"{_name(port)} ({kind}, not a compute rail)")
        elif port["state"] != "ACTIVE":
            skipped.append(f"{_name(port)} ({port['state'] or 'state unknown'}, see ib.port_state)")
        else:
            judged.append(port)
    return judged, skipped


def _gate(facts: Facts, host_vars: Vars) -> Outcome | tuple[list[dict[str, Any]], list[str]]:
    host = host_vars.host or "this host"
    if not facts["ports"]:
        reason = no_fabric_reason(host_vars)
        tail = f"; {reason}" if reason else ""
        return Outcome("SKIP", f"no RDMA device on {host}; see ib.devices{tail}")
    judged, skipped = fabric_ports(facts, host_vars)
    if not judged:
        return Outcome(
            "SKIP",
            f"no Active fabric port on {host} to read counters from ({', '.join(skipped)}); see ib.port_state",
        )
    return judged, skipped


def _observed(ports: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    return {_name(p): dict(p["counters"]) for p in ports}


def _value_text(name: str, value: int) -> str:
    saturated = " (saturated)" if value >= SATURATION.get(name, 1 << 64) else ""
    return f"{name} {value}{saturated}"


def judge(facts: Facts, host_vars: Vars) -> Outcome:
    host = host_vars.host or "this host"
    gate = _gate(facts, host_vars)
    if isinstance(gate, Outcome):
        return gate
    judged, skipped = gate
    wanted = "no link-level error counted (absolute); no growth during the run (judged before/after)"
    observed = _observed(judged)
    findings = []
    for port in judged:
        counted = [_value_text(n, port["counters"][n]) for n in LINK_LEVEL if port["counters"].get(n)]
        if counted:
            findings.append(f"{_name(port)}: {', '.join(counted)}")
    left_out = f"; not judged: {', '.join(skipped)}" if skipped else ""
    if findings:
        return Outcome(
            "WARN",
            f"{host}: "
            + "; ".join(findings)
            + " since the counters were last cleared, not necessarily now"
            + left_out,
            observed,
            wanted,
            remediation=REMEDIATION,
        )
    return Outcome(
        "PASS",
        f"{host}: {len(judged)} fabric ports, no link-level error counted since the counters were last cleared"
        + left_out,
        observed,
        wanted,
    )


def judge_delta(before: Facts, after: Facts, host_vars: Vars) -> Outcome:
    host = host_vars.host or "this host"
    gate = _gate(after, host_vars)
    if isinstance(gate, Outcome):
        return gate
    judged, skipped = gate
    limit = host_vars.int("ib_symbol_error_max_delta", DEFAULT_SYMBOL_ERROR_MAX_DELTA) or 1
    old = {(p["device"], p["port"]): p for p in before.get("ports", [])}
    fails: list[str] = []
    warns: list[str] = []
    deltas: dict[str, dict[str, int]] = {}
    for port in judged:
        prior = old.get((port["device"], port["port"]))
        if prior is None:
            warns.append(f"{_name(port)}: not in the snapshot before the run, growth not judged")
            continue
        for name, value in port["counters"].items():
            if name not in prior["counters"]:
                continue
            change = value - prior["counters"][name]
            if change < 0:
                warns.append(f"{_name(port)}: {name} went backwards (counters cleared during the run)")
                continue
            if not change and prior["counters"][name] >= SATURATION.get(name, 1 << 64) and name in LINK_LEVEL:
                warns.append(f"{_name(port)}: {name} is saturated at {value} and cannot show growth")
                continue
            if not change:
                continue
            deltas.setdefault(_name(port), {})[name] = change
            text = f"{_name(port)}: {name} +{change} during the run"
            if name == "link_downed":
                fails.append(text + " (link flap)")
            elif name in FAIL_ON_ANY or (name == "symbol_error" and change >= limit):
                fails.append(text)
            else:
                warns.append(text)
    gone = [
        f"{d} port {p}"
        for (d, p) in old
        if not any((q["device"], q["port"]) == (d, p) for q in after["ports"])
    ]
    fails += [f"{name} disappeared during the run" for name in gone]
    observed = {"after": _observed(judged), "delta": deltas}
    wanted = f"no link_downed / link_error_recovery / local_link_integrity growth, < {limit} symbol errors per port"
    if fails:
        return Outcome(
            "FAIL", f"{host}: " + "; ".join(fails + warns), observed, wanted, remediation=REMEDIATION
        )
    if warns:
        return Outcome("WARN", f"{host}: " + "; ".join(warns), observed, wanted, remediation=REMEDIATION)
    left_out = f" (not judged: {', '.join(skipped)})" if skipped else ""
    return Outcome(
        "PASS",
        f"{host}: no error counter moved on {len(judged)} fabric ports during the run{left_out}",
        observed,
        wanted,
    )


CHECK = Check(
    id="ib.counters",
    checklist="H",
    summary="IB port error counters: no link flap or link errors during the run (before/after), absolute values",
    commands=(Command("ib_counters", IB_COUNTERS_SCRIPT, timeout=10),),
    parse=parse,
    judge=judge,
    remediation=REMEDIATION,
    judge_delta=judge_delta,
    folded_under="ib.devices",
    action="reseat_or_replace_cable",
)
