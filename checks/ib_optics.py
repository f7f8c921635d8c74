"""ib.optics — every ConnectX port's bit error rate after FEC is low and its transceiver is not running hot.

Marginal optics show in the bit error rate long before the link flaps. ``mlxlink -m -c -e`` (see
:mod:`diagnose.parsers.mlxlink`) gives, per port, the raw BER (before FEC corrects), the effective BER (after
FEC: what the link really delivers), the FEC mode in use and the module's temperature with its alarm range.

* effective BER above ``max_effective_ber`` (default 1e-12, the usual acceptance figure for HDR/NDR links):
  FAIL. FEC no longer hides the errors; NCCL sees retransmissions and, at worst, the link drops.
* module temperature within ``optics_temp_margin_c`` (default 5 °C) of the module's own high alarm: WARN; at
  or over it: FAIL (transceivers shut down or degrade there).
* the firmware's own troubleshooting recommendation other than "No issue was observed" (``Bad signal
  integrity``): WARN naming it.

Raw BER and FEC are shown, not judged: with FEC a raw BER around 1e-8 is normal on NDR. A host without
mlxlink is a SKIP naming the package (``mstflint``, or NVIDIA MFT), never an ERROR; mlxlink needs root, so a
device it cannot open is an ERROR that says so. Passive copper cables have no temperature sensor.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from diagnose.config.profiles import no_fabric_reason
from diagnose.core.check import Check, Command, Facts
from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.vars import Vars
from diagnose.parsers.mlxlink import MLXLINK_SCRIPT, parse_mlxlink

DEFAULT_MAX_EFFECTIVE_BER = 1e-12
DEFAULT_TEMP_MARGIN_C = 5.0
HEALTHY_ADVICE = "No issue was observed"

INSTALL = (
    "Install mlxlink to judge the optics: the `mstflint` package (apt/dnf install mstflint), or NVIDIA's "
    "Firmware Tools (MFT, which ships mlxlink as part of the MLNX_OFED/DOCA host packages); it needs root."
)
REMEDIATION = (
    "High effective BER or a hot module on a port: clean and reseat the cable, swap the transceiver or cable, "
    "check the switch-side port and the node's airflow over the cages, then clear the counters "
    "(`mlxlink -d <dev> --pc`) and check again. `mlxlink -d <dev> -m -c -e` shows the module, BER and eye."
)


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    return parse_mlxlink(outputs["mlxlink"].stdout)


def _name(port: dict[str, Any]) -> str:
    return f"{port['device'] or 'port'}/{port['port'] or 1}"


def _port_findings(port: dict[str, Any], max_ber: float, margin: float) -> tuple[list[str], list[str]]:
    """(failures, warnings) of one port."""
    fails: list[str] = []
    warns: list[str] = []
    name = _name(port)
    effective = port["ber"].get("effective")
    if effective is not None and effective > max_ber:
        fec = f", FEC {port['fec']}" if port["fec"] else ""
        fails.append(
            f"{name} effective BER {port['ber']['effective_text']} > {max_ber:g} "
            f"(raw {port['ber'].get('raw_text') or 'n/a'}{fec})"
        )
    temperature = (port["module"] or {}).get("temperature")
    if temperature:
        value, high = temperature["value"], temperature["high"]
        text = f"{name} module at {value:g} C (alarm at {high:g} C)"
        if value >= high:
            fails.append(text)
        elif value >= high - margin:
            warns.append(text)
    advice = port["recommendation"]
    if advice and advice != HEALTHY_ADVICE:
        warns.append(f"{name}: mlxlink recommends: {advice}")
    return fails, warns


def _summary(port: dict[str, Any]) -> dict[str, Any]:
    module = port["module"] or {}
    temperature = module.get("temperature")
    return {
        "state": port["state"],
        "speed": port["speed"],
        "fec": port["fec"],
        "effective_ber": port["ber"].get("effective_text"),
        "raw_ber": port["ber"].get("raw_text"),
        "module": " ".join(x for x in (module.get("vendor"), module.get("part_number")) if x) or None,
        "temperature_c": temperature["value"] if temperature else None,
        "temperature_alarm_c": temperature["high"] if temperature else None,
        "recommendation": port["recommendation"],
    }


def judge(facts: Facts, host_vars: Vars) -> Outcome:
    host = host_vars.host or "this host"
    reason = no_fabric_reason(host_vars)
    if reason:
        return Outcome("SKIP", f"optics not judged on {host}: {reason}", None, "an RDMA fabric")
    if facts["missing"]:
        return Outcome(
            "SKIP",
            f"mlxlink is not installed on {host}, so BER and module temperature are not judged",
            None,
            "mlxlink (mstflint or MFT)",
            remediation=INSTALL,
        )
    if not facts["ports"]:
        return Outcome("SKIP", f"no ConnectX (mlx5) device on {host} for mlxlink to read", None, "mlx5 ports")
    max_ber = host_vars.float("max_effective_ber", DEFAULT_MAX_EFFECTIVE_BER) or DEFAULT_MAX_EFFECTIVE_BER
    margin = host_vars.float("optics_temp_margin_c", DEFAULT_TEMP_MARGIN_C)
    margin = DEFAULT_TEMP_MARGIN_C if margin is None else margin
    wanted = f"effective BER <= {max_ber:g}; module temperature more than {margin:g} C under its alarm"
    unread = [p for p in facts["ports"] if not p["state"] and (p["errors"] or p["rc"])]
    read = [p for p in facts["ports"] if p not in unread]
    observed = {_name(p): _summary(p) for p in read}
    if unread and not read:
        said = "; ".join(
            f"{_name(p)}: {p['errors'][0] if p['errors'] else 'exit ' + str(p['rc'])}" for p in unread
        )
        return Outcome(
            "ERROR",
            f"mlxlink could not read any port on {host} ({said})",
            {_name(p): p["errors"] for p in unread},
            wanted,
            remediation="mlxlink needs root (or the mst driver): run diagnose as root on this host.",
        )
    fails: list[str] = []
    warns: list[str] = [
        f"{_name(p)} not read ({p['errors'][0] if p['errors'] else 'exit ' + str(p['rc'])})" for p in unread
    ]
    for port in read:
        port_fails, port_warns = _port_findings(port, max_ber, margin)
        fails += port_fails
        warns += port_warns
    if fails or warns:
        return Outcome(
            "FAIL" if fails else "WARN",
            f"{host}: " + "; ".join(fails + warns),
            observed,
            wanted,
            remediation=REMEDIATION,
        )
    worst = max(read, key=lambda p: p["ber"].get("effective") or 0.0)
    hottest = [t for p in read if (t := ((p["module"] or {}).get("temperature")))]
    heat = (
        f", modules up to {max(t['value'] for t in hottest):g} C"
        if hottest
        else ", no module temperature sensor"
    )
    return Outcome(
        "PASS",
        f"{host}: {len(read)} ports, highest effective BER {worst['ber'].get('effective_text') or 'not reported'}"
        f"{heat}",
        observed,
        wanted,
    )


CHECK = Check(
    id="ib.optics",
    checklist="H",
    summary="mlxlink per ConnectX port: effective BER <= max_effective_ber, module temperature under its alarm",
    commands=(Command("mlxlink", MLXLINK_SCRIPT, tool="mlxlink", timeout=40),),
    parse=parse,
    judge=judge,
    remediation=REMEDIATION,
    folded_under="ib.devices",
    action="reseat_or_replace_cable",
)
