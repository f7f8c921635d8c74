"""The no-profile note and the profile suggested from what hosts report (diagnose/engine/profile_hint.py).

The facts are the checks' own, parsed from real captured outputs (tests/fixtures/captured, SOURCE files
there); the profiles are the packaged ones, so a profile edited out of shape shows here.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from diagnose.checks import gpu_topology, ib_port_state
from diagnose.config.profile_files import available_profiles, load_profile
from diagnose.core.hosts import Host
from diagnose.core.model import CommandOutput
from diagnose.core.vars import Vars
from diagnose.engine.profile_hint import (
    Hardware,
    hardware_of,
    hosts_without_profile,
    no_profile_note,
    suggest,
)
from tests.support.paths import CAPTURED

PROFILES = [load_profile(name) for name in available_profiles()]
NO_VARS = Vars({}, host="node1")


def out(fixture: str) -> CommandOutput:
    return CommandOutput(stdout=(CAPTURED / fixture).read_text(), exit_code=0)


def facts(smi: str | None, topo: str | None, ibstat: str | None) -> dict[str, Any]:
    """A host's facts as the host stage keeps them: by check id, from the checks' parsers."""
    found: dict[str, Any] = {}
    if smi and topo:
        found["gpu.topology"] = gpu_topology.CHECK.parse({"nvidia_smi": out(smi), "topo": out(topo)}, NO_VARS)
    found["ib.port_state"] = (
        ib_port_state.CHECK.parse({"ibstat": out(ibstat)}, NO_VARS) if ibstat else {"ports": [], "errors": []}
    )
    return found


H100 = (
    "nvidia_smi/h100_sxm_8gpu_565.txt",
    "topo/h100_8gpu_8nic_pix.txt",
    "ibstat/h100_cx7_ndr400_8hca_bond.txt",
)
A100_4 = (
    "nvidia_smi/a100_sxm_4gpu_555.txt",
    "topo/dgx_a100_mlx5_columns.txt",
    "ibstat/a100_hdr200_8hca_ibpanic.txt",
)
H100_VM = ("nvidia_smi/h100x1_580_vm.txt", "topo/h100x1_580_vm.txt", None)
H200_4 = ("nvidia_smi/h200x4_580.txt", "topo/h200x4_no_nic_ansi.txt", None)


def hardware(case: tuple[str | None, str | None, str | None]) -> Hardware:
    found = hardware_of(facts(*case))
    assert found is not None
    return found


def test_hardware_read_from_an_hgx_h100() -> None:
    hw = hardware(H100)
    assert (hw.gpu_model, hw.gpu_count, hw.nvlink_all_pairs) == ("NVIDIA H100 80GB HBM3", 8, True)
    ib = hw.fabric("InfiniBand")
    assert ib is not None and (ib.active, ib.rate_gbps) == (8, 400)
    # the bond's Ethernet port is kept apart from the compute fabric
    assert hw.describe().startswith(
        "8× NVIDIA H100 80GB HBM3, NVLink on every pair, 8 InfiniBand ports Active"
    )


@pytest.mark.parametrize(
    ("case", "profile"),
    [(H100, "h100-8x-ndr400"), (H100_VM, "single-node-pcie"), (H200_4, "single-node-nvlink")],
    ids=["hgx-h100", "one-gpu-vm", "h200x4-no-nic"],
)
def test_the_fitting_profile_is_suggested(case: tuple[str, str, str | None], profile: str) -> None:
    suggestion = suggest({"node1": hardware(case)}, PROFILES)
    assert suggestion is not None
    [group] = suggestion["groups"]
    assert group["profile"] == profile and group["differs"] == []
    assert suggestion["text"].endswith(f"-e diagnose_profile={profile}")


def test_no_packaged_profile_fits_four_a100s_the_closest_is_named_with_the_difference() -> None:
    suggestion = suggest({"dgx1": hardware(A100_4)}, PROFILES)
    assert suggestion is not None
    [group] = suggestion["groups"]
    assert group["profile"] is None and group["closest"] == "a100-8x-hdr200"
    assert group["differs"] == ["expects 8 GPUs, host has 4"]
    assert (
        "no packaged profile fits" in suggestion["text"] and "-e diagnose_profile" not in suggestion["text"]
    )


def test_efa_ports_are_matched_against_the_efa_profile_only() -> None:
    hw = hardware((None, None, "ibstat/efa_amzn_drivers_114.txt"))
    suggestion = suggest({"p5": hw}, PROFILES)
    assert suggestion is not None
    [group] = suggestion["groups"]
    assert group["closest"] == "p5-efa" and group["differs"] == [
        "expects 32 EFA (AWS Elastic Fabric Adapter) ports Active, host has 1"
    ]


def test_hosts_are_grouped_by_hardware_and_named_as_ranges() -> None:
    hosts = {f"gpu{i:02d}": hardware(H100) for i in range(1, 5)} | {"gpu05": hardware(A100_4), "gpu06": None}
    suggestion = suggest(hosts, PROFILES)
    assert suggestion is not None
    assert [g["hosts"] for g in suggestion["groups"]] == [["gpu01", "gpu02", "gpu03", "gpu04"], ["gpu05"]]
    assert suggestion["text"].startswith("suggested profile: gpu[01-04]: h100-8x-ndr400 (")
    assert "; gpu05: no packaged profile fits" in suggestion["text"]
    assert suggestion["text"].endswith("; -e diagnose_profile=h100-8x-ndr400"), "the one profile that fits"


def test_a_fleet_of_odd_hosts_is_counted_past_four_groups() -> None:
    base = hardware(H100)
    odd = {f"n{i}": replace(base, gpu_count=i) for i in range(1, 8)}  # seven GPU counts: seven groups
    suggestion = suggest(odd, PROFILES)
    assert suggestion is not None and len(suggestion["groups"]) == 7
    assert "; 3 more hardware groups in run.profile_suggestion" in suggestion["text"]


def test_nothing_read_nothing_suggested() -> None:
    assert hardware_of({}) is None
    assert suggest({"node1": None}, PROFILES) is None


def host(name: str, **values: Any) -> Host:
    return Host(name=name, vars=Vars(values, host=name))


def test_the_note_says_what_judging_without_a_profile_means() -> None:
    hosts = [host("node1"), host("node2")]
    note = no_profile_note(hosts)
    assert note is not None and note.startswith("no profile chosen (diagnose_profile unset): ")
    assert "fabric and GPU-count checks SKIP as not required" in note
    assert "only consistency and health rules judge" in note


def test_the_note_names_the_hosts_left_without_a_profile() -> None:
    hosts = [host(f"node{i}", diagnose_profile="h100-8x-ndr400") for i in range(1, 4)] + [
        host("node4"),
        host("node5"),
    ]
    assert hosts_without_profile(hosts) == ["node4", "node5"]
    note = no_profile_note(hosts)
    assert note is not None and "for node[4-5] (2 of 5 hosts)" in note
    assert no_profile_note(hosts[:3]) is None


def test_a_grace_gpu_is_not_taken_for_the_hgx_model_it_contains() -> None:
    """``NVIDIA GH200 480GB`` holds ``H200`` as a substring, as ``NVIDIA GB200`` holds ``B200``: the model is
    matched as a word, so an HGX H200 profile is not suggested for Grace GPUs."""
    grace = replace(hardware(H100), gpu_model="NVIDIA GH200 480GB")
    suggestion = suggest({"gh1": grace}, PROFILES)
    assert suggestion is not None
    [group] = suggestion["groups"]
    assert group["profile"] is None, group
    assert "-e diagnose_profile" not in suggestion["text"]
