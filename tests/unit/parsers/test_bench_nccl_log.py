"""NCCL INFO log → transport, on real logs (tests/facts/nccl_log/): our 4×H200 captures and public ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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
