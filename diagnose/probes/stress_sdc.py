"""gpu.sdc: bitwise agreement of the seeded product chain, on each GPU, across a host and across hosts. Pure.

A GPU whose repeats differ, or whose checksum differs from the majority of the same GPU model on its host,
is FAIL (``rma_gpu``); across hosts (same model, same torch and CUDA) a host whose GPUs agree among
themselves but not with the fleet's majority is FAIL from three hosts on, WARN with two: a software
difference (``check_config``) before it is eight faulty GPUs. Split from :mod:`diagnose.probes.stress_judge`,
whose record and message helpers it shares.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from diagnose.catalog.stage_ids import GPU_SDC
from diagnose.core.model import CheckResult, worst
from diagnose.core.units import counted
from diagnose.probes.stress_figures import GpuStress, HostStress
from diagnose.probes.stress_judge import (
    CHECKLIST,
    CPU_NOTE,
    REMEDIATION,
    Judgement,
    base_record,
    broken_checks,
    shared_note,
    units,
)

SOFTWARE_SDC = (
    "every GPU of the host agrees on other bits than the fleet: a software difference (driver, cuBLAS, "
    "GPU model variant; versions.*) before {count} faulty GPUs"
)


def _majority(checksums: Sequence[str]) -> str | None:
    """The checksum more than half agree on, or None."""
    if not checksums:
        return None
    value, count = Counter(checksums).most_common(1)[0]
    return value if count * 2 > len(checksums) else None


def judge_sdc(hosts: Sequence[HostStress]) -> Judgement:
    """Bitwise agreement on each host, then across hosts per GPU model and software."""
    out = Judgement()
    broken, skip = broken_checks(hosts, GPU_SDC, "sdc")
    out.checks += broken
    fleet: dict[tuple[str, str, str], dict[str, list[str]]] = {}
    for host in hosts:
        if host.host in skip or "sdc" not in host.phases:
            continue
        for gpu in host.gpus:
            entry = gpu.entries.get("sdc")
            if entry and not host.cpu:
                group = (gpu.name, str(host.start.get("torch")), str(host.start.get("cuda")))
                fleet.setdefault(group, {}).setdefault(host.host, []).append(str(entry.get("checksum")))
    references = {
        group: _majority([c for sums in by_host.values() for c in sums]) for group, by_host in fleet.items()
    }
    for host in hosts:
        if host.host in skip or "sdc" not in host.phases:
            continue
        lines: list[tuple[str, str]] = []
        for gpu in host.gpus:
            status, line, reference = _sdc_gpu(host, gpu, fleet, references)
            record = {**base_record(host, gpu, GPU_SDC, "sdc"), **(gpu.entries.get("sdc") or {})}
            record.update({"reference": reference, "verdict": status, "why": line})
            out.records.append(record)
            lines.append((status, line))
        out.checks.append(_sdc_check(host, lines))
    for (name, torch, cuda), by_host in sorted(fleet.items()):
        if len(by_host) > 1:
            sums = [c for s in by_host.values() for c in s]
            reference = references[(name, torch, cuda)]
            agree = sum(1 for c in sums if c == reference)
            out.checks.append(
                CheckResult(
                    GPU_SDC,
                    None,
                    CHECKLIST,
                    "PASS" if agree == len(sums) else "FAIL",
                    {"reference": reference, "gpus": len(sums), "agree": agree},
                    message=f"{agree} of {len(sums)} {name} GPUs on {len(by_host)} hosts (torch {torch}, CUDA "
                    f"{cuda}) computed the same bits (checksum {str(reference)[:16]}…)",
                )
            )
    return out


def _sdc_gpu(
    host: HostStress,
    gpu: GpuStress,
    fleet: dict[tuple[str, str, str], dict[str, list[str]]],
    references: dict,
) -> tuple[str, str, str | None]:
    if "sdc" in gpu.errors:
        return "ERROR", f"{gpu.label}: the seeded product failed: {gpu.errors['sdc']}", None
    entry = gpu.entries.get("sdc")
    if entry is None:
        return "ERROR", f"{gpu.label}: no result", None
    checksum = str(entry.get("checksum"))
    repeats = [str(r) for r in entry.get("repeats") or [checksum]]
    if host.cpu:
        return "SKIP", f"{gpu.label}: checksum {checksum[:16]}…", None
    if len(set(repeats)) > 1:
        return "FAIL", f"{gpu.label}: {len(set(repeats))} different results in {len(repeats)} repeats", None
    group = (gpu.name, str(host.start.get("torch")), str(host.start.get("cuda")))
    own = [c for g in host.gpus if g.name == gpu.name and (c := (g.entries.get("sdc") or {}).get("checksum"))]
    local = _majority([str(c) for c in own])
    reference = references.get(group)
    if len(own) > 1 and checksum != local:
        why = (
            "no majority among its host's GPUs"
            if local is None
            else f"its host's other GPUs agree on {local[:16]}…"
        )
        return "FAIL", f"{gpu.label}: checksum {checksum[:16]}… differs ({why})", reference
    hosts_in_group = len(fleet.get(group, {}))
    if reference is not None and checksum != reference and hosts_in_group > 1:
        status = "FAIL" if hosts_in_group >= 3 else "WARN"
        return (
            status,
            (
                f"{gpu.label}: checksum {checksum[:16]}… differs from the {reference[:16]}… of the fleet's other "
                f"{gpu.name} GPUs (same torch and CUDA)"
            ),
            reference,
        )
    return "PASS", f"{gpu.label}: checksum {checksum[:16]}…", reference


def _sdc_check(host: HostStress, lines: list[tuple[str, str]]) -> CheckResult:
    statuses = [s for s, _ in lines] or ["ERROR"]
    status = worst(statuses)
    note = shared_note(host)
    if host.cpu:
        sums = {line.partition("checksum ")[2] for _, line in lines}
        agree = "their checksums agree" if len(sums) == 1 else "their checksums differ"
        if len(lines) == 1:
            agree = "no other rank to compare its checksum with"
        message = f"{CPU_NOTE}; {counted(len(lines), 'rank')} computed the seeded product, {agree}{note}"
        return CheckResult(GPU_SDC, host.host, CHECKLIST, "SKIP", message=message)
    if status == "PASS":
        checksum = lines[0][1].partition("checksum ")[2]
        message = (
            f"{host.host}: {units(len(lines), False)} computed the same bits, each repeat alike "
            f"(checksum {checksum}){note}"
        )
    else:
        message = f"{host.host}: " + "; ".join(line for s, line in lines if s != "PASS") + note
    action = None
    if status in ("FAIL", "WARN"):
        action = _sdc_action(host, lines, status)
        if action == "check_config":
            message += f" → {SOFTWARE_SDC.format(count=len(lines))}"
    return CheckResult(
        GPU_SDC,
        host.host,
        CHECKLIST,
        status,
        expected="the same bits on every GPU of a model",
        message=message,
        remediation=REMEDIATION[GPU_SDC] if status in ("FAIL", "WARN") else None,
        action=action,
    )


def _sdc_action(host: HostStress, lines: list[tuple[str, str]], status: str) -> str:
    """``rma_gpu`` for a GPU whose bits differ (``reset_gpu`` for a WARN, two hosts only); ``check_config``
    when every GPU of a host of several differs from the fleet alike while agreeing with each other."""
    differing = [line for s, line in lines if s == status]
    sums = {(g.entries.get("sdc") or {}).get("checksum") for g in host.gpus}
    fleet_only = all("of the fleet's other" in line for line in differing)
    if len(host.gpus) > 1 and len(differing) == len(host.gpus) and len(sums) == 1 and fleet_only:
        return "check_config"
    return "rma_gpu" if status == "FAIL" else "reset_gpu"
