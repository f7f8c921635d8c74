"""What the default target, this machine, has: learnt before the run so that the first run tells the truth.

`pip install . && diagnose run` on a laptop or a CI runner must not end in a wall of "nvidia-smi missing"
ERRORs. When no NVIDIA GPU is on this machine's PCI bus (and no NVIDIA device node exists), the default
run judges it with the ``cpu-testbed`` profile and says so. An NVIDIA GPU that is present but unusable (no
driver, a broken nvidia-smi) keeps the GPU profile: that is a fault the checks must report, not hide.
:class:`LocalMachine` is that default target as a host source.
"""

from __future__ import annotations

import glob
import shutil
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from diagnose.config.playbook import PROFILE_VARIABLE
from diagnose.targets.loading import read_sources
from diagnose.targets.model import Inventory
from diagnose.targets.sources import HostContext, HostSource

NVIDIA_VENDOR = "0x10de"
#: The profile this machine is judged with when it has no NVIDIA GPU and ``-e`` names none.
CPU_PROFILE = "cpu-testbed"
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


def default_inventory() -> Path:
    """The packaged inventory of this machine (``inventory/local.yaml``): localhost, no SSH."""
    return Path(str(resources.files("diagnose.inventories").joinpath("local.yaml")))


class LocalMachine(HostSource):
    """This machine, the target when no inventory and no scheduler is named; judged for what it is.

    Without an NVIDIA GPU (and without ``-e diagnose_profile=...``) it is judged with the
    :data:`CPU_PROFILE` profile, at the level of ``-e``, and :attr:`note` says why for the run's record.
    """

    def __init__(self) -> None:
        self.profile: str | None = None

    def add_hosts(self, inventory: Inventory, context: HostContext) -> None:
        read_sources([default_inventory()], inventory)
        if PROFILE_VARIABLE in context.extra_vars:
            return
        reason = no_gpu_reason()
        if reason:
            self.profile = CPU_PROFILE
            self.note = (
                f"{reason}: judged with the {CPU_PROFILE} profile (-e {PROFILE_VARIABLE}=... to choose)"
            )

    def vars_above(self, name: str) -> Mapping[str, Any]:
        return {PROFILE_VARIABLE: self.profile} if self.profile else {}
