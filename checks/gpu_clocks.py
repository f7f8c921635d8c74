"""gpu.clocks — no GPU is held below its clocks by a hardware or thermal fault.

nvidia-smi reports why clocks are below the maximum ("clock event reasons", formerly "throttle reasons"),
as named flags and as the ``clocks_event_reasons.active`` bitmask (NVML's nvmlClocksEventReason bits:
gpu_idle 0x1, applications_clocks_setting 0x2, sw_power_cap 0x4, hw_slowdown 0x8, sync_boost 0x10,
sw_thermal_slowdown 0x20, hw_thermal_slowdown 0x40, hw_power_brake_slowdown 0x80, display_clock_setting
0x100). Both are read, so a driver that prints one and not the other is still judged.

HW slowdown, HW thermal slowdown and HW power brake cut the clocks by half or more and come from the board
or the system (over-temperature sensor, a power supply asserting the brake): FAIL, the node cannot deliver
its rated throughput. SW thermal slowdown is the firmware trimming clocks because the GPU reached its
maximum operating temperature: a cooling problem (airflow, inlet temperature) that costs performance but
is managed and reversible, so a WARN. Idle, applications-clocks setting, sync boost and SW power cap are
the GPU working as configured (SW power cap at idle or under load is normal power management).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from diagnose.catalog.clock_events import BITS, FAULTS, LABELS, WARNINGS, decode
from diagnose.config.profiles import no_gpu_reason, no_gpu_required
from diagnose.core.check import Check, Facts
from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.units import counted
from diagnose.core.vars import Vars
from diagnose.parsers.gpu_query import GPU_QUERY, flag, gpu_label, integer, parse_gpu_query


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    gpus = []
    for row in outputs["gpu_query"].parsed(parse_gpu_query):
        mask = integer(row.get("clocks_event_reasons.active"))
        named = [n for n in BITS if flag(row.get(f"clocks_event_reasons.{n}"))]
        active = [n for n in BITS if n in named or (mask is not None and n in decode(mask))]
        gpus.append(
            {
                "index": row.get("index"),
                "bus_id": row.get("pci.bus_id"),
                "active_mask": f"0x{mask:x}" if mask is not None else None,
                "reasons": active,
                "temperature_c": integer(row.get("temperature.gpu")),
            }
        )
    return {"gpus": gpus}


def _describe(gpu: dict[str, Any], names: tuple[str, ...]) -> str:
    hits = ", ".join(LABELS[n] for n in gpu["reasons"] if n in names)
    temp = f", {gpu['temperature_c']} C" if gpu["temperature_c"] is not None else ""
    return f"{gpu_label({'index': gpu['index'], 'pci.bus_id': gpu['bus_id']})}: {hits} active{temp}"


def judge(facts: Facts, host_vars: Vars) -> Outcome:
    host = host_vars.host or "this host"
    wanted = "no HW slowdown, HW thermal, HW power brake or SW thermal clock event"
    reason = no_gpu_reason(host_vars)
    if reason:
        return Outcome("SKIP", f"clock event reasons not judged on {host}: {reason}", None, wanted)
    gpus = facts["gpus"]
    if not gpus:
        return Outcome(
            "ERROR", f"nvidia-smi lists no GPU on {host}, so clocks cannot be judged (see gpu.topology)"
        )
    observed = {str(g["index"]): [LABELS[n] for n in g["reasons"]] or ["none"] for g in gpus}
    failing = [_describe(g, FAULTS) for g in gpus if any(n in FAULTS for n in g["reasons"])]
    warning = [_describe(g, WARNINGS) for g in gpus if any(n in WARNINGS for n in g["reasons"])]
    if failing:
        return Outcome(
            "FAIL",
            f"{host}: " + "; ".join(failing + warning),
            observed,
            wanted,
            remediation="HW slowdown halves the clocks or worse: check the GPU and inlet temperatures and the "
            "chassis airflow, the power supplies and GPU power cables (HW power brake is asserted by the "
            "system's power supply), and the BMC event log. HW slowdown on a cool, idle GPU points at the "
            "board: run field diagnostics, RMA if they fail.",
        )
    if warning:
        return Outcome(
            "WARN",
            f"{host}: " + "; ".join(warning),
            observed,
            wanted,
            remediation="The GPU reached its maximum operating temperature and the firmware is trimming clocks: "
            "check airflow, fan speed, blanking panels and the inlet temperature of this node.",
        )
    benign = sorted({LABELS[n] for g in gpus for n in g["reasons"]})
    shown = ", ".join(benign) if benign else "none"
    return Outcome(
        "PASS",
        f"{host}: {counted(len(gpus), 'GPU')}, no fault among clock event reasons (active: {shown})",
        observed,
        wanted,
    )


CHECK = Check(
    id="gpu.clocks",
    checklist="H",
    summary="no HW slowdown / HW thermal / HW power brake (FAIL) or SW thermal (WARN) clock event reason",
    commands=(GPU_QUERY,),
    parse=parse,
    judge=judge,
    remediation="Find what holds the clocks down: temperature, airflow, power delivery.",
    no_hardware=no_gpu_required,
    folded_under="gpu.topology",
    action="contact_support",
)
