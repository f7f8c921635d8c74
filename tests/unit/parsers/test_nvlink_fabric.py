"""The NVLink fabric and IMEX parsers against real outputs of GB200/GB300 trays, an HGX B200 and a GH200 pair.

The fixtures in tests/fixtures/captured/{nvlink_fabric,imex} name their sources in those folders' SOURCE.
"""

from __future__ import annotations

import pytest

from diagnose.core.check import ParseError
from diagnose.parsers.nvlink_fabric import (
    clique,
    health_mask_faults,
    healthy,
    in_domain,
    parse_fabric_text,
    parse_fabric_xml,
    parse_imex_nodes,
    registered,
    unconnected,
)
from tests.support.paths import CAPTURED


def _read(relative: str) -> str:
    return (CAPTURED / relative).read_text()


def test_gb200_tray_one_clique_registered_healthy() -> None:
    gpus = parse_fabric_xml(_read("nvlink_fabric/gb200_tray_p6e_qx_fabric.xml"))
    assert [g["bus_id"] for g in gpus] == [
        "00000000:29:00.0",
        "00000000:3F:00.0",
        "00000000:9C:00.0",
        "00000000:B2:00.0",
    ]
    assert {g["clique_id"] for g in gpus} == {2}
    assert {g["cluster_uuid"] for g in gpus} == {"3a7f9c21-5b6e-4d08-9e14-c2d8f0a6b953"}
    assert [g["module_id"] for g in gpus] == [2, 1, 4, 3]
    assert {(g["tray_index"], g["slot"], g["chassis_serial"]) for g in gpus} == {(4, 14, "1654000000101")}
    assert all(registered(g) and healthy(g) and in_domain(g) for g in gpus)
    assert {g["name"] for g in gpus} == {"NVIDIA GB200"}


def test_gb300_tray_clique_32766() -> None:
    gpus = parse_fabric_xml(_read("nvlink_fabric/gb300_tray_qx_fabric.xml"))
    assert [g["bus_id"][:8] for g in gpus] == ["00000008", "00000009", "00000018", "00000019"]
    assert {g["clique_id"] for g in gpus} == {32766}
    assert {g["tray_index"] for g in gpus} == {15}
    assert all(registered(g) and healthy(g) and in_domain(g) for g in gpus)


def test_hgx_b200_has_a_fabric_but_no_domain() -> None:
    """Completed/Success with clique 0 and a zero UUID: NVSwitch on the board, no multi-node domain."""
    (gpu,) = parse_fabric_xml(_read("nvlink_fabric/b200_hgx_gpu0_qx_fabric.xml"))
    assert registered(gpu) and healthy(gpu)
    assert not in_domain(gpu)
    assert gpu["clique_id"] == 0
    assert gpu["tray_index"] is None and gpu["chassis_serial"] is None and gpu["module_id"] == 6


def test_insufficient_resources_is_completed_but_not_registered() -> None:
    (gpu,) = parse_fabric_text(_read("nvlink_fabric/gb_azure_q_fabric_insufficient_resources.txt"))
    assert gpu["state"] == "Completed"
    assert gpu["status"] == "Insufficient Resources"
    assert gpu["clique_id"] == 0
    assert not registered(gpu)
    assert not in_domain(gpu)


def test_unhealthy_summary_in_a_grep_cut_block() -> None:
    (gpu,) = parse_fabric_text(_read("nvlink_fabric/mnnvl_q_fabric_grep_unhealthy.txt"))
    assert registered(gpu) and in_domain(gpu)
    assert gpu["clique_id"] == 2
    assert gpu["cluster_uuid"] == "7b21e6d9-0c43-4f5a-8d92-e5a1c3b07f64"
    assert gpu["health"] == "Unhealthy" and gpu["bandwidth"] == "Full"
    assert not healthy(gpu)


def test_text_blocks_are_told_apart_by_gpu_header() -> None:
    """Two GPUs of ``nvidia-smi -q``: each Fabric block belongs to the GPU header above it, and the
    block ends where a field of the GPU's own level follows it."""
    block = _read("nvlink_fabric/mnnvl_q_fabric_grep_unhealthy.txt").replace("--\n", "")
    text = (
        f"GPU 00000008:01:00.0\n{block}    Processes : None\n"
        f"GPU 00000009:01:00.0\n{_read('nvlink_fabric/gb_azure_q_fabric_insufficient_resources.txt')}"
    )
    first, second = parse_fabric_text(text)
    assert first["bus_id"] == "00000008:01:00.0" and first["health"] == "Unhealthy"
    assert second["bus_id"] == "00000009:01:00.0" and second["status"] == "Insufficient Resources"


def test_clique_reads_decimal_and_nccl_hex() -> None:
    assert clique("32766") == clique("0x7ffe") == 32766
    assert clique("N/A") is None


def test_not_xml_is_a_parse_error() -> None:
    with pytest.raises(ParseError):
        parse_fabric_xml(_read("nvlink_fabric/gb_azure_q_fabric_insufficient_resources.txt"))


def test_imex_two_ready_nodes_all_connected() -> None:
    status = parse_imex_nodes(_read("imex/gh200_2node_ctl_N_ready.txt"))
    assert status["nodes"] == [
        {"index": 0, "address": "10.42.7.11", "state": "READY"},
        {"index": 1, "address": "10.42.7.12", "state": "READY"},
    ]
    assert status["matrix"] == {0: {0: "C", 1: "C"}, 1: {0: "C", 1: "C"}}
    assert status["domain_state"] == "UP"
    assert unconnected(status) == []


def test_imex_legend_lines_are_not_nodes_and_a_lost_peer_is_found() -> None:
    """The legend's one-letter lines (``N - Never Connected``) are not matrix rows; a D cell names its node."""
    text = _read("imex/gh200_2node_ctl_N_ready.txt").replace("       0        C  C", "       0        C  D")
    status = parse_imex_nodes(text)
    assert set(status["matrix"]) == {0, 1}
    assert unconnected(status) == [1]


def test_health_mask_reads_nvmls_two_bit_fields() -> None:
    """0xaa (the published NCCL lines) is four FALSE fields; 0x80 reports only access timeout, FALSE; 0 is
    no support; a 1 in a field is its condition holding."""
    assert health_mask_faults(0xAA) == health_mask_faults(0x80) == health_mask_faults(0) == []
    assert health_mask_faults(0x9A) == ["route unhealthy"]
    assert health_mask_faults(0x55) == [
        "bandwidth degraded",
        "route recovery in progress",
        "route unhealthy",
        "access timeout recovery",
    ]
