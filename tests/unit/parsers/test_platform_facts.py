"""The platform parsers (issue 26: pci.acs, host.iommu, host.numa_balancing, host.cpu_governor,
gpu.persistence, host.time_sync, host.storage) against real captured outputs, one case file per output.

Cases live in ``tests/facts/<parser>/<case>.json`` and read fixtures from this module's own folders under
``tests/fixtures/captured`` (pci, kernel_settings, time_sync, storage, persistence), each named with its
origin in that folder's SOURCE.
"""

from __future__ import annotations

from diagnose.parsers.kernel_settings import (
    parse_cmdline,
    parse_cpu_governors,
    parse_iommu_groups,
    parse_iommu_units,
    parse_numa_balancing,
)
from diagnose.parsers.nvidia_smi import parse_persistence
from diagnose.parsers.pci import bridges_above, parse_lspci, redirecting
from diagnose.parsers.storage import df_command, nvme_disks, parse_df, parse_findmnt, parse_lsblk_pairs
from diagnose.parsers.time_sync import (
    parse_chronyc_tracking,
    parse_ntpq_peers,
    parse_time_sync,
    parse_timedatectl,
)
from tests.support.facts import Parse, fact_suite
from tests.support.paths import CAPTURED

FOLDERS = ("pci", "kernel_settings", "time_sync", "storage", "persistence")

PARSERS: dict[str, Parse] = {
    "lspci": lambda text, rc: parse_lspci(text),
    "cmdline": lambda text, rc: parse_cmdline(text),
    "iommu_units": lambda text, rc: parse_iommu_units(text),
    "iommu_groups": lambda text, rc: parse_iommu_groups(text),
    "numa_balancing": parse_numa_balancing,
    "cpu_governors": lambda text, rc: parse_cpu_governors(text),
    "chronyc_tracking": lambda text, rc: parse_chronyc_tracking(text),
    "ntpq_peers": lambda text, rc: parse_ntpq_peers(text),
    "timedatectl": lambda text, rc: parse_timedatectl(text),
    "time_sync": lambda text, rc: parse_time_sync(text),
    "findmnt": lambda text, rc: parse_findmnt(text),
    "df": lambda text, rc: parse_df(text),
    "lsblk_pairs": lambda text, rc: parse_lsblk_pairs(text),
    "persistence": lambda text, rc: parse_persistence(text),
}


test_case, test_every_parser_has_cases, test_every_fixture_is_used_and_sourced = fact_suite(PARSERS, FOLDERS)


def test_bridges_above_a_device_come_outermost_first() -> None:
    """The GPU of the Dell capture sits below the root port, the switch's upstream and its own downstream port."""
    devices = parse_lspci((CAPTURED / "pci/xe9680_h100_switch_and_nvswitch.txt").read_text())
    gpu = next(d for d in devices if d["bdf"] == "0000:19:00.0")
    assert [b["bdf"] for b in bridges_above(gpu, devices)] == ["0000:15:01.0", "0000:16:00.0", "0000:17:01.0"]
    nvswitch_port = next(d for d in devices if d["bdf"] == "0000:82:00.0")
    assert redirecting(nvswitch_port["acs"]) == ["ReqRedir", "CmpltRedir"]


def test_cmdline_stops_at_the_init_arguments() -> None:
    """What follows `--` goes to init: an `iommu=pt` there is not the kernel's."""
    facts = parse_cmdline("quiet iommu=off -- iommu=pt\n")
    assert facts == {"iommu_params": {"iommu": "off"}, "passthrough": False, "disabled": True}


def test_df_command_quotes_inventory_paths() -> None:
    assert df_command(["/raid", "/mnt/my data", "/"]) == "df -P -k -- / /raid '/mnt/my data'"


def test_nvme_disks_are_the_nvme_namespaces_of_type_disk() -> None:
    devices = parse_lsblk_pairs((CAPTURED / "storage/lsblk_gpud_inspur_two_nvme.txt").read_text())
    assert [d["NAME"] for d in nvme_disks(devices)] == ["nvme0n1", "nvme1n1"]
