"""A host's hardware identity as acceptance records it, and what changed between two of them. Pure.

The as-built record of an accepted cluster is the parts its evidence was measured on: each GPU's board serial
(its UUID where the board prints none) by bus id, each InfiniBand port's GUID, each cable's module serial by
port, the firmware of HCAs, GPUs (VBIOS) and transceivers, the driver and NCCL. The host stage already reads
all of it (gpu.memory's GPU query, ibstat of ib.port_state, mlxlink of ib.optics, gpu.topology, nccl.version):
:func:`identity_from_facts` collects it into results.json ``hosts[].identity`` so that the campaign ledger,
and anyone re-reading a run, works from the results alone.

A value no check read (None) is never a change: a run that skipped ib.optics has not swapped the cables.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: identity key -> (kind of change, words); a part key holds {slot: serial}, a version key {what: version}.
PARTS = {"gpus": ("gpu", "GPU"), "hcas": ("hca", "HCA port"), "cables": ("cable", "cable")}
VERSIONS = {
    "firmware": ("firmware", "firmware"),
    "driver": ("driver", "driver"),
    "nccl": ("nccl", "NCCL"),
}


def _gpus(facts: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    serials, vbios = {}, {}
    for gpu in (facts.get("gpu.memory") or {}).get("gpus") or []:
        bus = str(gpu.get("bus_id") or "").upper()
        if not bus:
            continue
        key = gpu.get("serial") or gpu.get("uuid")
        if key:
            serials[bus] = str(key)
        if gpu.get("vbios"):
            vbios[f"VBIOS {bus}"] = str(gpu["vbios"])
    return serials, vbios


def _hcas(facts: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    guids, firmware = {}, {}
    for check_id in ("ib.port_state", "ib.link_rate", "ib.devices"):
        ibstat = facts.get(check_id) or {}
        for ca in ibstat.get("cas") or []:
            if ca.get("name") and ca.get("firmware"):
                firmware.setdefault(f"HCA {ca['name']}", str(ca["firmware"]))
        for port in ibstat.get("ports") or []:
            if port.get("device") and port.get("port_guid"):
                guids.setdefault(f"{port['device']}/{port.get('port')}", str(port["port_guid"]).lower())
    return guids, firmware


def _cables(facts: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    serials, firmware = {}, {}
    for port in (facts.get("ib.optics") or {}).get("ports") or []:
        module = port.get("module") or {}
        where = f"{port.get('device') or 'port'}/{port.get('port') or 1}"
        if str(module.get("serial") or "").strip():
            serials[where] = str(module["serial"]).strip()
        if module.get("firmware"):
            firmware[f"transceiver {where}"] = str(module["firmware"])
    return serials, firmware


def identity_from_facts(facts: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """``{gpus: {bus: serial}, hcas: {dev/port: guid}, cables: {dev/port: serial}, firmware: {what: version},
    driver, nccl}`` from one host's facts by check id; parts nobody read are left out."""
    gpus, vbios = _gpus(facts)
    hcas, hca_fw = _hcas(facts)
    cables, cable_fw = _cables(facts)
    identity: dict[str, Any] = {"gpus": gpus, "hcas": hcas, "cables": cables}
    identity["firmware"] = {**hca_fw, **vbios, **cable_fw}
    identity["driver"] = (facts.get("gpu.topology") or {}).get("driver")
    identity["nccl"] = (facts.get("nccl.version") or {}).get("version")
    return identity


@dataclass(frozen=True)
class Change:
    """One difference between the identity evidence was measured on and a later one."""

    kind: str  # a key of diagnose.campaign.phases.VOIDS
    where: str  # the slot or the version's subject ("GPU 00000000:18:00.0", "driver")
    before: str
    after: str

    def text(self) -> str:
        return f"{self.where}: {self.before} → {self.after}"


def changes(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> list[Change]:
    """What changed from ``before`` to ``after``, slot by slot; a slot or value only one side knows is no
    change (a part the later run did not read, or a new slot: its checks judge it)."""
    if not before or not after:
        return []
    found = []
    for key, (kind, words) in PARTS.items():
        old, new = before.get(key) or {}, after.get(key) or {}
        for slot in sorted(set(old) & set(new)):
            if old[slot] and new[slot] and old[slot] != new[slot]:
                found.append(Change(kind, f"{words} {slot}", str(old[slot]), str(new[slot])))
    old_fw, new_fw = before.get("firmware") or {}, after.get("firmware") or {}
    for what in sorted(set(old_fw) & set(new_fw)):
        if old_fw[what] != new_fw[what]:
            found.append(Change("firmware", f"{what} firmware", str(old_fw[what]), str(new_fw[what])))
    for key in ("driver", "nccl"):
        kind, words = VERSIONS[key]
        if before.get(key) and after.get(key) and before[key] != after[key]:
            found.append(Change(kind, words, str(before[key]), str(after[key])))
    return found


def merged(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> dict[str, Any]:
    """The identity as now known: ``after``'s values over ``before``'s, so a run that read less keeps the
    parts an earlier run read."""
    result: dict[str, Any] = {k: (dict(v) if isinstance(v, dict) else v) for k, v in (before or {}).items()}
    for key, value in (after or {}).items():
        if isinstance(value, dict):
            result[key] = {**(result.get(key) or {}), **value}
        elif value is not None:
            result[key] = value
    return result
