"""What the default target, this machine, has: learnt before the run so that the first run tells the truth.

The README's first command (install, then `diagnose run`) on a laptop or a CI runner must not end in a
wall of "nvidia-smi missing" ERRORs. When no NVIDIA GPU is on this machine's PCI bus (and no NVIDIA device
node exists), the default run judges it with the ``cpu-testbed`` profile and says so. An NVIDIA GPU that
is present but unusable (no driver, a broken nvidia-smi) keeps the GPU profile: that is a fault the checks
must report, not hide.

Nobody told the default run what this machine should have, so where ``nvidia-smi topo -m`` answers, the
profile follows what it shows (one call, well under a second): GPUs joined by NV# on every pair keep
``single-node-nvlink`` (NVLink and its busbw are judged); one GPU, or GPUs with a PCIe path between some
pair (PCIe-only SKUs such as H100 PCIe, L40S; a cloud VM holding one SXM GPU), get ``single-node-pcie``,
which expects no NVLink and sets no intra-node busbw figure. The GPU count is not turned into an
expectation: read from the same machine, it could only agree with itself. ``-e diagnose_profile=...``
(or an inventory) overrides all of this. :class:`LocalMachine` is that default target as a host source.
"""

from __future__ import annotations

import glob
import shutil
from collections.abc import Callable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from diagnose.config.playbook import PROFILE_VARIABLE
from diagnose.core.check import ParseError
from diagnose.core.process import ProgramError, run_program
from diagnose.parsers.nvidia_smi import nvlink_links, parse_topo
from diagnose.targets.loading import read_sources
from diagnose.targets.model import Inventory
from diagnose.targets.sources import HostContext, HostSource

NVIDIA_VENDOR = "0x10de"
#: The profile this machine is judged with when it has no NVIDIA GPU and ``-e`` names none.
CPU_PROFILE = "cpu-testbed"
#: The profile of the default target when its GPUs are joined by NVLink (inventory/local.yaml names it).
NVLINK_PROFILE = "single-node-nvlink"
#: The profile of the default target with one GPU, or GPUs without NVLink between some pair.
PCIE_PROFILE = "single-node-pcie"
#: ``nvidia-smi topo -m`` answers in well under a second; a driver that hangs is left to the checks.
TOPO_TIMEOUT_S = 20.0
# PCI class 0x03xxxx is a display controller: VGA (0x0300) or 3D (0x0302) for data-centre GPUs. NVIDIA
# NVSwitches (0x0680) and audio functions (0x0403) are not GPUs.
_GPU_CLASS_PREFIX = "0x03"


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip().lower()
    except OSError:
        return ""


def nvidia_gpus_on_pci(sysfs: str = "/sys/bus/pci/devices") -> int | None:
    """How many NVIDIA display controllers the PCI bus lists; None when the bus cannot be read."""
    devices = glob.glob(f"{sysfs}/*")
    if not devices:
        return None
    return sum(
        1
        for device in devices
        if _read(f"{device}/vendor") == NVIDIA_VENDOR
        and _read(f"{device}/class").startswith(_GPU_CLASS_PREFIX)
    )


def no_gpu_reason(sysfs: str = "/sys/bus/pci/devices", dev: str = "/dev") -> str | None:
    """Why this machine has no NVIDIA GPU, or None when it has one (or might: then nothing is assumed)."""
    if glob.glob(f"{dev}/nvidia[0-9]*"):
        return None
    on_pci = nvidia_gpus_on_pci(sysfs)
    if on_pci:
        return None
    if on_pci is None and shutil.which("nvidia-smi"):
        return None  # no PCI view (a container): nvidia-smi's presence says a GPU may be there
    where = "no NVIDIA GPU on the PCI bus" if on_pci == 0 else "no PCI bus visible"
    return f"{where}, no /dev/nvidia* device" + ("" if shutil.which("nvidia-smi") else ", no nvidia-smi")


def profile_for_topology(topo_text: str) -> tuple[str, str] | None:
    """(profile, why) for a machine whose ``nvidia-smi topo -m`` printed ``topo_text``; None when it
    shows no GPU or cannot be read (the checks then say what is wrong, under the GPU profile)."""
    try:
        topo = parse_topo(topo_text)
    except ParseError:
        return None
    gpus = topo["gpus"]
    if not gpus:
        return None
    if len(gpus) == 1:
        return PCIE_PROFILE, "1 GPU, so no GPU pair to join by NVLink"
    pairs = [(a, b) for i, a in enumerate(gpus) for b in gpus[i + 1 :]]
    pcie = [f"{a}-{b} {topo['links'][a][b]}" for a, b in pairs if nvlink_links(topo["links"][a][b]) is None]
    if not pcie:
        return NVLINK_PROFILE, f"{len(gpus)} GPUs, NVLink (NV#) on every pair"
    shown = ", ".join(pcie[:3]) + (f" and {len(pcie) - 3} more" if len(pcie) > 3 else "")
    return PCIE_PROFILE, f"{len(gpus)} GPUs, {len(pcie)} of {len(pairs)} pairs without NVLink ({shown})"


def local_topology() -> str | None:
    """This machine's ``nvidia-smi topo -m``, or None when nvidia-smi is missing, fails or hangs."""
    try:
        done = run_program(["nvidia-smi", "topo", "-m"], TOPO_TIMEOUT_S)
    except ProgramError:
        return None
    return done.stdout if done.returncode == 0 else None


def default_inventory() -> Path:
    """The packaged inventory of this machine (``inventory/local.yaml``): localhost, no SSH."""
    return Path(str(resources.files("diagnose.inventories").joinpath("local.yaml")))


class LocalMachine(HostSource):
    """This machine, the target when no inventory and no scheduler is named; judged for what it is.

    Without ``-e diagnose_profile=...`` the profile follows the machine, at the level of ``-e``: the
    :data:`CPU_PROFILE` without an NVIDIA GPU, else the one :func:`profile_for_topology` picks from
    ``topology`` (default: this machine's ``nvidia-smi topo -m``); :attr:`note` says why for the run's record.
    ``gpu_absent`` says why there is no GPU (default: this machine's PCI bus and device nodes).
    """

    def __init__(
        self,
        topology: Callable[[], str | None] = local_topology,
        gpu_absent: Callable[[], str | None] = no_gpu_reason,
    ) -> None:
        self.profile: str | None = None
        self.topology = topology
        self.gpu_absent = gpu_absent

    def add_hosts(self, inventory: Inventory, context: HostContext) -> None:
        read_sources([default_inventory()], inventory)
        if PROFILE_VARIABLE in context.extra_vars:
            return
        reason = self.gpu_absent()
        if reason:
            self.profile = CPU_PROFILE
        else:
            text = self.topology()
            chosen = profile_for_topology(text) if text is not None else None
            if chosen is None:
                return
            self.profile, reason = chosen
            reason += " (nvidia-smi topo -m)"
        self.note = f"{reason}: judged with the {self.profile} profile (-e {PROFILE_VARIABLE}=... to choose)"

    def vars_above(self, name: str) -> Mapping[str, Any]:
        return {PROFILE_VARIABLE: self.profile} if self.profile else {}
