"""What each GPU model reaches: measured references for gpu.gemm and gpu.hbm, and the datasheet peaks.

A GPU's absolute floor comes from what a healthy GPU of its model was measured to do, not from the
datasheet: a fixed share of the datasheet peak sat at what a healthy H200 at 700 W reaches (680 TFLOP/s
bf16 against a floor of 0.7 × 989 = 692.3), so noise decided the verdict. Each :class:`Reference` says
where it was measured (GPU, driver, power limit, SM clock under the load, torch, date, program), so an
operator reading "below the floor" knows what the GPU was compared with. The fleet (every GPU of the same
model in the run, :mod:`diagnose.probes.fleet_judge`) stays the first judge; the reference catches what a
fleet cannot (a lone GPU, or every GPU slow alike). A model without a measured reference is judged
against its peers only, and its verdict says so.

The model is looked up from the name the GPU reports (``NVIDIA H100 80GB HBM3``), so one profile serves
H100 SXM, PCIe and NVL nodes alike. Any reference can be set for a site (``gpu_ref_bf16_tflops``,
``gpu_ref_tf32_tflops``, ``gpu_ref_fp8_tflops``, ``gpu_ref_hbm_gbps``) at any inventory level or with
``-e``; such a figure is not scaled by power limit (it was taken at the site's own).

The datasheet peaks are shown beside the figures as information only ("72 % of the 989 datasheet peak"):
NVIDIA's dense values, without sparsity (the datasheets print the sparse ones, twice these): H100 SXM5 /
H200 SXM 989 bf16, 494.5 tf32, 1979 fp8; H100 PCIe 756 / 378 / 1513 at 2.0 TB/s; H100 NVL 835 / 417.5 /
1670 at 3.9 TB/s; H200 4.8 TB/s (NVL at 835 / 417.5 / 1670); A100 SXM4 312 bf16, 156 tf32, no fp8, 2.039
TB/s (80GB) or 1.555 TB/s (40GB); A100 PCIe 80GB 1.935 TB/s. B200 (HGX, 1000 W): 2250 bf16, 1100 tf32,
4500 fp8, 8 TB/s, as glennklockwood.com/garden/processors/B200 tabulates NVIDIA's HGX B200 figures. GB/s
here is 1e9 bytes per second (bytes read plus written), as HBM bandwidth is quoted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Reference:
    """A figure a healthy GPU of a model reached, and the conditions it was measured under: ``brief`` for
    messages, ``where`` (GPU, driver, power limit, clocks, torch, date) and ``how`` for the record."""

    value: float
    power_w: float | None
    brief: str
    where: str
    how: str

    @property
    def source(self) -> str:
        """The whole provenance, as results.json ``reference_source`` carries it."""
        return f"{self.where}; {self.how}"


H200_BRIEF = "lent 4× H200, 700 W, 2026-11-27, plain matmul loop"
H100_BRIEF = "lent H100, 700 W, 2026-11-25, the stress program"
#: The lent 4× H200 SXM node (NV18 between every pair), every GPU loaded at once.
H200_WHERE = (
    "lent 4× NVIDIA H200 (SXM, NV18 all pairs), driver 580.159.04, power limit 700 W (enforced 700 W), "
    "max SM clock 1980 MHz, SM clock under the load 1537–1560 MHz at 674–688 W, torch 2.11.0+cu130, "
    "2026-11-27"
)
H200_LOOP = (
    "plain torch.matmul loop n=8192 on all four GPUs at once (bench/gemm_baseline.py --iters 200, median "
    "of 5)"
)
H200_STRESS = (
    "the stress program on the same GPUs (gemm,hbm phases): bf16 678–681, tf32 353–356, fp8 1267–1284"
)
#: The lent single H100 SXM, the stress program of tests/fixtures/captured/stress/h100_all_phases_burnin120.jsonl.
H100_WHERE = (
    "lent NVIDIA H100 80GB HBM3 (SXM), driver 580.159.04, power limit 700 W, SM clock under sustained bf16 "
    "load 1350–1380 MHz at ~698 W, torch 2.11.0+cu130, 2026-11-25"
)
H100_STRESS = "the stress program, one GPU (tests/fixtures/captured/stress/h100_all_phases_burnin120.jsonl)"

H200_REFERENCES = {
    "gemm.bf16": Reference(
        682.0, 700.0, H200_BRIEF, H200_WHERE, f"{H200_LOOP}: per GPU 680–686; {H200_STRESS}"
    ),
    "gemm.tf32": Reference(
        352.0, 700.0, H200_BRIEF, H200_WHERE, f"{H200_LOOP}: per GPU 349–355; {H200_STRESS}"
    ),
    "gemm.fp8": Reference(
        1271.0,
        700.0,
        H200_BRIEF,
        H200_WHERE,
        f"{H200_LOOP}, torch._scaled_mm: per GPU 1268–1282; {H200_STRESS}",
    ),
    "hbm.copy": Reference(
        4210.0,
        700.0,
        "lent 4× H200, 700 W, 2026-11-27, plain device copy loop",
        H200_WHERE,
        f"{H200_LOOP}, device copy, bytes read + written: per GPU 4188–4233; the stress program 4240–4245",
    ),
    "hbm.triad": Reference(
        4384.0,
        700.0,
        "lent 4× H200, 700 W, 2026-11-27, the stress program",
        H200_WHERE,
        "the stress program's triad on the same GPUs (no plain-loop triad was measured)",
    ),
}
H100_REFERENCES = {
    "gemm.bf16": Reference(
        711.7,
        700.0,
        H100_BRIEF,
        H100_WHERE,
        f"{H100_STRESS}; a plain torch.matmul bf16 loop on such a GPU reached 780–798 TFLOP/s, the stress "
        "figure is the conservative one",
    ),
    "gemm.tf32": Reference(364.3, 700.0, H100_BRIEF, H100_WHERE, H100_STRESS),
    "gemm.fp8": Reference(1321.4, 700.0, H100_BRIEF, H100_WHERE, f"{H100_STRESS}, torch._scaled_mm"),
    "hbm.copy": Reference(3016.8, 700.0, H100_BRIEF, H100_WHERE, H100_STRESS),
    "hbm.triad": Reference(3051.1, 700.0, H100_BRIEF, H100_WHERE, H100_STRESS),
}


@dataclass(frozen=True)
class Sku:
    """One GPU model: the substrings its reported name must contain, its label, its datasheet peaks and the
    references measured on it (by metric; none for a model nobody measured here)."""

    label: str
    names: tuple[str, ...]
    bf16_tflops: float
    tf32_tflops: float
    fp8_tflops: float | None
    hbm_gbps: float
    references: Mapping[str, Reference] = field(default_factory=dict)

    def peak(self, metric: str) -> float | None:
        """The datasheet peak of a gpu.gemm or gpu.hbm metric (``gemm.bf16``, ``hbm.copy``): information."""
        if metric.startswith("hbm."):
            return self.hbm_gbps
        return {
            "gemm.bf16": self.bf16_tflops,
            "gemm.tf32": self.tf32_tflops,
            "gemm.fp8": self.fp8_tflops,
        }.get(metric)


#: Most specific first: "H100 NVL" and "H100 PCIe" before the plain "H100" of the SXM part.
SKUS: tuple[Sku, ...] = (
    Sku("H100 NVL", ("H100", "NVL"), 835.0, 417.5, 1670.0, 3900.0),
    Sku("H100 PCIe", ("H100", "PCIE"), 756.0, 378.0, 1513.0, 2000.0),
    Sku("H100 SXM", ("H100",), 989.0, 494.5, 1979.0, 3350.0, H100_REFERENCES),
    Sku("H200 NVL", ("H200", "NVL"), 835.0, 417.5, 1670.0, 4800.0),
    Sku("H200 SXM", ("H200",), 989.0, 494.5, 1979.0, 4800.0, H200_REFERENCES),
    Sku("A100 PCIe 80GB", ("A100", "PCIE", "80GB"), 312.0, 156.0, None, 1935.0),
    Sku("A100 PCIe 40GB", ("A100", "PCIE"), 312.0, 156.0, None, 1555.0),
    Sku("A100 SXM 40GB", ("A100", "40GB"), 312.0, 156.0, None, 1555.0),
    Sku("A100 SXM 80GB", ("A100",), 312.0, 156.0, None, 2039.0),
    Sku("B200", ("B200",), 2250.0, 1100.0, 4500.0, 8000.0),
)

#: The profile variables that set a reference for a site, by metric.
OVERRIDES = {
    "gemm.bf16": "gpu_ref_bf16_tflops",
    "gemm.tf32": "gpu_ref_tf32_tflops",
    "gemm.fp8": "gpu_ref_fp8_tflops",
    "hbm.copy": "gpu_ref_hbm_gbps",
    "hbm.triad": "gpu_ref_hbm_gbps",
}


def sku_of(name: str | None) -> Sku | None:
    """The model a GPU's reported name belongs to, or None for a GPU this table does not know."""
    upper = (name or "").upper()
    return next((sku for sku in SKUS if all(part in upper for part in sku.names)), None)
