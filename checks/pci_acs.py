"""pci.acs — no PCIe bridge between a GPU and a NIC (or two GPUs talking over PCIe) redirects peer traffic.

A NIC reads and writes GPU memory directly (GPUDirect RDMA) only when the PCIe switch that both sit behind
forwards the requests port to port. ACS redirect on the switch's downstream ports (``ReqRedir+``,
``CmpltRedir+``, or ``EgressCtrl+``) sends them up to the root complex instead: bandwidth collapses, or
the transfer hangs where the root complex drops peer-to-peer traffic. Firmware and OSes turn it on for
device isolation (virtualisation, IOMMU groups), so a node can come back from a BIOS update with it set.

Only the bridges *between* two such devices matter: for each GPU–NIC pair (and GPU–GPU pair where GPUs use
PCIe P2P, ``expected_nvlink: false``) that shares a PCIe switch, the bridges from their deepest common
bridge down to each device. ACS left on elsewhere (the switch in front of the NVSwitches, a root port of
the boot disk) isolates devices that never talk to a GPU and is reported, not judged. Devices under
different root ports meet only in the root complex, where ACS changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from diagnose.config.profiles import gpudirect_expected, no_gpu_reason
from diagnose.core.check import Check, Command, Facts
from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.vars import Vars
from diagnose.parsers.pci import bridges_above, parse_lspci, redirecting

GPU_CLASSES = ("3D controller", "VGA compatible controller", "Display controller")
NIC_CLASSES = ("Infiniband controller", "Ethernet controller", "Network controller")

REMEDIATION = (
    "Turn ACS off on the PCIe switch ports between GPUs and NICs: in the BIOS (PCIe ACS / ACS control "
    "disabled; on many boards disabling VT-d/IOMMU also clears it), or at every boot with "
    "`setpci -s <bridge> ECAP_ACS+0x6.w=0000` for each bridge named (pciutils). Bare-metal nodes that pass no "
    "device to a VM do not need ACS; keep it where VMs get GPUs."
)


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    lspci = outputs["lspci"]
    if lspci.not_found:
        return {"lspci_missing": True, "devices": []}
    return {"lspci_missing": False, "devices": parse_lspci(lspci.stdout)}


def _is_gpu(device: dict[str, Any]) -> bool:
    return device["class"] in GPU_CLASSES and "NVIDIA" in device["name"]


def _is_nic(device: dict[str, Any]) -> bool:
    return device["class"] in NIC_CLASSES


def _between(a: dict[str, Any], b: dict[str, Any], devices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The bridges a peer transfer between a and b crosses below their deepest common bridge; empty when they
    share no bridge (they meet in the root complex)."""
    up_a, up_b = bridges_above(a, devices), bridges_above(b, devices)
    shared = 0
    while shared < min(len(up_a), len(up_b)) and up_a[shared] is up_b[shared]:
        shared += 1
    if shared == 0:
        return []
    return up_a[shared:] + up_b[shared:]


def on_peer_paths(facts: Facts, host_vars: Vars) -> dict[str, list[str]]:
    """{bridge address: the endpoints whose peer traffic crosses it}, for the pairs this host must serve."""
    devices = facts["devices"]
    gpus = [d for d in devices if _is_gpu(d)]
    pairs = []
    if gpudirect_expected(host_vars):
        pairs += [(g, n) for g in gpus for n in devices if _is_nic(n)]
    if host_vars.bool("expected_nvlink") is False:
        pairs += [(g, h) for i, g in enumerate(gpus) for h in gpus[i + 1 :]]
    crossing: dict[str, list[str]] = {}
    for a, b in pairs:
        for bridge in _between(a, b, devices):
            ends = crossing.setdefault(bridge["bdf"], [])
            ends += [e["bdf"] for e in (a, b) if e["bdf"] not in ends]
    return crossing


def _short(bdf: str) -> str:
    return bdf.removeprefix("0000:")


def judge(facts: Facts, host_vars: Vars) -> Outcome:
    host = host_vars.host or "this host"
    wanted = "ACS redirect off (ReqRedir- CmpltRedir- EgressCtrl-) on every bridge between a GPU and a NIC"
    if facts["lspci_missing"]:
        return Outcome(
            "SKIP",
            f"lspci is not installed on {host} (Debian package pciutils), so ACS cannot be read",
            None,
            wanted,
            remediation="Install pciutils (`apt-get install pciutils`) to have ACS judged.",
        )
    reason = no_gpu_reason(host_vars)
    if reason:
        return Outcome("SKIP", f"ACS not judged on {host}: {reason}", None, wanted)
    by_bdf = {d["bdf"]: d for d in facts["devices"]}
    crossing = on_peer_paths(facts, host_vars)
    elsewhere = sorted(_short(b) for b, d in by_bdf.items() if redirecting(d["acs"]) and b not in crossing)
    note = f"; ACS redirect on {', '.join(elsewhere)}, not between a GPU and a NIC" if elsewhere else ""
    if not gpudirect_expected(host_vars) and host_vars.bool("expected_nvlink") is not False:
        return Outcome(
            "SKIP",
            f"ACS not judged on {host}: neither GPUDirect RDMA nor PCIe P2P between GPUs is expected{note}",
            {"redirecting": elsewhere},
            wanted,
        )
    observed = {
        _short(b): "unreadable"
        if by_bdf[b]["capabilities_denied"]
        else redirecting(by_bdf[b]["acs"]) or "off"
        for b in sorted(crossing)
    }
    faulty = [b for b in sorted(crossing) if redirecting(by_bdf[b]["acs"])]
    if faulty:
        detail = "; ".join(
            f"{_short(b)} ({' '.join(f + '+' for f in redirecting(by_bdf[b]['acs']))}) between "
            + ", ".join(_short(e) for e in crossing[b])
            for b in faulty
        )
        return Outcome(
            "FAIL",
            f"ACS redirects peer traffic to the root complex on {host}: {detail}",
            observed,
            wanted,
            remediation=REMEDIATION,
        )
    unreadable = [_short(b) for b in sorted(crossing) if by_bdf[b]["capabilities_denied"]]
    if unreadable:
        return Outcome(
            "ERROR",
            f"lspci could not read the ACS capability of {', '.join(unreadable)} on {host} "
            "(`Capabilities: <access denied>`: extended config space needs root)",
            observed,
            wanted,
            remediation="Run the checks as root (ansible_user root, or become) so that lspci can read ACS.",
        )
    if not crossing:
        return Outcome(
            "PASS",
            f"no GPU shares a PCIe switch with a peer it talks to on {host}: the traffic meets in the root "
            f"complex{note}",
            observed,
            wanted,
        )
    shown = ", ".join(sorted(observed))
    return Outcome(
        "PASS",
        f"ACS redirect off on the {len(crossing)} bridges between GPUs and NICs on {host} ({shown}){note}",
        observed,
        wanted,
    )


CHECK = Check(
    id="pci.acs",
    checklist="H",
    summary="no ACS redirect (ReqRedir/CmpltRedir/EgressCtrl) on PCIe bridges between GPUs and NICs",
    commands=(Command("lspci", "lspci -D -vvv", tool="lspci", timeout=20, required=False),),
    parse=parse,
    judge=judge,
    remediation=REMEDIATION,
    action="check_config",
)
