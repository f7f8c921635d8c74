"""node-check's pure parts: ``scontrol show node`` read from real captured outputs, the drain policy (whose
drain may be lifted), the reason and the one-line summary, and the exit codes of bad options."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from diagnose.cli import main
from diagnose.commands.node_check import (
    EXIT_INTERNAL,
    EXIT_UNHEALTHY,
    EXIT_USAGE,
    NodeCheckOutcome,
    grouped_findings,
    short_detail,
    summary_line,
    this_node,
)
from diagnose.core.model import CheckResult
from diagnose.parsers.scontrol_node import parse_scontrol_node
from diagnose.slurm.drain import REASON_LIMIT, Action, decide, drain_reason
from tests.support.facts import check_case
from tests.support.paths import CAPTURED, FACTS

CASES = sorted((FACTS / "scontrol_node").glob("*.json"))


def node(case: str) -> dict[str, Any]:
    return parse_scontrol_node((CAPTURED / "scontrol_node" / f"{case}.txt").read_text())


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_scontrol_node_cases(path: Path) -> None:
    """Each case states the fields a reader of the node's line pins (the runner of tests/support/facts.py)."""
    check_case(path, lambda text, rc: parse_scontrol_node(text))


def test_scontrol_node_without_a_node_line_is_a_parse_error() -> None:
    from diagnose.core.check import ParseError

    with pytest.raises(ParseError, match="no NodeName= line"):
        parse_scontrol_node("Node no-such-node not found\n")


REASON = "diagnose: ib.port_state 7 of 8 expected InfiniBand ports Active; not Active: mlx5_9/1 Down/Polling"


@pytest.mark.parametrize(
    ("healthy", "case", "expected"),
    [
        # Unhealthy: drain a node in service; an old node-check reason is renewed; an admin's stays.
        (False, "idle", Action("drain", REASON, "drained")),
        (False, "allocated", Action("drain", REASON, "drained")),
        (False, "idle_drain_diagnose", Action("none", note="still drained")),
        (False, "allocated_drain_diagnose", Action("drain", REASON, "drain reason updated")),
        (False, "idle_drain_admin", Action("none", note="already out of service: admin: PSU swap [ticket=INC-4711]; do not resume")),
        (False, "down_diagnose_replaced", Action("none", note="already out of service: Not responding")),
        # Healthy: lift node-check's own drain only.
        (True, "idle", Action("none")),
        (True, "resumed_not_responding", Action("none")),
        (True, "idle_drain_diagnose", Action("resume", note="resumed")),
        (True, "allocated_drain_diagnose", Action("resume", note="resumed")),
        (True, "idle_drain_admin", Action("none", note="left out of service: admin: PSU swap [ticket=INC-4711]; do not resume")),
        (True, "down_diagnose_replaced", Action("none", note="left out of service: Not responding")),
    ],
)  # fmt: skip
def test_drain_policy(healthy: bool, case: str, expected: Action) -> None:
    assert decide(healthy, node(case), REASON) == expected


def test_drain_reason_is_one_line_prefixed_and_bounded() -> None:
    assert drain_reason([("gpu.xid", "Xid 79\non GPU 4")]) == "diagnose: gpu.xid Xid 79 on GPU 4"
    long = drain_reason([("gpu.fabricmanager", "GPU 0 fabric In Progress; " * 20)])
    assert long.startswith("diagnose: gpu.fabricmanager GPU 0") and long.endswith("...")
    assert REASON_LIMIT - 5 < len(long) <= REASON_LIMIT


# Messages as the checks wrote them about hostkit's fault nodes under the Slurm bed (node-check --json).
PORT_DOWN = "7 of 8 expected InfiniBand ports Active on port-down; not Active: mlx5_9/1 Down/Polling"
XID = (
    "xid-79 since boot: Xid 79 (GPU has fallen off the bus) on GPU 4 (00000000:9A:00.0), "
    "last 2026-11-22T18:24:07,548779+00:00"
)
HUNG = "`ibstat` timed out on hung-ibstat after 3 s (hung tool or device?)"
PCIE = "pcie-x8: GPU 1 (00000000:2A:00.0) link x8, expected_pcie_width x16"


def result(check: str, host: str, message: str, status: str = "FAIL") -> CheckResult:
    return CheckResult(id=check, host=host, checklist="1", status=status, message=message)


def test_short_detail_drops_the_node_name_and_bus_ids() -> None:
    assert short_detail(result("ib.port_state", "port-down", PORT_DOWN)) == (
        "7 of 8 expected InfiniBand ports Active; not Active: mlx5_9/1 Down/Polling"
    )
    assert short_detail(result("gpu.pcie", "pcie-x8", PCIE)) == "GPU 1 link x8, expected_pcie_width x16"
    xid = short_detail(result("gpu.xid", "xid-79", XID))
    assert xid.startswith("since boot: Xid 79 (GPU has fallen off the bus) on GPU 4, last ")
    assert 75 < len(xid) <= 80 and xid.endswith("...")
    assert short_detail(result("ib.port_state", "hung-ibstat", HUNG, "ERROR")) == (
        "ERROR `ibstat` timed out after 3 s (hung tool or device?)"
    )


def test_findings_saying_the_same_are_grouped() -> None:
    hung = [result(c, "hung-ibstat", HUNG, "ERROR") for c in ("ib.link_rate", "ib.port_state")]
    assert grouped_findings(hung) == [
        ("ib.link_rate,ib.port_state", "ERROR `ibstat` timed out after 3 s (hung tool or device?)")
    ]


def test_summary_lines_and_exit_codes() -> None:
    ok = NodeCheckOutcome("n1", [result("gpu.xid", "n1", "n1: no Xid", "PASS")] * 17, 2.06)
    assert summary_line(ok) == "diagnose node-check: OK n1 (17 checks, 2.1 s)"
    assert ok.exit_code == 0
    bad = NodeCheckOutcome(
        "hung-ibstat",
        [result("ib.port_state", "hung-ibstat", HUNG, "ERROR"), result("gpu.pcie", "hung-ibstat", PCIE)],
        4.93,
        action=Action("drain", "diagnose: ...", "drained"),
    )
    assert summary_line(bad) == (
        "diagnose node-check: FAIL hung-ibstat: gpu.pcie pcie-x8: GPU 1 link x8, expected_pcie_width x16; "
        "ib.port_state ERROR `ibstat` timed out after 3 s (hung tool or device?) (2 checks, 4.9 s; drained)"
    )
    assert bad.exit_code == EXIT_UNHEALTHY
    bad.slurm_error = "scontrol update exited 1: Invalid node name specified"
    assert bad.exit_code == EXIT_INTERNAL
    assert summary_line(bad).endswith("(2 checks, 4.9 s; drained; Slurm not updated: scontrol update exited 1: "
                                      "Invalid node name specified)")  # fmt: skip


def test_node_name_from_slurmd_else_short_hostname() -> None:
    assert this_node({"SLURMD_NODENAME": "gpu017"}) == "gpu017"
    import socket

    assert this_node({}) == socket.gethostname().split(".")[0]


@pytest.mark.parametrize(
    "argv",
    [
        ["node-check", "--profile", "no-such-profile"],
        ["node-check", "-e", "expected_gpu_count=eight"],
        ["node-check", "--inventory", "/no/such/inventory.yaml"],
    ],
)
def test_bad_options_exit_2_and_check_nothing(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == EXIT_USAGE
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("diagnose node-check: ")


def test_inventory_without_this_node_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inventory = tmp_path / "cluster.yaml"
    inventory.write_text("all:\n  hosts:\n    gpu001:\n    gpu002:\n")
    assert main(["node-check", "--inventory", str(inventory)]) == EXIT_USAGE
    assert "matched no hosts" in capsys.readouterr().err
