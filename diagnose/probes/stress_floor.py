"""The absolute floor of one GPU's gpu.gemm or gpu.hbm figure: its model's measured reference, less a
tolerance, scaled to the power limit the GPU ran under. Pure.

* reference: :mod:`diagnose.probes.stress_skus` by the GPU's reported name, or the inventory's
  ``gpu_ref_*`` (source "set in the inventory"); none for a model nobody measured, which is then judged
  against its peers only and says so;
* tolerance: ``gemm_max_below_ref_pct`` (gpu.gemm) or ``hbm_max_below_ref_pct`` (gpu.hbm), default 15 %:
  the references are the medians of healthy GPUs, whose spread run to run and GPU to GPU was a few per
  cent on the lent H100 and H200, so 15 % keeps a healthy GPU clear while a GPU shared with another job
  (44 % of the reference on the lent H100) stays far below;
* power: a GPU whose enforced power limit (sampled by the stress program while the phase ran) is below the
  reference's has its floor scaled down by the ratio — an operator's lower cap is a setting, not a GEMM
  fault; the verdict says "power limit 500 W of the reference's 700 W". Without samples (no nvidia-smi,
  a CPU host) nothing is scaled.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from diagnose.core.units import is_number
from diagnose.probes.stress_skus import OVERRIDES, sku_of

DEFAULT_MAX_BELOW_REF_PCT = 15.0
#: The per-GPU keys of a gemm or hbm entry the stress program fills from rank 0's nvidia-smi samples.
READING_KEYS = ("sm_clock_mhz", "max_sm_clock_mhz", "power_w", "power_limit_w")


@dataclass(frozen=True)
class Readings:
    """What a GPU reported while a phase ran: medians over the phase's nvidia-smi samples."""

    sm_clock_mhz: float | None = None
    max_sm_clock_mhz: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None

    @classmethod
    def of(cls, entry: Mapping[str, Any]) -> Readings:
        return cls(*(float(entry[k]) if is_number(entry.get(k)) else None for k in READING_KEYS))

    def record(self) -> dict[str, float | None]:
        return {k: getattr(self, k) for k in READING_KEYS}

    def text(self) -> str:
        """`` at 1380 MHz, 698 W of 700 W`` (what was sampled), or empty."""
        parts = []
        if self.sm_clock_mhz is not None:
            parts.append(f"{self.sm_clock_mhz:.0f} MHz")
        if self.power_w is not None:
            limit = f" of {self.power_limit_w:.0f} W" if self.power_limit_w is not None else ""
            parts.append(f"{self.power_w:.0f} W{limit}")
        elif self.power_limit_w is not None:
            parts.append(f"power limit {self.power_limit_w:.0f} W")
        return f" at {', '.join(parts)}" if parts else ""


@dataclass(frozen=True)
class Floor:
    """One GPU's expectation for one metric: the reference, where it comes from, the floor and why."""

    reference: float | None
    source: str
    brief: str
    reference_power_w: float | None
    below_pct: float
    scale: float
    peak: float | None
    label: str

    @property
    def floor(self) -> float | None:
        if self.reference is None:
            return None
        return self.reference * (1.0 - self.below_pct / 100.0) * self.scale

    def scaled_by(self, limit: float | None) -> str:
        """``, power limit 500 W of the reference's 700 W`` when the floor was scaled, else empty."""
        if self.scale >= 1.0 or limit is None or self.reference_power_w is None:
            return ""
        return f", power limit {limit:.0f} W of the reference's {self.reference_power_w:.0f} W"


def no_reference(name: str, metric: str) -> str:
    """The note of a GPU judged against its peers only."""
    sku = sku_of(name)
    model = sku.label if sku is not None else repr(name)
    return (
        f"no measured reference for {model} {metric.partition('.')[2]}: judged against its peers only; set "
        f"{OVERRIDES[metric]} to judge against a figure"
    )


def floor_of(
    metric: str,
    name: str,
    overrides: Mapping[str, float],
    below_pct: float,
    readings: Readings,
    override_source: str | None = None,
) -> Floor:
    """The expectation of a GPU named ``name`` for ``metric`` under the power limit it reported;
    ``override_source`` names a campaign that set the override (None: the inventory did)."""
    sku = sku_of(name)
    peak = sku.peak(metric) if sku is not None else None
    label = sku.label if sku is not None else name
    if metric in overrides:
        source = override_source or f"set in the inventory ({OVERRIDES[metric]})"
        return Floor(overrides[metric], source, source, None, below_pct, 1.0, peak, label)
    reference = sku.references.get(metric) if sku is not None else None
    if reference is None:
        note = no_reference(name, metric)
        return Floor(None, note, note, None, below_pct, 1.0, peak, label)
    limit, own = readings.power_limit_w, reference.power_w
    scale = limit / own if limit is not None and own and 0 < limit < own else 1.0
    return Floor(reference.value, reference.source, reference.brief, own, below_pct, scale, peak, label)
