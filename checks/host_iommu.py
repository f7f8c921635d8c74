"""host.iommu — the IOMMU does not translate the DMA of GPUs and NICs where GPUDirect RDMA is expected.

With the IOMMU in translated mode (``DMA``/``DMA-FQ`` default domains: the distribution default on AMD,
and on Intel with ``intel_iommu=on`` alone) every access a NIC makes to GPU or host memory goes through
IOMMU page tables: GPUDirect RDMA loses bandwidth and latency to IOTLB misses, and peer-to-peer between a
NIC and a GPU is refused or routed through the root complex. ``iommu=pt`` (passthrough, ``identity``
domains) keeps the IOMMU for VFIO and interrupt remapping while devices of the host DMA untranslated; an
IOMMU that is off does the same.

The mode is read from the groups' default domain (Linux 5.11 on). Older kernels have no such file: the
kernel command line decides (``iommu=pt`` or ``iommu.passthrough=1``: passthrough; nothing: the kernel's
default, translated, whenever a remapping unit is active).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from diagnose.config.profiles import gpudirect_expected, no_gpu_reason
from diagnose.core.check import Check, Command, Facts
from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.vars import Vars
from diagnose.parsers.kernel_settings import (
    CMDLINE,
    IOMMU_GROUPS,
    IOMMU_UNITS,
    parse_cmdline,
    parse_iommu_groups,
    parse_iommu_units,
)

TRANSLATED = ("DMA", "DMA-FQ")

REMEDIATION = (
    "Boot with the IOMMU in passthrough: add `iommu=pt` to the kernel command line (GRUB_CMDLINE_LINUX in "
    "/etc/default/grub, then update-grub and reboot; keep intel_iommu=on/amd_iommu=on where VFIO needs it; "
    "on Arm servers with an SMMU, such as Grace trays, `iommu.passthrough=1`), "
    "or disable the IOMMU (VT-d/AMD-Vi) in the BIOS on nodes that pass no device to a VM."
)


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    facts: Facts = parse_cmdline(outputs["cmdline"].stdout)
    facts["units"] = parse_iommu_units(outputs["iommu_units"].stdout)
    facts["groups"] = dict(Counter(parse_iommu_groups(outputs["iommu_groups"].stdout).values()))
    facts["mode"] = mode(facts)
    return facts


def mode(facts: Facts) -> str:
    """off, passthrough or translated, from the groups' domains when the kernel gives them."""
    groups: dict[str, int] = facts["groups"]
    if any(kind in groups for kind in TRANSLATED):
        return "translated"
    if groups.get("identity"):
        return "passthrough"
    if not facts["units"]:
        return "off"
    if facts["disabled"]:
        return "off"
    return "passthrough" if facts["passthrough"] else "translated"


def _observed(facts: Facts) -> str:
    groups = ", ".join(f"{count} {kind}" for kind, count in sorted(facts["groups"].items()))
    params = " ".join(f"{k}={v}" if v else k for k, v in facts["iommu_params"].items()) or "no IOMMU switch"
    units = f"{len(facts['units'])} remapping units" if facts["units"] else "no remapping unit"
    return f"{facts['mode']} ({units}; groups: {groups or 'none'}; cmdline: {params})"


def judge(facts: Facts, host_vars: Vars) -> Outcome:
    host = host_vars.host or "this host"
    wanted = "IOMMU off or in passthrough (iommu=pt) where GPUDirect RDMA is expected"
    observed = _observed(facts)
    reason = no_gpu_reason(host_vars)
    if reason:
        return Outcome("SKIP", f"IOMMU not judged on {host}: {reason}", observed, wanted)
    if facts["mode"] != "translated":
        return Outcome("PASS", f"IOMMU on {host}: {observed}", observed, wanted)
    if not gpudirect_expected(host_vars):
        return Outcome(
            "SKIP",
            f"IOMMU on {host}: {observed}; not judged: GPUDirect RDMA is not expected",
            observed,
            wanted,
        )
    translated = sum(facts["groups"].get(kind, 0) for kind in TRANSLATED)
    scope = f"{translated} IOMMU groups translate DMA" if translated else "the kernel default translates DMA"
    return Outcome(
        "WARN",
        f"IOMMU on {host}: {observed}: {scope}, so GPUDirect RDMA pays for IOMMU page walks",
        observed,
        wanted,
        remediation=REMEDIATION,
    )


CHECK = Check(
    id="host.iommu",
    checklist="H",
    summary="IOMMU off or passthrough (iommu=pt), not translating DMA where GPUDirect RDMA is expected",
    commands=(
        Command("cmdline", CMDLINE, timeout=10),
        Command("iommu_units", IOMMU_UNITS, timeout=10, required=False),
        Command("iommu_groups", IOMMU_GROUPS, timeout=10, required=False),
    ),
    parse=parse,
    judge=judge,
    remediation=REMEDIATION,
    action="check_config",
)
