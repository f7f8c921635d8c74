"""What each GPU model can do at most: dense tensor-core TFLOP/s per data type and HBM bandwidth.

gpu.gemm and gpu.hbm judge a GPU against a fraction of its own model's peak (``gemm_min_fraction``,
``hbm_min_fraction``), so the peak is looked up from the name the GPU reports (``NVIDIA H100 80GB HBM3``)
rather than from the cluster's profile: one profile then serves H100 SXM, PCIe and NVL nodes alike, and
an H100 PCIe card slipped into an SXM fleet is judged by what it can do. Any figure can be overridden
(``gpu_peak_bf16_tflops``, ``gpu_peak_tf32_tflops``, ``gpu_peak_fp8_tflops``, ``gpu_hbm_gbps``) at any
inventory level or with ``-e``.

Figures are NVIDIA's datasheet values without sparsity (the datasheets print the sparse ones, twice
these): H100 SXM5 / H200 SXM 989 bf16, 494.5 tf32, 1979 fp8; H100 PCIe 756 / 378 / 1513 at 2.0 TB/s;
H100 NVL 835 / 417.5 / 1670 at 3.9 TB/s; H200 4.8 TB/s (NVL at 835 / 417.5 / 1670); A100 SXM4 312 bf16,
156 tf32, no fp8, 2.039 TB/s (80GB) or 1.555 TB/s (40GB); A100 PCIe 80GB 1.935 TB/s. B200 (HGX, 1000 W):
2250 bf16, 1100 tf32, 4500 fp8, 8 TB/s, as glennklockwood.com/garden/processors/B200 tabulates NVIDIA's
HGX B200 figures. GB/s here is 1e9 bytes per second, as HBM bandwidth is quoted.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Sku:
    """One GPU model: the substrings its reported name must contain, its label and its dense peaks."""

    label: str
    names: tuple[str, ...]
    bf16_tflops: float
    tf32_tflops: float
    fp8_tflops: float | None
    hbm_gbps: float

    def peak(self, metric: str) -> float | None:
        """The peak of a gpu.gemm or gpu.hbm metric (``gemm.bf16``, ``hbm.copy``)."""
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
    Sku("H100 SXM", ("H100",), 989.0, 494.5, 1979.0, 3350.0),
    Sku("H200 NVL", ("H200", "NVL"), 835.0, 417.5, 1670.0, 4800.0),
    Sku("H200 SXM", ("H200",), 989.0, 494.5, 1979.0, 4800.0),
    Sku("A100 PCIe 80GB", ("A100", "PCIE", "80GB"), 312.0, 156.0, None, 1935.0),
    Sku("A100 PCIe 40GB", ("A100", "PCIE"), 312.0, 156.0, None, 1555.0),
    Sku("A100 SXM 40GB", ("A100", "40GB"), 312.0, 156.0, None, 1555.0),
    Sku("A100 SXM 80GB", ("A100",), 312.0, 156.0, None, 2039.0),
    Sku("B200", ("B200",), 2250.0, 1100.0, 4500.0, 8000.0),
)

#: The profile variables that override a peak, by metric.
OVERRIDES = {
    "gemm.bf16": "gpu_peak_bf16_tflops",
    "gemm.tf32": "gpu_peak_tf32_tflops",
    "gemm.fp8": "gpu_peak_fp8_tflops",
    "hbm.copy": "gpu_hbm_gbps",
    "hbm.triad": "gpu_hbm_gbps",
}


def sku_of(name: str | None) -> Sku | None:
    """The model a GPU's reported name belongs to, or None for a GPU this table does not know."""
    upper = (name or "").upper()
    return next((sku for sku in SKUS if all(part in upper for part in sku.names)), None)
