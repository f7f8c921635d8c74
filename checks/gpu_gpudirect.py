"""gpu.gpudirect — the NICs can read and write GPU memory directly (GPUDirect RDMA).

Two ways exist, and the result says which one was found. The ``nvidia_peermem`` module (``nv_peer_mem`` from
older MLNX_OFED) registers GPU memory with the RDMA core. Or DMA-BUF: NVIDIA's *open* kernel module exports
GPU memory as dma-buf (``/proc/driver/nvidia/version`` says "Open Kernel Module"), and the RDMA core can
import dma-buf memory from Linux 5.12 on; NCCL uses it when both hold. Without either, NCCL stages every
inter-node byte through host memory.
"""

from __future__ import annotations

from collections.abc import Mapping

from diagnose.config.profiles import gpudirect_expected, no_gpu_reason, no_gpu_required
from diagnose.core.check import Check, Command, Facts
from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.vars import Vars
from diagnose.parsers.gpudirect import (
    DMABUF_MIN_KERNEL,
    parse_driver_version_file,
    parse_kernel_release,
    parse_modules,
)


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    modules = outputs["modules"]
    version = outputs["nvidia_version"]
    facts: Facts = {"modules_read": modules.ok and bool(modules.stdout.strip())}
    facts.update(parse_modules(modules.stdout))
    facts.update(parse_driver_version_file(version.stdout, version.exit_code))
    facts.update(parse_kernel_release(outputs["uname"].stdout))
    kernel = tuple(facts["kernel_version"] or ())
    facts["dmabuf_kernel"] = bool(kernel) and kernel >= DMABUF_MIN_KERNEL
    facts["dmabuf"] = facts["open_module"] and facts["dmabuf_kernel"]
    return facts


def dmabuf_reasoning(facts: Facts) -> str:
    """The DMA-BUF verdict with its two premises, so a reader can check them against the raw evidence."""
    minimum = ".".join(map(str, DMABUF_MIN_KERNEL))
    if not facts["nvidia_loaded"]:
        module = "no NVIDIA kernel module loaded (/proc/driver/nvidia/version absent)"
    elif facts["open_module"]:
        module = f"open NVIDIA kernel module {facts['driver']}"
    else:
        module = f"proprietary NVIDIA kernel module {facts['driver']} (DMA-BUF needs the open one)"
    kernel = facts["kernel"] or "unknown kernel"
    relation = ">=" if facts["dmabuf_kernel"] else "<"
    verdict = "possible" if facts["dmabuf"] else "not possible"
    return f"DMA-BUF {verdict}: {module}, Linux {kernel} ({relation} {minimum})"


def judge(facts: Facts, host_vars: Vars) -> Outcome:
    host = host_vars.host or "this host"
    wanted = "nvidia_peermem loaded, or DMA-BUF (open kernel module and Linux >= 5.12)"
    reasoning = dmabuf_reasoning(facts)
    reason = no_gpu_reason(host_vars)
    if reason:
        return Outcome("SKIP", f"GPUDirect not judged on {host}: {reason}", reasoning, wanted)
    required = gpudirect_expected(host_vars)
    if facts["peermem"]:
        observed = f"{facts['peermem'][0]} loaded"
        note = f"; {reasoning}" if facts["nvidia_loaded"] else ""
        return Outcome("PASS", f"GPUDirect RDMA through {observed} on {host}{note}", observed, wanted)
    if facts["dmabuf"]:
        return Outcome("PASS", f"GPUDirect RDMA through DMA-BUF on {host}: {reasoning}", reasoning, wanted)
    unread = "" if facts["modules_read"] else " (the module list could not be read)"
    missing = f"nvidia_peermem not loaded{unread}; {reasoning}"
    if not required:
        return Outcome(
            "SKIP",
            f"no GPUDirect RDMA on {host} ({missing}); not needed without an RDMA fabric",
            missing,
            wanted,
        )
    return Outcome(
        "FAIL",
        f"no GPUDirect RDMA on {host}: {missing}",
        missing,
        wanted,
        remediation="Load the peer-memory module (`modprobe nvidia-peermem`, and list it in "
        "/etc/modules-load.d/), or move to the open NVIDIA kernel module on Linux >= 5.12 so NCCL can use "
        "DMA-BUF. Without either, every inter-node byte is copied through host memory.",
    )


CHECK = Check(
    id="gpu.gpudirect",
    checklist="1",
    summary="nvidia_peermem loaded, or DMA-BUF GPUDirect available (open kernel module, Linux >= 5.12)",
    commands=(
        Command("modules", "lsmod 2>/dev/null || cat /proc/modules", timeout=10, required=False),
        Command("nvidia_version", "cat /proc/driver/nvidia/version", timeout=10, required=False),
        Command("uname", "uname -r", timeout=10),
    ),
    parse=parse,
    judge=judge,
    remediation="Enable GPUDirect RDMA: nvidia_peermem, or the open kernel module with DMA-BUF.",
    no_hardware=no_gpu_required,
    action="check_config",
)
