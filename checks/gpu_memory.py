"""gpu.memory — no GPU carries an uncorrectable memory fault that needs a reset, a reboot or an RMA.

NVIDIA's memory error management (A100 and later) repairs a bad HBM row by *remapping* it: the remap is
recorded at once (Xid 63) and takes effect at the next GPU reset, so "remapped rows pending: Yes" means
the GPU must be reset before it is trusted again, and "remapped rows failure: Yes" means a bank ran out of
spare rows, which NVIDIA lists as an RMA criterion. Pre-Ampere GPUs retire whole pages instead
("retired pages pending" needs a reboot). Uncorrectable ECC counts are read at both time scales: volatile
(since the driver loaded: this boot's faults) and aggregate (lifetime, from the InfoROM: history worth a
WARN). SRAM (on-chip, not HBM) uncorrectable errors cannot be remapped away and are judged on their own.
``[N/A]`` means the GPU has no such counter (Hopper has no retired pages), never a fault. ECC switched off
on a GPU that supports it is a WARN: silent corruption instead of a counted, contained error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from diagnose.config.profiles import no_gpu_reason, no_gpu_required
from diagnose.core.check import Check, Facts
from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.units import counted, noun_for
from diagnose.core.vars import Vars
from diagnose.parsers.gpu_query import GPU_QUERY, NOT_APPLICABLE, flag, gpu_label, integer, parse_gpu_query

_FIELDS = {
    "ecc_mode": "ecc.mode.current",
    "uncorrected_volatile": "ecc.errors.uncorrected.volatile.total",
    "uncorrected_aggregate": "ecc.errors.uncorrected.aggregate.total",
    "sram_uncorrected_volatile": "ecc.errors.uncorrected.volatile.sram",
    "sram_uncorrected_aggregate": "ecc.errors.uncorrected.aggregate.sram",
    "retired_pending": "retired_pages.pending",
    "retired_sbe": "retired_pages.single_bit_ecc.count",
    "retired_dbe": "retired_pages.double_bit.count",
    "remapped_correctable": "remapped_rows.correctable",
    "remapped_uncorrectable": "remapped_rows.uncorrectable",
    "remap_pending": "remapped_rows.pending",
    "remap_failure": "remapped_rows.failure",
    "corrected_volatile": "ecc.errors.corrected.volatile.total",
    "corrected_aggregate": "ecc.errors.corrected.aggregate.total",
}
_FLAGS = ("ecc_mode", "retired_pending", "remap_pending", "remap_failure")

RESET = (
    "Drain the GPU and reset it (`nvidia-smi -r -i <index>` with no process on it, or reboot the node) so the "
    "pending row remap / page retirement takes effect; check again afterwards."
)
RMA = (
    "Row remapping failed: the bank has no spare rows left. NVIDIA treats this as an RMA criterion; take "
    "the GPU out of service and open an RMA with the field diagnostic log."
)


def _identity(value: str | None) -> str | None:
    """A serial or UUID as printed, None where the board has none (``[N/A]``)."""
    return None if value is None or value.strip().lower() in NOT_APPLICABLE else value.strip()


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    gpus = []
    for row in outputs["gpu_query"].parsed(parse_gpu_query):
        gpu: dict[str, Any] = {
            "index": row.get("index"),
            "bus_id": row.get("pci.bus_id"),
            "name": row.get("name"),
            "vbios": row.get("vbios_version"),  # for versions.firmware
            # the physical GPU whichever slot it sits in: the watch list's series key (issue 35)
            "serial": _identity(row.get("serial")),
            "uuid": _identity(row.get("uuid")),
        }
        for key, field in _FIELDS.items():
            gpu[key] = flag(row.get(field)) if key in _FLAGS else integer(row.get(field))
        gpus.append(gpu)
    return {"gpus": gpus}


def _gpu_findings(gpu: dict[str, Any]) -> tuple[list[str], list[str], list[str]]:
    """(failures, warnings, remediations) for one GPU."""
    label = gpu_label({"index": gpu["index"], "pci.bus_id": gpu["bus_id"]})
    fails: list[str] = []
    warns: list[str] = []
    fixes: list[str] = []
    if gpu["remap_failure"]:
        fails.append(f"{label}: row remapping failure")
        fixes.append(RMA)
    if gpu["remap_pending"]:
        fails.append(
            f"{label}: remapped rows pending ({gpu['remapped_uncorrectable'] or 0} uncorrectable), GPU reset needed"
        )
        fixes.append(RESET)
    if gpu["retired_pending"]:
        fails.append(f"{label}: retired pages pending, reboot/reset needed")
        fixes.append(RESET)
    volatile = gpu["uncorrected_volatile"] or 0
    remap_handled = gpu["remap_pending"] is False and gpu["remap_failure"] is False
    if volatile:
        text = f"{label}: {volatile} uncorrectable ECC {noun_for(volatile, 'error')} since the driver loaded"
        if remap_handled:
            warns.append(text + " (row remapping handled them; nothing pending)")
        else:
            fails.append(text)
            fixes.append(RESET)
    if gpu["sram_uncorrected_volatile"]:
        fails.append(
            f"{label}: {gpu['sram_uncorrected_volatile']} uncorrectable SRAM {noun_for(gpu['sram_uncorrected_volatile'], 'error')} since the driver loaded"
        )
        fixes.append(RESET + " SRAM errors cannot be remapped: a GPU that repeats them is an RMA case.")
    aggregate = gpu["uncorrected_aggregate"] or 0
    if aggregate and not volatile:
        warns.append(
            f"{label}: {aggregate} uncorrectable ECC {noun_for(aggregate, 'error')} in its lifetime (none since the driver loaded)"
        )
    if gpu["sram_uncorrected_aggregate"] and not gpu["sram_uncorrected_volatile"]:
        warns.append(
            f"{label}: {gpu['sram_uncorrected_aggregate']} uncorrectable SRAM {noun_for(gpu['sram_uncorrected_aggregate'], 'error')} in its lifetime"
        )
    if gpu["ecc_mode"] is False:
        warns.append(f"{label}: ECC is disabled")
        fixes.append("Enable ECC (`nvidia-smi -e 1 -i <index>`, effective after a reset/reboot).")
    return fails, warns, fixes


def _observed(gpus: list[dict[str, Any]]) -> dict[str, Any]:
    return {str(g["index"]): {k: g[k] for k in _FIELDS if g[k] is not None} for g in gpus}


def judge(facts: Facts, host_vars: Vars) -> Outcome:
    host = host_vars.host or "this host"
    reason = no_gpu_reason(host_vars)
    wanted = "no uncorrectable ECC, no pending or failed row remap, no pending page retirement"
    if reason:
        return Outcome("SKIP", f"GPU memory not judged on {host}: {reason}", None, wanted)
    gpus = facts["gpus"]
    if not gpus:
        return Outcome(
            "ERROR", f"nvidia-smi lists no GPU on {host}, so GPU memory cannot be judged (see gpu.topology)"
        )
    fails: list[str] = []
    warns: list[str] = []
    fixes: list[str] = []
    for gpu in gpus:
        f, w, r = _gpu_findings(gpu)
        fails += f
        warns += w
        fixes += r
    observed = _observed(gpus)
    remediation = " ".join(dict.fromkeys(fixes)) or None
    if fails:
        failed_remap = any(g["remap_failure"] for g in gpus)  # memory the GPU cannot repair any more
        return Outcome(
            "FAIL",
            f"{host}: " + "; ".join(fails + warns),
            observed,
            wanted,
            remediation=remediation,
            action="rma_gpu" if failed_remap else "reset_gpu",
        )
    if warns:
        return Outcome(
            "WARN",
            f"{host}: " + "; ".join(warns),
            observed,
            wanted,
            remediation=remediation
            or "Watch these GPUs: a lifetime count that grows between runs, or an Xid 48/63/94, means the memory "
            "is degrading.",
            action="check_config" if any(g["ecc_mode"] is False for g in gpus) else "none",
        )
    remaps = sum(g["remapped_correctable"] or 0 for g in gpus) + sum(
        g["remapped_uncorrectable"] or 0 for g in gpus
    )
    note = f"; {counted(remaps, 'row')} remapped earlier, nothing pending" if remaps else ""
    return Outcome(
        "PASS",
        f"{host}: {counted(len(gpus), 'GPU')}, no uncorrectable memory error, nothing pending{note}",
        observed,
        wanted,
    )


CHECK = Check(
    id="gpu.memory",
    checklist="H",
    summary="no uncorrectable ECC, no pending/failed row remap or page retirement, ECC on",
    commands=(GPU_QUERY,),
    parse=parse,
    judge=judge,
    remediation="Reset GPUs with pending remaps; RMA GPUs whose row remapping failed.",
    no_hardware=no_gpu_required,
    folded_under="gpu.topology",
    action="reset_gpu",
    warn_action="none",
)
