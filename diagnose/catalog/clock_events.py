"""What each NVML clock-event ("throttle") reason means for a verdict: its bit, its label, its severity.

nvidia-smi reports why clocks are below the maximum ("clock event reasons", formerly "throttle reasons"),
as named flags and as the ``clocks_event_reasons.active`` bitmask (NVML's nvmlClocksEventReason bits).
HW slowdown, HW thermal slowdown and HW power brake cut the clocks by half or more and come from the board
or the system (over-temperature sensor, a power supply asserting the brake): faults. SW thermal slowdown is
the firmware trimming clocks at the GPU's maximum operating temperature: a cooling problem, a warning.
Idle, applications-clocks setting, sync boost and SW power cap are the GPU working as configured.

Data shared by gpu.clocks (one snapshot) and gpu.burnin (every sample of a sustained load).
"""

from __future__ import annotations

BITS = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clock_setting": 0x100,
}
LABELS = {
    "gpu_idle": "GPU idle",
    "applications_clocks_setting": "applications clocks setting",
    "sw_power_cap": "SW power cap",
    "hw_slowdown": "HW slowdown",
    "sync_boost": "sync boost",
    "sw_thermal_slowdown": "SW thermal slowdown",
    "hw_thermal_slowdown": "HW thermal slowdown",
    "hw_power_brake_slowdown": "HW power brake slowdown",
    "display_clock_setting": "display clock setting",
}
FAULTS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")
WARNINGS = ("sw_thermal_slowdown",)


def decode(mask: int) -> list[str]:
    """Reason names of a clocks_event_reasons.active bitmask, in bit order."""
    return [name for name, bit in BITS.items() if mask & bit]
