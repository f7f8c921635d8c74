"""ib.flaps — no fabric link went down and up between runs, and no port's error counters climb too fast.

A link that flaps breaks every queue pair on it: NCCL aborts or hangs, and the job restarts. Flaps between
runs never show in a benchmark window, so this check is passive: it reads what the host recorded.

* The kernel log (the one ``KERNEL_LOG`` read gpu.xid and gpu.sxid share): mlx5_core logs each carrier
  change of a ConnectX Ethernet/RoCE port (``mlx5_core 0000:01:00.0 enp1s0f0np0: Link down``) and what the
  port's cage reports (``Port module event[error]: module 0, Cable error, High Temperature``); since Linux
  6.15 the IB core also logs every state change of any RDMA port, InfiniBand ones included
  (``mlx5_core 0000:08:00.0 mlx5_0: Port: 1 Link DOWN``, INIT, ARMED, ACTIVE likewise). Each netdev
  ``Link down`` and each IB core ``Link DOWN`` is one link down of that port; a RoCE port's two lines for
  one change count once (``_link_downs``). The PCI function is named by its RDMA device
  (``HCA_PCI_SCRIPT``). Events count within ``flap_window_h`` hours
  (default 24) and, in a nightly run, only since the previous run of the series (``flap_since``, which the
  nightly sets from the history), so each flap is reported once.
* The port counters between runs: on kernels before 6.15 InfiniBand ports' flaps are not logged, they show
  only in ``link_downed``. The nightly hands the previous run's counters (``ib_counters_before``: its time and
  ib.counters' values per port) and the check turns the change into a rate: link_downed growth counts as
  flaps of that HCA, symbol errors faster than ``ib_symbol_errors_max_per_h`` (default 120 per hour) FAIL.

One flap (or one module error) is a WARN: a cable reseated, a switch rebooted. ``max_link_flaps`` (default 3)
on one HCA is a FAIL: a link that keeps dropping.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from diagnose.checks.gpu_xid import unreadable_log
from diagnose.config.profiles import no_fabric_reason
from diagnose.core.check import Check, Command, Facts
from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.vars import Vars
from diagnose.parsers.ib_counters import IB_COUNTERS_SCRIPT, SATURATION, parse_ib_counters
from diagnose.parsers.kernel_log import KERNEL_LOG
from diagnose.parsers.link_events import HCA_PCI_SCRIPT, parse_hca_pci, parse_link_events

DEFAULT_WINDOW_H = 24.0
DEFAULT_MAX_FLAPS = 3
DEFAULT_SYMBOL_ERRORS_PER_H = 120.0

REMEDIATION = (
    "A link that went down and up: find the port (`ibdev2netdev`, `mlxlink -d <dev> -m -c` for the cable's "
    "BER and temperature, see ib.optics), reseat or replace the cable or transceiver, and look at the switch "
    "side (its logs, UFM or `ibdiagnet`). A port whose symbol errors climb between runs has a marginal cable "
    "or transceiver: replace it before it flaps."
)


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    facts = parse_link_events(outputs["kernel_log"].stdout)
    mapping = outputs.get("hca_pci")
    facts["hca_pci"] = parse_hca_pci(mapping.stdout) if mapping is not None else {}
    counters = outputs.get("ib_counters")
    complete = counters is not None and counters.error is None and not counters.timed_out
    facts["ports"] = parse_ib_counters(counters.stdout)["ports"] if complete else []
    return facts


def _epoch(text: str) -> float:
    moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    return (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).timestamp()


def window(facts: Facts, host_vars: Vars) -> tuple[float | None, str]:
    """The Unix time events count from, and how the message names the window: the later of
    ``flap_window_h`` hours ago and ``flap_since`` (None: no clock to place the window, everything counts)."""
    hours = host_vars.float("flap_window_h", DEFAULT_WINDOW_H) or DEFAULT_WINDOW_H
    clock = facts.get("clock")
    start = clock["now"] - hours * 3600 if clock else None
    name = f"in the last {hours:g} h"
    since = host_vars.str("flap_since")
    if since and (start is None or _epoch(since) > start):
        start = _epoch(since)
        name = f"since the previous run ({datetime.fromtimestamp(start, timezone.utc):%Y-%m-%dT%H:%M:%SZ})"
    return start, name


def _hca(event: dict[str, Any], names: dict[str, str]) -> str:
    """``mlx5_bond_0 (0000:01:00.0 enp1s0f0np0)``: the RDMA device where known, and what the log said."""
    said = " ".join(x for x in (event.get("pci"), event.get("netdev")) if x)
    device = names.get(event.get("pci") or "")
    return f"{device} ({said})" if device and said else device or said or "an mlx5 port"


Port = tuple[str, int, str | None]


def _link_downs(events: list[dict[str, Any]], names: dict[str, str]) -> dict[str, int]:
    """Link downs per HCA port in these events.

    A netdev's ``Link down`` is one; so is an IB core ``Link DOWN``: the IB core prints a port's state only
    when it changes, so each DOWN is the port leaving INIT, ARMED or ACTIVE, whether it comes back or not
    (counting DOWN lines rather than DOWN-to-ACTIVE cycles keeps a port that went down and stayed down in
    the count). On a RoCE port of a 6.15+ kernel one change is logged by both, so where a PCI function
    shows IB core lines for one port, its netdev's downs are that port's, and the port counts the larger
    of the two tallies, never their sum (the netdev can log a down the IB core skips: a port already DOWN).
    """
    ports_on: dict[str, set[Port]] = {}
    port_downs: dict[Port, int] = {}
    netdev_downs: dict[str, int] = {}
    netdev_of: dict[str, dict[str, Any]] = {}
    for event in events:
        if event["kind"] == "port":
            port: Port = (event["device"], event["port"], event.get("pci"))
            if event.get("pci"):
                ports_on.setdefault(event["pci"], set()).add(port)
            if event["state"] == "DOWN":
                port_downs[port] = port_downs.get(port, 0) + 1
        elif event["kind"] == "link" and event["state"] == "down":
            key = event.get("pci") or _hca(event, names)
            netdev_downs[key] = netdev_downs.get(key, 0) + 1
            netdev_of[key] = event
    downs: dict[str, int] = {}
    netdev_on: dict[Port, str] = {}
    for key, n in netdev_downs.items():
        ports = ports_on.get(key, set())
        if len(ports) == 1:
            (port,) = ports
            port_downs[port] = max(port_downs.get(port, 0), n)
            netdev_on[port] = netdev_of[key].get("netdev") or ""
        else:
            downs[_hca(netdev_of[key], names)] = n
    for (device, number, pci), n in port_downs.items():
        said = " ".join(x for x in (pci, netdev_on.get((device, number, pci))) if x)
        downs[f"{device} port {number}" + (f" ({said})" if said else "")] = n
    return downs


def _log_findings(
    facts: Facts, start: float | None
) -> tuple[dict[str, int], list[str], list[dict[str, Any]], int]:
    """(link downs per HCA port, module error texts, events in the window, events outside it)."""
    modules: list[str] = []
    inside: list[dict[str, Any]] = []
    outside = 0
    for event in facts["events"]:
        if start is not None and event.get("epoch") is not None and event["epoch"] < start:
            outside += 1
            continue
        inside.append(event)
        if event["kind"] == "module" and (
            event.get("level") == "error" or "error" in event["status"].lower()
        ):
            modules.append(f"{_hca(event, facts['hca_pci'])}: module {event['module']} {event['status']}")
    return _link_downs(inside, facts["hca_pci"]), modules, inside, outside


def _counter_growth(
    facts: Facts, host_vars: Vars
) -> tuple[dict[str, int], list[str], list[str], dict[str, Any]]:
    """From the previous run's counters (``ib_counters_before``): (link_downed growth per HCA, FAIL texts,
    notes, the rates observed)."""
    before = host_vars.get("ib_counters_before")
    clock = facts.get("clock")
    if not isinstance(before, Mapping) or not before.get("ports") or not before.get("at") or not clock:
        return {}, [], [], {}
    hours = (clock["now"] - _epoch(str(before["at"]))) / 3600
    if hours <= 0:
        return {}, [], [], {}
    limit = (
        host_vars.float("ib_symbol_errors_max_per_h", DEFAULT_SYMBOL_ERRORS_PER_H)
        or DEFAULT_SYMBOL_ERRORS_PER_H
    )
    downs: dict[str, int] = {}
    fails: list[str] = []
    notes: list[str] = []
    rates: dict[str, Any] = {}
    for port in facts["ports"]:
        name = f"{port['device']} port {port['port']}"
        old = before["ports"].get(name)
        if not isinstance(old, Mapping):
            continue
        now = port["counters"]
        if any(now.get(c, 0) < old.get(c, 0) for c in ("symbol_error", "link_downed") if c in old):
            notes.append(f"{name}: counters cleared since the previous run (reboot or perfquery -R)")
            continue
        symbols = now.get("symbol_error", 0) - old.get("symbol_error", 0)
        downed = now.get("link_downed", 0) - old.get("link_downed", 0)
        rates[name] = {"hours": round(hours, 2), "symbol_error": symbols, "link_downed": downed}
        if downed > 0:
            downs[port["device"]] = downs.get(port["device"], 0) + downed
        if symbols / hours > limit:
            fails.append(
                f"{name}: symbol errors +{symbols} in {hours:.1f} h ({symbols / hours:.0f}/h > {limit:g}/h)"
            )
        saturated = [c for c in ("symbol_error", "link_downed") if now.get(c, 0) >= SATURATION[c]]
        if saturated:
            notes.append(f"{name}: {', '.join(saturated)} saturated, growth not visible")
    return downs, fails, notes, rates


def judge(facts: Facts, host_vars: Vars) -> Outcome:
    host = host_vars.host or "this host"
    reason = no_fabric_reason(host_vars)
    if reason:
        return Outcome("SKIP", f"link flaps not judged on {host}: {reason}", None, "an RDMA fabric")
    unreadable = unreadable_log(facts, host, "link flaps")
    if unreadable is not None:
        return unreadable
    try:
        start, named = window(facts, host_vars)
    except ValueError as exc:
        return Outcome("ERROR", f"flap window on {host}: {exc}", None, "flap_since as an ISO-8601 time")
    limit = host_vars.int("max_link_flaps", DEFAULT_MAX_FLAPS) or DEFAULT_MAX_FLAPS
    downs, modules, inside, outside = _log_findings(facts, start)
    counted, growth_fails, notes, rates = _counter_growth(facts, host_vars)
    for device, n in counted.items():
        downs[f"{device} (link_downed)"] = n
    observed = {
        "source": facts["source"],
        "window": named,
        "link_downs": downs,
        "module_errors": modules,
        "events": inside,
        "outside_window": outside,
        "counter_rates": rates,
    }
    wanted = f"no link down {named}; fewer than {limit} per HCA; symbol errors within the per-hour limit"
    flaps = [f"{name}: {n} link down{'s' if n > 1 else ''}" for name, n in sorted(downs.items())]
    tail = "".join(f"; {n}" for n in notes) + (
        f"; {outside} older {'event' if outside == 1 else 'events'} outside the window" if outside else ""
    )
    if any(n >= limit for n in downs.values()) or growth_fails:
        worst = "FAIL"
    elif downs or modules:
        worst = "WARN"
    else:
        return Outcome(
            "PASS",
            f"no RDMA link down or module error in the kernel log of {host} {named} ({facts['source']}){tail}",
            observed,
            wanted,
        )
    return Outcome(
        worst,
        f"{host} {named}: " + "; ".join(flaps + modules + growth_fails) + tail,
        observed,
        wanted,
        remediation=REMEDIATION,
    )


CHECK = Check(
    id="ib.flaps",
    checklist="H",
    summary="no fabric link down/up (mlx5 and IB core kernel events, link_downed growth) since the last run "
    "or within flap_window_h; symbol errors per hour between runs",
    commands=(
        KERNEL_LOG,
        Command("hca_pci", HCA_PCI_SCRIPT, timeout=10, required=False, auxiliary=True),
        Command("ib_counters", IB_COUNTERS_SCRIPT, timeout=10, required=False, auxiliary=True),
    ),
    parse=parse,
    judge=judge,
    remediation=REMEDIATION,
    folded_under="ib.devices",
    action="reseat_or_replace_cable",
)
