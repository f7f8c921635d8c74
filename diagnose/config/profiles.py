"""The expected-value variables a profile (or any inventory level, or ``-e``) may set.

Profiles are data; this registry is their schema. A profile key that is not listed here is rejected with
the file and line, so a typo can never silently disable a rule. A variable left null (``~``) in a profile
means "no expectation" except where its meaning says otherwise (``expected_gpu_count``: any number ≥ 1).

The helpers at the end turn a host's variables into the reasons the rules print, so every check says the
same thing, in the same words, when a profile rules the hardware out.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from diagnose.core.hosts import Host
from diagnose.core.vars import Vars


@dataclass(frozen=True)
class Variable:
    name: str
    kind: type  # int, float, bool, str or list
    meaning: str


PROFILE_VARIABLES: dict[str, Variable] = {
    v.name: v
    for v in (
        Variable(
            "expected_gpu_count", int, "GPUs per host (null: any number from 1; 0: the host has no GPU)"
        ),
        Variable(
            "expected_gpu_model",
            str,
            "the GPU model as a word of its name, e.g. H100 (B200 does not match an NVIDIA GB200)",
        ),
        Variable("expected_nvlink", bool, "every GPU pair joined by NV#"),
        Variable(
            "expected_hca_count", int, "RDMA ports in State Active per host (0: no fabric, IB checks SKIP)"
        ),
        Variable("expected_link_rate_gbps", float, "minimum port rate in Gb/s"),
        Variable("expected_mtu", int, "active MTU on every RDMA port"),
        Variable("expected_link_layer", str, "InfiniBand, Ethernet (RoCE) or efa"),
        Variable(
            "expected_nic_per_gpu",
            bool,
            "every GPU has an RDMA NIC behind its own PCIe switch (PIX or PXB in nvidia-smi topo -m)",
        ),
        Variable(
            "expected_gpudirect",
            bool,
            "GPUDirect RDMA must be possible (nvidia_peermem loaded or DMA-BUF); defaults to true with a fabric",
        ),
        Variable("min_port_range", int, "minimum width of net.ipv4.ip_local_port_range"),
        Variable(
            "line_rate_gbps", float, "per-NIC line rate the inter-node busbw expectation is computed from"
        ),
        Variable("nvlink_busbw_gbps", float, "intra-node busbw the single-node expectation is computed from"),
        Variable(
            "nvlink_domain_busbw_gbps",
            float,
            "busbw of a collective whose ranks all sit in one multi-node NVLink domain (NVL72 trays of a rack)",
        ),
        Variable(
            "expected_compute_hcas",
            list,
            "the compute-fabric HCAs (names or globs, e.g. mlx5_[0-7]); default: the GPU-local NICs of topo -m",
        ),
        Variable(
            "expected_compute_hca_types",
            list,
            "CA types of the compute-fabric HCAs as ibstat prints them (MT4131: ConnectX-8); ports of other "
            "HCAs of the same link layer (an HGX B300's NVLink-switch management ConnectX-7s) are neither "
            "counted nor judged by the ib.* checks; null: every HCA of the fabric",
        ),
        Variable(
            "expected_nvlinks_per_gpu",
            int,
            "active NVLinks per GPU in `nvidia-smi nvlink --status` (18 on H100/H200 SXM, 12 on A100 SXM)",
        ),
        Variable(
            "expected_nvlink_speed_gbps", float, "speed of every active NVLink, GB/s as nvidia-smi prints it"
        ),
        Variable(
            "expected_nvswitch",
            bool,
            "GPUs joined through NVSwitch: fabric state must be Completed and the fabric manager must run",
        ),
        # Multi-node NVLink domains (checks/gpu_nvlink_domain.py, checks/gpu_imex.py, checks/nvlink_rack.py)
        Variable(
            "expected_nvlink_domain_gpus",
            int,
            "GPUs of one multi-node NVLink domain (72 on an NVL72 rack): every GPU must be registered in it "
            "(cluster UUID, clique) and IMEX must run; null: a host in no such domain SKIPs",
        ),
        Variable(
            "expected_imex_channels",
            int,
            "IMEX channels (/dev/nvidia-caps-imex-channels) a tray must expose; default 1 where an NVLink "
            "domain is expected, 0: not judged (a Kubernetes DRA driver creates them per workload)",
        ),
        Variable(
            "nvlink_rack",
            str,
            "the rack (NVLink domain) a tray belongs to, as the reports name it; default: the chassis serial "
            "nvidia-smi reports",
        ),
        Variable(
            "expected_pcie_width",
            int,
            "PCIe link width of every GPU (null: the GPU's own maximum); the generation is judged under load",
        ),
        Variable(
            "min_memlock_kib",
            int,
            "smallest acceptable `ulimit -l` in KiB (null: unlimited where an RDMA fabric is expected)",
        ),
        # Platform settings (checks/host_time_sync.py, checks/host_storage.py)
        Variable(
            "time_max_offset_ms",
            float,
            "largest |offset| of the clock from NTP time, ms, before host.time_sync WARNs (unsynchronised FAILs); "
            "default 50",
        ),
        Variable(
            "expected_mounts",
            list,
            "mount points that must be mounted read-write on every host (checkpoints, datasets, scratch)",
        ),
        Variable(
            "min_free_gib",
            float,
            "free space, GiB, that / and every expected mount must keep (less: host.storage WARNs)",
        ),
        Variable(
            "expected_nvme_count",
            int,
            "NVMe drives (lsblk disks nvme*n*) per host; null: not judged",
        ),
        Variable(
            "nvlink_crc_fail_delta",
            int,
            "CRC errors on one NVLink during the benchmarks that make gpu.nvlink FAIL (fewer: WARN); default 100",
        ),
        Variable(
            "ib_symbol_error_max_delta",
            int,
            "symbol errors on one IB port during the benchmarks that make ib.counters FAIL (fewer: WARN); default 10",
        ),
        # Optics and link flaps (checks/ib_optics.py, checks/ib_flaps.py)
        Variable(
            "max_effective_ber",
            float,
            "effective (post-FEC) bit error rate of a port above which ib.optics FAILs; default 1e-12",
        ),
        Variable(
            "optics_temp_margin_c",
            float,
            "a transceiver within this many °C of its own high temperature alarm makes ib.optics WARN; default 5",
        ),
        Variable(
            "flap_window_h",
            float,
            "hours of kernel log in which ib.flaps counts link downs (a nightly also stops at the previous run); "
            "default 24",
        ),
        Variable(
            "max_link_flaps",
            int,
            "link downs of one HCA in the window that make ib.flaps FAIL (1: WARN); default 3",
        ),
        Variable(
            "ib_symbol_errors_max_per_h",
            float,
            "symbol errors per hour on one IB port between two nightly runs above which ib.flaps FAILs; default 120",
        ),
        Variable(
            "expected_k8s_resources",
            list,
            "extended resources a pod must request (names or globs, e.g. rdma/hca_shared_devices_a, "
            "nvidia.com/hostdev, openshift.io/*)",
        ),
        Variable(
            "expected_k8s_networks",
            list,
            "Multus networks a pod must have attached with an IP (ns/name or bare name); "
            "default: those its k8s.v1.cni.cncf.io/networks annotation asks for",
        ),
        Variable("expected_k8s_subnet", str, "CIDR every expected Multus network address of a pod lies in"),
        Variable(
            "min_shm_mib", int, "smallest /dev/shm in a pod, MiB, for NCCL's SHM transport; default 1024"
        ),
        # Under load (checks/gpu_processes.py, checks/gpu_dcgm.py): set by the playbooks, not the hardware
        Variable(
            "foreign_processes_status",
            str,
            "what a compute process diagnose did not start on a GPU makes gpu.processes: FAIL (default; "
            "acceptance) or WARN (nightly, node-check)",
        ),
        Variable(
            "dcgm_diag_level",
            int,
            "dcgmi diag run level of gpu.dcgm: 0 off (default), 1 ~30 s, 2 ~2 min, 3 ~15 min, 4 ~1-2 h",
        ),
        Variable(
            "dcgm_diag_max_level",
            int,
            "highest dcgmi diag level run on this SKU whatever the playbook asks (the message says so); "
            "null: no cap",
        ),
        Variable(
            "dcgm_diag_timeout_s",
            float,
            "seconds before gpu.dcgm stops dcgmi as hung; default by level: 180, 600, 1800, 7200",
        ),
        # GPU stress (diagnose/probes/stress*.py): measured references by GPU model (stress_skus.py) unless set
        Variable(
            "gpu_ref_bf16_tflops",
            float,
            "bf16 TFLOP/s a healthy GPU here reaches, gpu.gemm's reference (null: the model's measured one, "
            "H100 SXM 711.7, H200 682)",
        ),
        Variable(
            "gpu_ref_tf32_tflops",
            float,
            "tf32 TFLOP/s reference of gpu.gemm (null: the model's measured one, H100 SXM 364.3, H200 352)",
        ),
        Variable(
            "gpu_ref_fp8_tflops",
            float,
            "fp8 TFLOP/s reference of gpu.gemm (null: the model's measured one, H100 SXM 1321.4, H200 1271)",
        ),
        Variable(
            "gpu_ref_hbm_gbps",
            float,
            "HBM copy and triad GB/s reference of gpu.hbm (null: the model's measured ones, H100 SXM "
            "3016.8 / 3051.1, H200 4210 / 4384)",
        ),
        Variable(
            "gemm_max_below_ref_pct",
            float,
            "a GEMM this many % below its reference (scaled to the GPU's power limit) FAILs gpu.gemm; default 15",
        ),
        Variable(
            "hbm_max_below_ref_pct",
            float,
            "a copy or triad this many % below its reference (scaled to the power limit) FAILs gpu.hbm; "
            "default 15",
        ),
        Variable(
            "memtest_seconds",
            float,
            "seconds of pattern passes of gpu.memtest (at least one pass); default 30",
        ),
        Variable(
            "memtest_min_fraction",
            float,
            "share of the free GPU memory gpu.memtest must cover, else WARN; default 0.9",
        ),
        Variable(
            "burnin_minutes",
            float,
            "minutes of sustained load of gpu.burnin (0: none): acceptance playbooks 10, nightly 0",
        ),
        Variable(
            "burnin_max_drop_pct",
            float,
            "a GPU whose last burn-in minute is this many % slower than its first WARNs gpu.burnin; default 10",
        ),
        # Fleet-relative verdicts (diagnose/probes/fleet_judge.py, diagnose/probes/fleet.py, history instability)
        Variable(
            "fleet_mad_k",
            float,
            "k: a host is odd among its peers when its robust z (0.6745 × deviation / MAD) is below −k; default 3.5",
        ),
        Variable(
            "fleet_min_rel_dev_pct",
            float,
            "a host is odd only when also this many % below the fleet median; default 5",
        ),
        Variable(
            "min_host_copy_gbps",
            float,
            "floor for pinned host↔device copies per GPU, GB/s (the fleet's median below it is a cluster-wide FAIL)",
        ),
        Variable(
            "min_peer_copy_gbps",
            float,
            "floor for GPU peer copies per GPU pair, GB/s (the fleet's median below it is a cluster-wide FAIL)",
        ),
        Variable(
            "history_unstable_flips",
            int,
            "PASS↔FAIL changes of one check on one host within history_unstable_window runs that make it "
            "history.unstable; default 3",
        ),
        Variable(
            "history_unstable_window",
            int,
            "how many recent runs of the series (this one included) history.unstable looks at; default 6",
        ),
        # Training trace (checklist section 4: diagnose/trace/judge.py, the training probe, diagnose trace)
        Variable(
            "train_min_overlap_ratio",
            float,
            "share of communication hidden behind compute below which train.overlap FAILs "
            "(when the exposed part also reaches train_min_exposed_comm_ms and train_max_exposed_comm_pct of "
            "the step); default 0.7",
        ),
        Variable(
            "train_max_exposed_comm_pct",
            float,
            "exposed communication, % of the step, under which train.overlap passes whatever the ratio (also "
            "under train_min_exposed_comm_ms); default 5",
        ),
        Variable(
            "train_min_exposed_comm_ms",
            float,
            "exposed communication per step, ms, under which train.overlap passes whatever the ratio; default 1",
        ),
        Variable(
            "train_max_tail_pct",
            float,
            "last-bucket tail (backward end → last all-reduce end), % of the step, above which train.tail WARNs; "
            "default 10",
        ),
        Variable(
            "train_max_syncs_per_step",
            int,
            "host-device syncs per step in the user's code above which train.sync WARNs (DDP's, "
            "GradScaler's, the optimizer's and a communicator's setup syncs are not counted); default 0",
        ),
        Variable(
            "train_max_input_stall_pct",
            float,
            "input wait (GPU idle during DataLoader fetches; on CPU traces the DataLoader time), % of the step, "
            "above which train.input WARNs; default 5",
        ),
        Variable(
            "train_fabric_slowdown",
            float,
            "communication per step over the all-reduce time the measured busbw predicts beyond which "
            "train.overlap blames the fabric, not the job; default 2",
        ),
        Variable(
            "train_fabric_busbw_gbps",
            float,
            "all_reduce busbw (GB/s) to judge traces against when no collectives stage measured one "
            "(diagnose trace)",
        ),
        Variable(
            "train_grad_bytes",
            int,
            "gradient bytes all-reduced per step, when the trace does not record them (record_param_comms)",
        ),
        # KV-cache transfer and serving (checklist section 5: diagnose/inference/judge.py, diagnose/inference/serving.py)
        Variable(
            "kv_min_link_fraction",
            float,
            "packed KV transfer of the longest request below this share of the pair's link figure FAILs "
            "infer.kv_transfer; default 0.5",
        ),
        Variable(
            "kv_p99_p50_max",
            float,
            "p99/p50 of a device-to-device KV transfer above which it WARNs; default 1.5",
        ),
        Variable(
            "kv_nvlink_gbps",
            float,
            "one-way GB/s an NV# pair should carry for KV blocks; default nvlink_busbw_gbps",
        ),
        Variable(
            "kv_pcie_gbps", float, "one-way GB/s a PCIe-only GPU pair (PIX to SYS) should carry; default 25"
        ),
        Variable(
            "kv_block_overhead_max_us",
            float,
            "extra µs per block of moving KV blocks one by one instead of packed, above which it WARNs; default 50",
        ),
        Variable(
            "kv_plain_min_fraction",
            float,
            "a packed KV transfer's message below this share of a plain send/recv of the same bytes "
            "measured alongside WARNs; default 0.85",
        ),
        Variable(
            "kv_copy_min_fraction",
            float,
            "a packed KV transfer's gather or scatter below this share of a device copy of the same bytes "
            "on that GPU WARNs; default 0.5",
        ),
        Variable("serving_ttft_p99_ms", float, "SLO: p99 time to first token of a serving benchmark, ms"),
        Variable("serving_tpot_p99_ms", float, "SLO: p99 time per output token of a serving benchmark, ms"),
    )
}

#: Variables no longer read, and what replaced them: an inventory or profile still setting one is told so.
REPLACED = {
    "gemm_min_fraction": "gemm_max_below_ref_pct",
    "gemm_fp8_min_fraction": "gemm_max_below_ref_pct",
    "hbm_min_fraction": "hbm_max_below_ref_pct",
    "gpu_peak_bf16_tflops": "gpu_ref_bf16_tflops",
    "gpu_peak_tf32_tflops": "gpu_ref_tf32_tflops",
    "gpu_peak_fp8_tflops": "gpu_ref_fp8_tflops",
    "gpu_hbm_gbps": "gpu_ref_hbm_gbps",
}


def replaced_note(name: str, where: str = "") -> str:
    """The one line that names what replaced a retired variable (``where``: `` (set for gpu1)``)."""
    return (
        f"variable {name!r}{where} is no longer read: replaced by {REPLACED[name]} (GPUs are judged against a "
        "measured reference of their model and their peers, not a share of the datasheet peak; "
        "docs/node-health.md)"
    )


def profile_label(host_vars: Vars) -> str:
    """How messages name the profile: ``profile h100-8x-ndr400``, or a neutral phrase without one."""
    name = host_vars.str("diagnose_profile")
    return f"profile {name}" if name else "the expected values in use"


def no_fabric_reason(host_vars: Vars) -> str | None:
    """Why this host is not expected to have an RDMA fabric, or None if it is (or nothing is said)."""
    count = host_vars.int("expected_hca_count")
    if count == 0:
        return f"{profile_label(host_vars)} expects no RDMA fabric (expected_hca_count 0)"
    if count is None:
        return f"{profile_label(host_vars)} sets no expected_hca_count, so no RDMA fabric is required"
    return None


def no_gpu_reason(host_vars: Vars) -> str | None:
    """Why this host is not expected to have GPUs, or None if it is (null means any number from one)."""
    if host_vars.int("expected_gpu_count") == 0:
        return f"{profile_label(host_vars)} expects no GPU (expected_gpu_count 0)"
    return None


#: Why a host judged without a profile may lack GPUs, their tools and NCCL (docs/dry-run.md).
NO_PROFILE_NO_GPU = "no profile chosen (diagnose_profile unset), so no GPU is required"


def no_gpu_required(host_vars: Vars) -> str | None:
    """Why a missing GPU tool (nvidia-smi) or a missing NCCL is not a fault here, or None where it is.

    ``no_gpu_reason`` when the profile rules GPUs out; otherwise, where no profile is chosen and nothing sets
    ``expected_gpu_count``, nothing expects a GPU either, as the run's note says. Unlike ``no_gpu_reason``,
    which rules call to SKIP whatever the host shows, this only excuses what is absent: a host without a
    profile whose nvidia-smi answers still has its GPUs' health judged.
    """
    reason = no_gpu_reason(host_vars)
    if reason or host_vars.str("diagnose_profile") or "expected_gpu_count" in host_vars:
        return reason
    return NO_PROFILE_NO_GPU


def fabric_expected(host_vars: Vars) -> bool:
    return (host_vars.int("expected_hca_count") or 0) > 0


def gpudirect_expected(host_vars: Vars) -> bool:
    """GPUDirect RDMA must work here: ``expected_gpudirect``, which defaults to true where an RDMA fabric is
    expected. gpu.gpudirect, pci.acs and host.iommu all ask this one question."""
    return bool(host_vars.bool("expected_gpudirect", fabric_expected(host_vars)))


def no_nvlink_reason(host_vars: Vars) -> str | None:
    """Why this host is not expected to have NVLink, or None if it is (or nothing is said)."""
    if host_vars.bool("expected_nvlink") is False:
        return f"{profile_label(host_vars)} expects no NVLink (expected_nvlink false)"
    return no_gpu_reason(host_vars)


def no_nvlink_required(host_vars: Vars) -> str | None:
    """``no_nvlink_reason``, or why no GPU is required at all: what excuses gpu.nvlink's missing tool."""
    return no_nvlink_reason(host_vars) or no_gpu_required(host_vars)


# expected_busbw_<collective>_gbps: the benchmark stage's per-collective override (diagnose/benchmarks/expect.py).
_BUSBW_OVERRIDE = re.compile(r"expected_busbw_[a-z_]+_gbps")


def unknown_variable_warnings(hosts: Sequence[Host], settings: Iterable[str] = ()) -> list[str]:
    """A warning per variable that looks like an expected value but is none: ``expectd_mtu`` would
    otherwise leave the profile's ``expected_mtu`` in force without a word. Site variables of any other
    shape are the inventory's own business and pass silently; ``settings`` are the host settings a run
    checks (a benchmark's ``min_nic_bw_fraction`` is one, not a profile value)."""
    known = set(PROFILE_VARIABLES) | set(settings)
    seen: dict[str, list[str]] = {}
    retired: dict[str, list[str]] = {}
    for host in hosts:
        for name in host.vars:
            if name in known or _BUSBW_OVERRIDE.fullmatch(name):
                continue
            if name in REPLACED:
                retired.setdefault(name, []).append(host.name)
                continue
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.85)
            if close or name.startswith(("expected_", "min_")):
                seen.setdefault(name, []).append(host.name)
    warnings = []
    for name, names in sorted(seen.items()):
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else f" (known: {', '.join(sorted(known))})"
        where = names[0] if len(names) == 1 else f"{len(names)} hosts"
        warnings.append(f"variable {name!r} (set for {where}) is not a known expected value{hint}")
    for name, names in sorted(retired.items()):
        where = names[0] if len(names) == 1 else f"{len(names)} hosts"
        warnings.append(replaced_note(name, f" (set for {where})"))
    return warnings
