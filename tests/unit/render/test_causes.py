"""Failures grouped by cause (diagnose.render.causes), and the cause lines of the terminal's summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from diagnose.commands.run import summary_lines
from diagnose.core.model import ACTIONS
from diagnose.render.actions import ACTION_WORDS, action_text
from diagnose.render.causes import cause_lines, group_causes, normalized
from tests.support.paths import FIXTURES

RESULTS = FIXTURES / "results"


def _fixture(name: str) -> dict[str, Any]:
    return json.loads((RESULTS / name).read_text())


def _row(check: str, host: str | None, status: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"id": check, "host": host, "checklist": "3", "status": status, "message": message, **extra}


def new_user_run() -> dict[str, Any]:
    """The run of the issue: two hosts refuse SSH, one's host key is unknown, torch is missing on the
    fourth, so every collective's benchmark could not start."""
    hosts = [{"name": f"node0{i}", "address": "127.0.0.1", "reachable": i == 4} for i in range(1, 5)]
    refused = "node0{0} is unreachable: connection to 127.0.0.1:220{0} refused (no SSH server listening?)"
    torch = (
        "{0} not run: torch cannot be imported on node04 (/usr/bin/python3: No module named 'torch'). "
        "Install torch for that interpreter"
    )
    checks = [
        _row("host.reachable", "node01", "FAIL", refused.format(1), action="check_config"),
        _row("host.reachable", "node02", "FAIL", refused.format(2), action="check_config"),
        _row(
            "host.reachable",
            "node03",
            "FAIL",
            "node03 is unreachable: host key for 127.0.0.1:2203 is not in known_hosts; add it (ssh-keyscan)",
            action="check_config",
        ),
        _row("host.reachable", "node04", "PASS", "connected as root"),
        _row("bench.all_reduce", None, "ERROR", torch.format("all_reduce"), action="check_config"),
        _row("bench.all_gather", None, "ERROR", torch.format("all_gather"), action="check_config"),
    ]
    return {"run": {}, "hosts": hosts, "checks": checks, "benchmarks": [], "verdict": "FAIL"}


def test_the_new_users_run_reads_as_three_causes() -> None:
    causes = group_causes(new_user_run())
    assert [(c.status, c.hosts_text, c.check_ids) for c in causes] == [
        ("FAIL", "node[01-02]", ["host.reachable"]),
        ("FAIL", "node03", ["host.reachable"]),
        ("ERROR", "cluster-wide", ["bench.all_reduce", "bench.all_gather"]),
    ]
    assert causes[0].message.startswith("node01 is unreachable: connection to 127.0.0.1:2201 refused")
    assert causes[0].summary.startswith("unreachable: connection to <host> refused")  # of two hosts
    assert {c.what_to_do for c in causes} == {"fix the configuration"}


def test_summary_prints_one_line_per_cause_after_the_coverage_line() -> None:
    out = Path("/runs/x")
    lines = summary_lines(new_user_run(), out, [out / "results.json", out / "report.html"])
    assert lines[0] == "diagnose: FAIL — 4 hosts, 3 FAIL, 2 ERROR, 1 PASS — /runs/x"
    assert lines[1].startswith("diagnose: 4 of 6 results measured")
    files = lines.index("  /runs/x/results.json")
    causes = [line for line in lines[2:files] if line.split()[0] in ("FAIL", "ERROR")]
    assert causes[0].split()[:3] == ["FAIL", "node[01-02]", "host.reachable"]
    node03 = " ".join(
        " ".join(line.split()) for line in lines[lines.index(causes[1]) : lines.index(causes[2])]
    )
    assert "known_hosts" in node03 and node03.endswith("→ fix the configuration")
    assert causes[2].split()[:4] == ["ERROR", "cluster-wide", "bench.all_reduce", "+1"]
    assert lines[files:] == ["  /runs/x/results.json", "  /runs/x/report.html"]
    # the columns line up: the message starts at the same place on every cause line
    assert len({line.index(" unreachable: ") for line in causes[:2]}) == 1


def test_a_passing_run_prints_no_cause_line() -> None:
    document = _fixture("h200x2_real_health.json")
    lines = summary_lines(document, Path("/r"), [])
    assert len(lines) == 2 and lines[0].startswith("diagnose: PASS")
    warned = _fixture("cluster_failures.json") | {"verdict": "PASS"}  # warnings alone never print causes
    assert len(summary_lines(warned, Path("/r"), [])) == 2


def test_one_hung_host_on_eleven_checks_is_one_cause() -> None:
    ids = [f"gpu.check{i}" for i in range(11)]
    checks = [
        _row(
            i,
            "gpu17",
            "ERROR",
            f"`nvidia-smi -q -d {i}` timed out on gpu17 after {20 + n} s (hung tool or device?)",
        )
        for n, i in enumerate(ids)
    ]
    checks.append(
        _row(
            "gpu.check0",
            "gpu2",
            "ERROR",
            "`nvidia-smi -q` timed out on gpu2 after 30 s (hung tool or device?)",
        )
    )
    (cause,) = group_causes({"hosts": [], "checks": checks})
    assert cause.check_ids == ids and cause.hosts == ["gpu2", "gpu17"]


def test_causes_are_worst_first_then_by_hosts_affected() -> None:
    checks = [_row("net.port_range", f"n{i}", "WARN", "narrow") for i in range(9)]
    checks += [_row("ib.port_state", f"n{i}", "FAIL", "port Down") for i in range(2)]
    checks += [_row("ib.link_rate", f"n{i}", "FAIL", "slow link") for i in range(5)]
    checks += [_row("nccl.version", "n1", "ERROR", "no NCCL")]
    order = [(c.status, len(c.hosts)) for c in group_causes({"hosts": [], "checks": checks})]
    assert order == [("FAIL", 5), ("FAIL", 2), ("ERROR", 1), ("WARN", 9)]


def test_the_action_splits_a_cause_and_reads_in_plain_words() -> None:
    checks = [
        _row("gpu.xid", "g1", "FAIL", "Xid 79 on GPU 3", action="reset_gpu"),
        _row("gpu.xid", "g2", "FAIL", "Xid 79 on GPU 3", action="rma_gpu"),
        _row("gpu.xid", "g3", "FAIL", "Xid 79 on GPU 3", action="reseat_or_replace_cable"),
    ]
    causes = group_causes({"hosts": [], "checks": checks})
    assert sorted(c.what_to_do for c in causes) == [
        "replace the GPU (RMA)",
        "reseat or replace the cable",
        "reset the GPU",
    ]
    assert set(ACTION_WORDS) == set(ACTIONS)  # every word the engine may record has its plain words
    assert action_text("drain_node") == "drain node" and action_text(None) is None


def test_without_an_action_the_remediation_says_what_to_do() -> None:
    causes = group_causes(_fixture("cluster_failures.json"))
    port = next(c for c in causes if c.check_ids == ["ib.port_state"])
    assert port.action is None and port.what_to_do.startswith("Reseat or replace the cable")


def test_host_names_are_whole_words_and_numbers_that_name_the_fault_stay() -> None:
    names = frozenset({"gpu1", "gpu12", "10.0.0.1"})
    assert normalized("gpu1 slow; gpu12 fast", names) == "<host> slow; <host> fast"
    assert normalized("Xid 79 on 0000:3b:00.0", names) != normalized("Xid 48 on 0000:3b:00.0", names)
    assert normalized("pid 12 on GPU-0a1b2c3d-1111", names) == normalized(
        "pid 99 on GPU-ffffeeee-2222", names
    )
    assert normalized("ssh: connect to host 10.0.0.1 port 22", names) == "ssh: connect to host <host> port #"


def test_which_port_or_gpu_of_a_host_is_not_the_cause() -> None:
    checks = [
        _row(
            "ib.port_state",
            "n1",
            "FAIL",
            "mlx5_0 port 1 is Down (Physical state: Polling); 7 of 8 ports Active",
        ),
        _row(
            "ib.port_state",
            "n2",
            "FAIL",
            "mlx5_5 port 2 is Down (Physical state: Polling); 7 of 8 ports Active",
        ),
        _row("gpu.xid", "n3", "FAIL", "Xid 79 on GPU 3 (0000:3b:00.0): fallen off the bus"),
        _row("gpu.xid", "n4", "FAIL", "Xid 79 on GPU 6 (0000:bd:00.0): fallen off the bus"),
        _row("gpu.xid", "n5", "FAIL", "Xid 48 on GPU 3 (0000:3b:00.0): double-bit ECC error"),
    ]
    causes = group_causes({"hosts": [], "checks": checks})
    assert [(c.check_ids[0], c.hosts_text) for c in causes] == [
        ("gpu.xid", "n[3-4]"),
        ("ib.port_state", "n[1-2]"),
        ("gpu.xid", "n5"),
    ]


def test_the_line_leaves_out_the_host_the_message_opens_with() -> None:
    checks = [
        _row("gpu.gemm", f"g{i}", "FAIL", f"g{i}: GPU 0 bf16 315 TFLOP/s, below the floor") for i in (1, 2)
    ]
    (cause,) = group_causes({"hosts": [], "checks": checks})
    assert cause.summary == "GPU 0 bf16 315 TFLOP/s, below the floor" and cause.message.startswith("g1: ")
    (line,) = cause_lines([cause], "x")
    assert line.split()[:4] == ["FAIL", "g[1-2]", "gpu.gemm", "GPU"]


def test_many_hosts_are_counted_where_their_names_do_not_fit() -> None:
    checks = [
        _row("ib.port_state", f"gpu-r{i // 32:02d}n{i % 32:02d}", "FAIL", "port Down")
        for i in range(0, 600, 3)
    ]
    (line,) = cause_lines(group_causes({"hosts": [], "checks": checks}), "x")
    assert line.split()[1:3] == ["200", "hosts"] and "…" in line


def test_more_causes_than_the_terminal_shows_end_with_where_the_rest_is() -> None:
    checks = [_row(f"custom.t{i:02d}", "h1", "FAIL", f"fault number {i:02d}") for i in range(14)]
    lines = cause_lines(group_causes({"hosts": [], "checks": checks}), "the findings of /r/report.html")
    assert len(lines) == 10
    assert lines[-1] == "  … 5 more causes, 5 results: see the findings of /r/report.html"


def test_hostile_values_reach_the_terminal_without_escape_sequences() -> None:
    lines = summary_lines(_fixture("hostile.json"), Path("/r"), [])
    text = "\n".join(lines)
    assert "\x1b" not in text and "\\x1b" in text
    text.encode("utf-8")  # no lone surrogate left to crash the print
    assert all(len(line) <= 100 for line in lines[2:])


def test_recorded_runs_fold_hosts_failing_alike() -> None:
    halves = group_causes(_fixture("h200x4_two_halves_socket.json"))
    assert [(c.check_ids, c.hosts_text) for c in halves] == [
        (["gpu.topology"], "half-a, half-b"),
        (["nccl.transport"], "cluster-wide"),
        (["bench.all_reduce"], "cluster-wide"),
    ]
    distinct = group_causes(_fixture("cluster_failures.json"))  # ten different faults stay ten causes
    assert len(distinct) == 10 and [c.status for c in distinct].count("WARN") == 2
    # among equals: the unreachable host, then what hosts were found to have, then what benchmarks show
    assert [c.check_ids[0] for c in distinct[:8]] == [
        "host.reachable",
        "ib.link_rate",
        "ib.port_state",
        "nccl.env",
        "nccl.version",
        "versions.consistency",
        "bench.straggler",
        "bench.all_reduce",
    ]
