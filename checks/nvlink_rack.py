"""nvlink.rack — the trays of each NVL72 rack form one NVLink domain: one clique, all registered, IMEX whole.

The per-tray checks (gpu.nvlink_domain, gpu.imex) see one tray. What only the rack shows:

* a rack split in two: trays registered, but in two cliques or two cluster UUIDs, so NCCL builds two
  NVLink domains where the job expects one (the minority trays are named; with no majority, every group);
* a fault of one tray versus a fault of the rack: a tray whose GPUs failed to register while its rack-mates
  registered is that tray's (its GPUs, its cables); every tray of the rack failing points at what they share,
  the NVSwitch trays and the fabric manager, and is reported once for the rack instead of tray by tray;
* an IMEX peer missing: a tray whose daemon is down, whose node its peers do not see READY and Connected, or
  whose address is absent from their node tables. Peers name it by address; the rule turns the address into
  the tray and rack through each tray's own addresses.

The rack is the host variable ``nvlink_rack`` where the inventory sets it, else the chassis serial the GPUs
report. Nothing here depends on a rack of 18 trays: a rack is however many trays report that rack.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from diagnose.checks.gpu_imex import own_node, running
from diagnose.checks.gpu_nvlink_domain import tray_of
from diagnose.core.check import ClusterCheck, Facts
from diagnose.core.consistency import split_hosts
from diagnose.core.model import Outcome
from diagnose.core.vars import Vars
from diagnose.parsers.nvlink_fabric import healthy, in_domain, registered, unconnected

WANTED = "every tray of a rack registered in one clique of one cluster UUID, every IMEX peer READY"
REMEDIATION = (
    "A named tray: reset its GPUs or reboot it and read the NVSwitch trays' fabric manager log for its GPUs; "
    "for IMEX, start nvidia-imex on it and check that every tray's nodes_config.cfg lists it. A whole rack: "
    "the NVSwitch trays, their NVLink subnet manager and fabric manager. A split rack: its NVLink partition "
    "configuration."
)


def _racks(
    facts: Mapping[str, Mapping[str, Facts]], host_vars: Mapping[str, Vars]
) -> dict[str, dict[str, dict[str, Any]]]:
    """rack -> host -> {tray, gpus, imex}: the hosts that are NVLink-domain trays, by rack."""
    racks: dict[str, dict[str, dict[str, Any]]] = {}
    for host, by_check in sorted(facts.items()):
        gpus = (by_check.get("gpu.nvlink_domain") or {}).get("gpus")
        vars_ = host_vars.get(host, Vars())
        if not gpus:
            continue
        if not vars_.int("expected_nvlink_domain_gpus") and not any(
            in_domain(g) or g.get("tray_index") is not None for g in gpus
        ):
            continue
        tray = tray_of(gpus)
        rack = vars_.str("nvlink_rack") or tray["chassis_serial"] or "unknown"
        index = tray["tray_index"]
        name = f"tray {index} ({host})" if index is not None else f"tray {host}"
        racks.setdefault(rack, {})[host] = {
            "name": f"{name} of rack {rack}",
            "gpus": gpus,
            "imex": by_check.get("gpu.imex"),
        }
    return racks


def _fabric(rack: str, trays: dict[str, dict[str, Any]]) -> list[Outcome]:
    failed = {
        host: [g for g in tray["gpus"] if not (registered(g) and healthy(g) and in_domain(g))]
        for host, tray in trays.items()
    }
    failed = {host: gpus for host, gpus in failed.items() if gpus}
    outcomes = []
    if failed and len(failed) == len(trays) and len(trays) > 1:
        return [
            Outcome(
                "FAIL",
                f"rack {rack}: the GPUs of all {len(trays)} trays failed to join the NVLink domain, so the fault "
                "is the rack's (NVSwitch trays, fabric manager), not one tray's",
                {trays[h]["name"]: _gpu_states(g) for h, g in failed.items()},
                WANTED,
            )
        ]
    for host, gpus in failed.items():
        others = len(trays) - len(failed)
        beside = (
            f"while {others} other tray{'s' if others != 1 else ''} of the rack registered"
            if others
            else "(the rack's only tray seen)"
        )
        outcomes.append(
            Outcome(
                "FAIL",
                f"{trays[host]['name']}: NVLink fabric registration failed ({_gpu_states(gpus)}) {beside}",
                _gpu_states(gpus),
                WANTED,
                host=host,
            )
        )
    domains = {
        host: " and ".join(
            sorted(
                {
                    f"clique {g['clique_id']} of cluster {g['cluster_uuid']}"
                    for g in tray["gpus"]
                    if in_domain(g)
                }
            )
        )
        for host, tray in trays.items()
        if host not in failed
    }
    split = split_hosts({h: d for h, d in domains.items() if d})
    if split is not None:
        groups = "; ".join(
            f"{', '.join(trays[h]['name'].split(' of rack')[0] for h in hosts)} in {value}"
            for value, hosts in sorted(split.groups.items())
        )
        for host, value in split.odd_hosts.items():
            norm = f"the other trays in {split.majority}" if split.majority else "no majority"
            outcomes.append(
                Outcome(
                    "FAIL",
                    f"{trays[host]['name']} is in {value}, {norm}: rack {rack} is split into "
                    f"{len(split.groups)} NVLink domains ({groups})",
                    value,
                    split.majority or "one clique for the whole rack",
                    host=host,
                )
            )
    return outcomes


def _gpu_states(gpus: list[dict[str, Any]]) -> str:
    return ", ".join(
        f"GPU {g['bus_id']} {g.get('state') or 'N/A'}/{g.get('status') or 'N/A'}"
        + ("" if healthy(g) else f" health {g.get('health')}")
        for g in gpus
    )


def _imex(rack: str, trays: dict[str, dict[str, Any]]) -> list[Outcome]:
    """The trays some peer cannot reach through IMEX, each named once with what showed it."""
    address_of = {}
    for host, tray in trays.items():
        for address in (tray["imex"] or {}).get("addresses", []):
            address_of[address] = host
    seen: dict[str, list[str]] = {}
    for host, tray in trays.items():
        imex = tray["imex"]
        if imex is None:
            continue
        if not running(imex):
            seen.setdefault(host, []).append("its IMEX daemon is not running")
        ctl = imex.get("ctl")
        if not ctl:
            continue
        listed = {n["address"] for n in ctl["nodes"]}
        bad = {n["address"] for n in ctl["nodes"] if n["state"] != "READY"}
        bad |= {n["address"] for n in ctl["nodes"] if n["index"] in unconnected(ctl)}
        own = own_node(imex)
        for address in sorted(bad - ({own["address"]} if own else set())):
            peer = address_of.get(address, address)
            seen.setdefault(peer, []).append(f"{host}'s IMEX does not see {address} READY and Connected")
        for peer, tray_peer in trays.items():
            addresses = set((tray_peer["imex"] or {}).get("addresses", []))
            if peer != host and addresses and not addresses & listed:
                seen.setdefault(peer, []).append(f"{host}'s IMEX node table does not list it")
    outcomes = []
    for peer, why in sorted(seen.items()):
        name = trays[peer]["name"] if peer in trays else f"IMEX node {peer} of rack {rack}"
        outcomes.append(
            Outcome(
                "FAIL",
                f"{name}: IMEX peer missing ({'; '.join(sorted(set(why)))}); GPU memory on it cannot be "
                "imported by the rest of the rack",
                sorted(set(why)),
                "every tray's IMEX READY and Connected in every peer's node table",
                host=peer if peer in trays else None,
            )
        )
    return outcomes


def judge(facts: Mapping[str, Mapping[str, Facts]], host_vars: Mapping[str, Vars]) -> list[Outcome]:
    racks = _racks(facts, host_vars)
    if not racks:
        return [Outcome("SKIP", "no host is a tray of a multi-node NVLink domain (NVL72 rack)", None, WANTED)]
    outcomes = []
    for rack, trays in sorted(racks.items()):
        outcomes.extend(_fabric(rack, trays))
        outcomes.extend(_imex(rack, trays))
    summary = "; ".join(
        f"rack {rack}: {len(trays)} tray{'s' if len(trays) != 1 else ''}"
        for rack, trays in sorted(racks.items())
    )
    if outcomes:
        return [Outcome("FAIL", f"{summary}; {len(outcomes)} faults named", summary, WANTED), *outcomes]
    return [
        Outcome(
            "PASS",
            f"{summary}; every tray registered in one clique of its rack, every IMEX peer READY",
            summary,
            WANTED,
        )
    ]


CHECK = ClusterCheck(
    id="nvlink.rack",
    checklist="H",
    summary="NVL72 racks: one clique per rack, the tray whose fabric registration or IMEX failed named",
    uses=("gpu.nvlink_domain", "gpu.imex"),
    judge=judge,
    remediation=REMEDIATION,
    action="check_config",
)
