"""host.storage — the filesystems jobs write to are there, writable, not full; every NVMe drive is seen.

Checkpoints and datasets go to site mounts (``/raid`` on a DGX, a parallel filesystem, local NVMe): a mount
that failed at boot leaves jobs writing into the root filesystem's empty directory, a filesystem the kernel
remounted read-only after I/O errors fails the first checkpoint, and a full one fails it hours into the
run. A drive missing from ``lsblk`` has dropped off the bus (or its RAID set did not assemble).

Judged against ``expected_mounts`` (mounted, ``rw``; ``/`` always), ``min_free_gib`` (on ``/`` and each
expected mount; less is a WARN: it works until it fills) and ``expected_nvme_count``; a value left null is not
judged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from diagnose.core.check import Check, Command, Facts
from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.vars import Vars
from diagnose.parsers.storage import (
    FINDMNT,
    LSBLK,
    df_command,
    nvme_disks,
    parse_df,
    parse_findmnt,
    parse_lsblk_pairs,
)

KIB_PER_GIB = 1024 * 1024

REMEDIATION = (
    "Mount what is missing (`mount -a`; check /etc/fstab, the automounter or the filesystem client), remount "
    "read-only filesystems after fixing their errors (the kernel log says why: `dmesg | grep -i "
    "remount`), free space or grow the volume, and reseat or replace an NVMe drive that lsblk no longer lists."
)


def _commands(host_vars: Vars) -> tuple[Command, ...]:
    return (
        Command("mounts", FINDMNT, tool="findmnt", timeout=10, required=False),
        Command("df", df_command(host_vars.list("expected_mounts") or []), timeout=20),
        Command("lsblk", LSBLK, tool="lsblk", timeout=10, required=False),
    )


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    missing = [tool for key, tool in (("mounts", "findmnt"), ("lsblk", "lsblk")) if outputs[key].not_found]
    if missing:
        return {"missing": missing}
    disks = nvme_disks(parse_lsblk_pairs(outputs["lsblk"].stdout))
    return {
        "mounts": parse_findmnt(outputs["mounts"].stdout),
        "free_gib": {
            target: round(row["available_kib"] / KIB_PER_GIB, 1)
            for target, row in parse_df(outputs["df"].stdout).items()
        },
        "nvme": [f"{d['NAME']} {d.get('MODEL', '').strip()}".strip() for d in disks],
        "missing": [],
    }


def _faults(facts: Facts, host_vars: Vars) -> tuple[list[str], list[str]]:
    """(failures, warnings) in words."""
    failures: list[str] = []
    warnings: list[str] = []
    mounts: dict[str, dict[str, Any]] = facts["mounts"]
    expected = host_vars.list("expected_mounts") or []
    for path in dict.fromkeys(["/", *expected]):
        mount = mounts.get(path)
        if mount is None:
            failures.append(f"{path} is not mounted")
        elif "ro" in mount["options"]:
            failures.append(f"{path} is mounted read-only ({mount['source']}, {mount['fstype']})")
    minimum = host_vars.float("min_free_gib")
    if minimum is not None:
        for path in dict.fromkeys(["/", *expected]):
            free = facts["free_gib"].get(path)
            if free is not None and path in mounts and free < minimum:
                warnings.append(f"{path} has {free:g} GiB free (min_free_gib {minimum:g})")
    count = host_vars.int("expected_nvme_count")
    if count is not None and len(facts["nvme"]) != count:
        seen = ", ".join(d.split()[0] for d in facts["nvme"]) or "none"
        failures.append(f"{len(facts['nvme'])} NVMe drives, expected_nvme_count {count} (seen: {seen})")
    return failures, warnings


def judge(facts: Facts, host_vars: Vars) -> Outcome:
    host = host_vars.host or "this host"
    expected = host_vars.list("expected_mounts") or []
    minimum = host_vars.float("min_free_gib")
    count = host_vars.int("expected_nvme_count")
    wanted = {"mounts (rw)": expected, "min_free_gib": minimum, "nvme": count}
    if facts["missing"]:
        return Outcome(
            "SKIP",
            f"{' and '.join(facts['missing'])} not installed on {host} (Debian package util-linux), so "
            "mounts and drives cannot be read",
            None,
            wanted,
            remediation="Install util-linux (`apt-get install util-linux`).",
        )
    shown = [p for p in dict.fromkeys(["/", *expected]) if p in facts["free_gib"]]
    observed = {
        "free_gib": {p: facts["free_gib"][p] for p in shown},
        "missing": [p for p in expected if p not in facts["mounts"]],
        "nvme": len(facts["nvme"]),
    }
    failures, warnings = _faults(facts, host_vars)
    if failures:
        return Outcome(
            "FAIL", f"{host}: " + "; ".join(failures + warnings), observed, wanted, remediation=REMEDIATION
        )
    if warnings:
        return Outcome("WARN", f"{host}: " + "; ".join(warnings), observed, wanted, remediation=REMEDIATION)
    space = ", ".join(f"{p} {facts['free_gib'][p]:g} GiB free" for p in shown)
    drives = f", {len(facts['nvme'])} NVMe drives" if count is not None else ""
    mounted = f"{len(expected)} expected mounts read-write, " if expected else ""
    return Outcome("PASS", f"{host}: {mounted}{space}{drives}", observed, wanted)


CHECK = Check(
    id="host.storage",
    checklist="H",
    summary="expected_mounts mounted rw, min_free_gib free on / and each, expected_nvme_count NVMe drives",
    commands=_commands(Vars()),
    commands_for=_commands,
    parse=parse,
    judge=judge,
    remediation=REMEDIATION,
    action="check_config",
)
