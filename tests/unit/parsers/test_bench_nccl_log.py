"""NCCL INFO log → transport, on real logs (tests/facts/nccl_log/): our 4×H200 captures and public ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from diagnose.benchmarks.fabric_nics import mnnvl_phrase
from diagnose.parsers.nccl_log import parse_nccl_log, summarize_transport, transport_kind
from tests.support.paths import FACTS

CASES = sorted((FACTS / "nccl_log").iterdir())


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_nccl_log_case(case: Path) -> None:
    expected = json.loads((case / "expected.json").read_text())
    assert expected["source"], "every fixture names where it was captured"
    facts = parse_nccl_log((case / "input.log").read_text())
    rank_hosts = {int(k): v for k, v in expected.get("rank_hosts", {}).items()} or None
    summary = summarize_transport([facts], rank_hosts)
    for key, value in expected["summary"].items():
        assert summary[key] == value, key
    for key, value in expected.get("facts", {}).items():
        assert facts[key] == value, key


@pytest.mark.parametrize(
    ("via", "kind"),
    [
        ("NET/IB/0(1)/GDRDMA", "NET/IB"),
        ("NET/IBext/5/GDRDMA", "NET/IB"),
        ("NET/AWS Libfabric/7/GDRDMA/Shared", "NET/OFI"),
        ("NET/Libfabric/0/GDRDMA/flush=None", "NET/OFI"),
        ("NET/Socket/3", "NET/Socket"),
        ("P2P/CUMEM/read", "P2P/CUMEM"),
        ("P2P/direct pointer/read", "P2P/direct"),
        ("SHM/direct/direct", "SHM"),
        ("direct shared memory", "SHM"),
    ],
)
def test_transport_names_seen_in_the_wild(via: str, kind: str) -> None:
    assert transport_kind(via) == kind


def test_one_host_falling_back_to_tcp_is_named() -> None:
    """Two nodes on IB, a third whose lines show NET/Socket: the summary keeps both, Socket named by host."""
    text = "\n".join(
        [
            "nodea:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA",
            "nodeb:2:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [receive] via NET/IB/0/GDRDMA",
            "nodeb:2:2 [0] NCCL INFO Channel 00/0 : 1[0] -> 2[0] [send] via NET/Socket/0",
            "nodec:3:3 [0] NCCL INFO Channel 00/0 : 1[0] -> 2[0] [receive] via NET/Socket/0",
        ]
    )
    summary = summarize_transport([parse_nccl_log(text)])
    assert summary["inter_node"] == "NET/IB"
    assert summary["inter_node_all"] == {"NET/IB": ["nodea", "nodeb"], "NET/Socket": ["nodeb", "nodec"]}


def test_mnnvl_between_trays_is_an_inter_node_nvlink_path() -> None:
    """Two trays of one rack: the published one-tray connection line, printed on tray a for a peer whose
    rank lives on tray b (composed: the rank→host map is the launcher's). Unlike other P2P kinds, the edge
    is not assumed to stay on the host that printed it."""
    line = (FACTS / "nccl_log" / "gb200_mnnvl_one_tray" / "input.log").read_text().splitlines()[-1]
    text = line.replace("gbtray17", "tray-a")
    summary = summarize_transport([parse_nccl_log(text)], {0: "tray-a", 1: "tray-b"})
    assert summary["inter_node_all"] == {"P2P/MNNVL": ["tray-a"]} and summary["intra_node"] == []
    same = summarize_transport([parse_nccl_log(text)], {0: "tray-a", 1: "tray-a"})
    assert same["inter_node_all"] == {} and same["intra_node"] == ["P2P/MNNVL"]


def test_mnnvl_fabric_line_with_a_route_unhealthy_is_named() -> None:
    """healthMask 0xaa is four FALSE fields (healthy); 0x9a sets route-unhealthy TRUE (composed from the
    published line by that one field), and a state other than 3 is a registration not completed."""
    log = (FACTS / "nccl_log" / "gb200_mnnvl_fabric_four_gpus" / "input.log").read_text()
    bad = log.replace(
        "busId 0x901000 fabric UUID 8d0c44e2a17b5c39.f06b2d7e93ac1148 cliqueId 0x7ffe state 3 healthMask 0xaa",
        "busId 0x901000 fabric UUID 8d0c44e2a17b5c39.f06b2d7e93ac1148 cliqueId 0x7ffe state 3 healthMask 0x9a",
    )
    bad = bad.replace(
        "cliqueId 0x7ffe state 3 healthMask 0xaa\ngbtray04:73314",
        "cliqueId 0x7ffe state 2 healthMask 0xaa\ngbtray04:73314",
    )
    summary = summarize_transport([parse_nccl_log(bad)])
    assert summary["mnnvl"]["unhealthy"] == [
        "gbtray04 GPU 0x901000: route unhealthy",
        "gbtray04 GPU 0x1801000: state In Progress",
    ]


def test_the_transport_message_says_whether_the_trays_talked_over_nvlink() -> None:
    def summary(case: str) -> dict[str, Any]:
        return summarize_transport([parse_nccl_log((FACTS / "nccl_log" / case / "input.log").read_text())])

    on, on_warn = mnnvl_phrase(summary("gb200_mnnvl_one_tray")["mnnvl"])
    assert on == "; multi-node NVLink on (NVLink domain of 4 GPUs)" and not on_warn
    off, off_warn = mnnvl_phrase(summary("gb200_mnnvl_disabled_by_env")["mnnvl"])
    assert "NCCL_MNNVL_ENABLE=0" in off and off_warn
    assert mnnvl_phrase(summary("ib_gdrdma_two_nodes")["mnnvl"]) == ("", False)
