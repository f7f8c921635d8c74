"""Kernel settings read from /proc and /sys with ``cat``, ``ls`` and ``grep -H .``: no tool to install, one
process each.

* ``/proc/cmdline``: the IOMMU switches the kernel was booted with (``intel_iommu=on``, ``amd_iommu=off``,
  ``iommu=pt``, ``iommu.passthrough=1``, ...);
* ``ls /sys/class/iommu``: the DMA remapping units the kernel drives (``dmar0``, ``ivhd0``); none means no
  IOMMU is active;
* ``grep -H . /sys/kernel/iommu_groups/*/type``: each IOMMU group's default domain (Linux 5.11 on):
  ``identity`` is passthrough, ``DMA``/``DMA-FQ`` translate every device access through page tables;
* ``/proc/sys/kernel/numa_balancing``: 0 off, 1 on, 2 memory tiering (absent on kernels built without it);
* ``grep -H . /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor``: the cpufreq governor of each CPU
  (absent where no cpufreq driver runs, as in most cloud guests).

``grep -H .`` prints ``path:value`` per non-empty line; a glob that matched nothing reaches grep literally
and only costs an error line on stderr, so the parsers read stdout alone.
"""

from __future__ import annotations

import re
from typing import Any

from diagnose.core.check import ParseError

CMDLINE = "cat /proc/cmdline"
IOMMU_UNITS = "ls /sys/class/iommu"
IOMMU_GROUPS = "grep -H . /sys/kernel/iommu_groups/*/type"
NUMA_BALANCING = "cat /proc/sys/kernel/numa_balancing"
CPU_GOVERNORS = "grep -H . /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor"

_IOMMU_PARAM = re.compile(r"^(?:iommu|intel_iommu|amd_iommu|iommu\.[a-z_]+)$")
_GROUP_TYPE = re.compile(r"/iommu_groups/(?P<group>\d+)/type:(?P<type>\S+)\s*$")
_GOVERNOR = re.compile(
    r"/(?:cpu(?P<cpu>\d+)/cpufreq|cpufreq/policy(?P<policy>\d+))/scaling_governor:(?P<gov>\S+)"
)
_ON = {"1", "on", "y", "yes"}


def parse_cmdline(text: str) -> dict[str, Any]:
    """Facts: ``iommu_params`` ({name: value} of the IOMMU switches, the last one winning as in the
    kernel), ``passthrough`` (iommu=pt or iommu.passthrough=1 asked for) and ``disabled`` (iommu=off,
    intel_iommu=off or amd_iommu=off asked for)."""
    params: dict[str, str] = {}
    for token in text.split():
        if token == "--":  # what follows goes to init, not to the kernel
            break
        name, _, value = token.partition("=")
        if _IOMMU_PARAM.match(name):
            params[name] = value
    passthrough = params.get("iommu") == "pt" or params.get("iommu.passthrough", "").lower() in _ON
    disabled = "off" in (
        params.get("iommu"),
        params.get("intel_iommu", "").split(",")[0],
        params.get("amd_iommu", "").split(",")[0],
    )
    return {"iommu_params": params, "passthrough": passthrough, "disabled": disabled}


def parse_iommu_units(text: str) -> list[str]:
    """The names ``ls /sys/class/iommu`` prints (several per line when a terminal asked for columns)."""
    return sorted(text.split())


def parse_iommu_groups(text: str) -> dict[str, str]:
    """{group number: default domain type} from ``grep -H .`` of the groups' ``type`` files."""
    groups = {}
    for line in text.splitlines():
        match = _GROUP_TYPE.search(line)
        if match:
            groups[match.group("group")] = match.group("type")
    return dict(sorted(groups.items(), key=lambda item: int(item[0])))


def parse_numa_balancing(text: str, exit_code: int | None) -> int | None:
    """The sysctl's value; None where the file does not exist (kernel without NUMA balancing)."""
    value = text.strip()
    if not value and exit_code:
        return None
    if not value.isdigit():
        raise ParseError(f"kernel.numa_balancing is not a number: {value[:80]!r}")
    return int(value)


def parse_cpu_governors(text: str) -> dict[str, str]:
    """{CPU number: governor}, from ``grep -H .`` of the per-CPU files (``policyN`` files count as CPU N,
    since each policy is named after its first CPU)."""
    governors = {}
    for line in text.splitlines():
        match = _GOVERNOR.search(line)
        if match:
            governors[match.group("cpu") or match.group("policy")] = match.group("gov")
    return dict(sorted(governors.items(), key=lambda item: int(item[0])))
