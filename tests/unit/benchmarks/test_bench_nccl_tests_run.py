"""The nccl-tests execution path without test hosts: command lines, the preflight, row mapping, following.

Rows and progress are read from the real captured outputs in tests/facts/nccl_tests/ (each case names
its source); the preflight script and a few short stage runs use this machine's real shell through
diagnose's LocalConnection, with small scripts standing in for the nccl-tests binaries and mpirun.
"""

from __future__ import annotations

import stat
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from diagnose.benchmarks.nccl_tests import NcclTestsBench, TableFollower, result_row
from diagnose.benchmarks.nccl_tests_argv import (
    HostCheck,
    Settings,
    blocked_collectives,
    command_argv,
    preflight_script,
    read_preflight,
    sweep_args,
)
from diagnose.benchmarks.setup import BenchContext, Setup
from diagnose.benchmarks.stage import Stage, run_benchmark_stage
from diagnose.connectors import LocalConnection
from diagnose.core.hosts import Host
from diagnose.core.model import CheckResult, CommandOutput
from diagnose.core.vars import Vars
from diagnose.launchers.stopping import TOKEN_VAR
from diagnose.parsers.nccl_tests import parse_nccl_tests
from tests.support.paths import FACTS

NCCL_TESTS_CASES = FACTS / "nccl_tests"
ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET,GRAPH"}


def rows_of(case: str) -> list[dict[str, Any]]:
    return parse_nccl_tests((NCCL_TESTS_CASES / case / "input.txt").read_text())["rows"]


def settings(**values: Any) -> Settings:
    return Settings.of(Vars({"nccl_tests_dir": "/opt/nccl-tests/build", **values}))


# -- command lines ----------------------------------------------------------------------------------------


def test_sweep_options_follow_the_playbook_with_validation_on() -> None:
    assert sweep_args(1 << 20, 1 << 30, 2, 5, 20, "bfloat16") == [
        "-b", "1048576", "-e", "1073741824", "-f", "2", "-w", "5", "-n", "20", "-c", "1", "-d", "bfloat16",
    ]  # fmt: skip


def test_one_node_runs_the_binary_itself_over_every_gpu() -> None:
    sweep = sweep_args(8, 128, 2, 1, 5, "float32")
    argv = command_argv(settings(), "all_to_all", [Host("node1")], 8, sweep, ENV, ["NCCL_NVLS_ENABLE"])
    assert argv == ["/opt/nccl-tests/build/alltoall_perf", *sweep, "-g", "8"]


def test_several_nodes_run_under_the_launcher_one_gpu_per_rank() -> None:
    hosts = [
        Host("node1", vars=Vars({"ansible_host": "10.0.0.1"})),
        Host("node2", vars=Vars({"ansible_host": "10.0.0.2", "nccl_tests_mpi_host": "gpu-b"})),
    ]
    chosen = settings(mpirun="/opt/openmpi/bin/mpirun", nccl_tests_mpi_args="--allow-run-as-root -x PATH")
    sweep = sweep_args(8, 128, 2, 1, 5, "float32")
    forward = ["NCCL_NVLS_ENABLE", "NCCL_DEBUG", "NCCL_IB_HCA", "NCCL_IB_HCA"]
    argv = command_argv(chosen, "all_reduce", hosts, 8, sweep, ENV, forward)
    assert argv == [
        "/opt/openmpi/bin/mpirun", "-np", "16", "-H", "10.0.0.1:8,gpu-b:8",
        "--allow-run-as-root", "-x", "PATH",
        "-x", "NCCL_DEBUG=INFO", "-x", "NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH",
        "-x", "NCCL_IB_HCA", "-x", "NCCL_NVLS_ENABLE", "-x", TOKEN_VAR,
        "/opt/nccl-tests/build/all_reduce_perf", *sweep, "-g", "1",
    ]  # fmt: skip


def test_settings_defaults_lists_and_bad_values() -> None:
    plain = Settings.of(Vars({}))
    assert (plain.directory, plain.mpirun, plain.mpi_args, plain.fallback, plain.problem) == (
        None,
        "mpirun",
        (),
        None,
        None,
    )
    listed = settings(
        nccl_tests_mpi_args=["--mca", "btl_tcp_if_include", "eth0"], nccl_tests_fallback="Torch"
    )
    assert listed.mpi_args == ("--mca", "btl_tcp_if_include", "eth0") and listed.fallback == "torch"
    assert settings(nccl_tests_fallback="none").fallback is None
    wrong = settings(nccl_tests_fallback="gloo")
    assert wrong.fallback is None and "nccl_tests_fallback must be torch" in (wrong.problem or "")
    assert "not valid shell words" in (settings(nccl_tests_mpi_args="-x 'unclosed").problem or "")


# -- preflight --------------------------------------------------------------------------------------------


def _executable(path: Path, text: str = "#!/bin/sh\nexit 0\n") -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_preflight_names_what_is_missing_on_a_real_shell(tmp_path: Path) -> None:
    build = tmp_path / "build"
    build.mkdir()
    _executable(build / "all_reduce_perf")
    (build / "all_gather_perf").write_text("not executable\n")
    (build / "alltoall_perf").mkdir()
    local = LocalConnection(Host("here"))
    binaries = ["all_reduce_perf", "all_gather_perf", "alltoall_perf", "sendrecv_perf"]
    script = preflight_script(str(build), binaries, str(tmp_path / "no-mpirun"), True)
    found = read_preflight(
        local.run(script, timeout=10, env={"NCCL_NVLS_ENABLE": "0", "NCCL_IB_HCA": "mlx5"})
    )
    assert found.error is None
    assert found.binaries == {
        "all_gather_perf": "not executable",
        "alltoall_perf": "not executable",
        "sendrecv_perf": "missing",
    }
    assert not found.launcher_found
    assert {"NCCL_NVLS_ENABLE", "NCCL_IB_HCA"} <= set(found.env_names)
    # A launcher named by its path or found on PATH passes; the environment is listed only when asked.
    launcher = _executable(tmp_path / "mpirun")
    for name, env in ((str(launcher), None), ("mpirun", {"PATH": f"{tmp_path}:/usr/bin:/bin"})):
        again = read_preflight(local.run(preflight_script(str(build), [], name, False), timeout=10, env=env))
        assert again.launcher_found and again.env_names == [] and again.binaries == {}


def test_a_host_that_cannot_be_checked_blocks_every_collective() -> None:
    checks = {
        "node1": HostCheck(),
        "node2": HostCheck(binaries={"all_gather_perf": "missing"}, launcher_found=False),
        "node3": read_preflight(CommandOutput(error="connection lost: EOF")),
    }
    reasons = blocked_collectives(checks, ["all_reduce", "all_gather"], "mpirun")
    assert reasons["all_reduce"] == ("node3 could not be checked; the launcher mpirun was not found on node2")
    assert reasons["all_gather"] == (
        "node3 could not be checked; all_gather_perf is missing on node2; "
        "the launcher mpirun was not found on node2"
    )
    one_node = blocked_collectives({"node1": HostCheck(launcher_found=False)}, ["all_reduce"], None)
    assert one_node == {}, "one node needs no launcher"


# -- rows -------------------------------------------------------------------------------------------------


def test_current_rows_count_wrong_elements_over_both_placements() -> None:
    rows = [result_row(r) for r in rows_of("current_2node_h100_allreduce")]
    assert len(rows) == 31 and all(r["wrong"] == 0 for r in rows)
    assert rows[-1] == {
        "bytes": 8589934592,
        "time_us": 47535.0,
        "algbw_gbps": 180.71,
        "busbw_gbps": 338.82,
        "wrong": 0,
    }
    # alltoall has no in-place check (N/A): the out-of-place count is what is known.
    (alltoall,) = [result_row(r) for r in rows_of("alltoall_none_inplace_na")]
    assert alltoall["wrong"] == 0


def test_old_error_column_is_a_deviation_judged_against_the_type_tolerance() -> None:
    """5e-07 on float sums over 16 ranks is rounding (nccl-tests said 'Out of bounds values : 0 OK');
    1e+00 is a corrupted all_gather (it said '2 FAILED')."""
    rounding = [result_row(r) for r in rows_of("efa_p4d_two_nodes_mpirun_info")]
    assert all(r["wrong"] == 0 and "wrong_is_lower_bound" not in r for r in rounding)
    assert max(r["max_error"] for r in rounding) == 5e-07
    (corrupt,) = [result_row(r) for r in rows_of("oldest_unprefixed_out_of_bounds")]
    assert corrupt["wrong"] == 1 and corrupt["wrong_is_lower_bound"] and corrupt["max_error"] == 1.0
    not_validated = [result_row(r) for r in rows_of("old_redop_error_na_allreduce")]
    assert all(r["wrong"] is None and "max_error" not in r for r in not_validated)
    half = result_row({**rows_of("old_error_values_allreduce")[0], "type": "half", "error": 5e-3})
    assert half["wrong"] == 0, "half precision tolerates 1e-2"


# -- following the output ---------------------------------------------------------------------------------


def test_the_table_is_followed_line_by_line_as_it_arrives() -> None:
    lines = (NCCL_TESTS_CASES / "efa_p4d_two_nodes_mpirun_info" / "input.txt").read_text().splitlines()
    header = next(i for i, line in enumerate(lines) if "busbw" in line)
    follower = TableFollower("all_reduce")
    assert follower.feed(lines[:header]) == [], "nothing before the table header"
    events: list[dict[str, Any]] = []
    for line in lines[header:]:
        events += follower.feed([line])
    kinds = [e["event"] for e in events]
    assert kinds[:3] == ["start", "warm", "row"] and kinds[-1] == "done"
    rows = [e for e in events if e["event"] == "row"]
    assert [r["bytes"] for r in rows] == [8 << i for i in range(28)]
    assert rows[-1]["busbw_gbps"] == 32.71 and rows[-1]["collective"] == "all_reduce"


def test_rows_of_zero_bytes_are_dropped() -> None:
    follower = TableFollower("all_gather")
    events = follower.feed(
        (NCCL_TESTS_CASES / "old_no_redop_allgather" / "input.txt").read_text().splitlines()
    )
    rows = [e for e in events if e["event"] == "row"]
    assert len(rows) == 34 - 5 and rows[0]["bytes"] == 32 and rows[-1]["busbw_gbps"] == 223.39


# -- one stage run on this machine ------------------------------------------------------------------------

PLAN = SimpleNamespace(
    enabled=True,
    workload="fsdp",
    collectives=("all_gather", "reduce_scatter"),
    min_bytes=4 << 30,
    max_bytes=4 << 30,
    step_factor=2,
    warmup_iters=1,
    iters=5,
    tool="nccl-tests",
    straggler_isolation=True,
    timeout_s=None,
)


def context(tmp_path: Path, host_vars: dict[str, Any]) -> tuple[BenchContext, list[CheckResult], list[dict]]:
    host = Host("here", vars=Vars({"ansible_connection": "local", "bench_gpus_per_host": 8, **host_vars}))
    checks: list[CheckResult] = []
    benchmarks: list[dict[str, Any]] = []
    ctx = BenchContext(
        [host],
        {"here": LocalConnection(host)},
        {},
        PLAN,
        tmp_path / "out",
        f"unit-{tmp_path.name}",
        checks.append,
        benchmarks.append,
    )
    return ctx, checks, benchmarks


def stage_run(tmp_path: Path, host_vars: dict[str, Any]) -> tuple[list[CheckResult], list[dict[str, Any]]]:
    ctx, checks, benchmarks = context(tmp_path, host_vars)
    run_benchmark_stage(ctx)
    return checks, benchmarks


def test_a_corrupted_old_run_fails_and_a_missing_binary_is_an_error(tmp_path: Path) -> None:
    """all_gather_perf prints the real V100 run with 'Out of bounds values : 2 FAILED'; reduce_scatter_perf
    is not there."""
    build = tmp_path / "build"
    build.mkdir()
    captured = NCCL_TESTS_CASES / "oldest_unprefixed_out_of_bounds" / "input.txt"
    argv_file = tmp_path / "argv"
    _executable(build / "all_gather_perf", f'#!/bin/sh\necho "$@" > {argv_file}\ncat {captured}\nexit 1\n')
    checks, benchmarks = stage_run(tmp_path, {"nccl_tests_dir": str(build)})
    by_id = {c.id: c for c in checks}
    assert argv_file.read_text().split() == [
        "-b", "4294967296", "-e", "4294967296", "-f", "2", "-w", "1", "-n", "5", "-c", "1", "-d", "float",
        "-g", "8",
    ]  # fmt: skip
    gather, scatter = benchmarks
    assert gather["tool"] == "nccl-tests" and gather["status"] == "FAIL"
    assert "beyond nccl-tests' tolerance at 4 GiB" in gather["message"]
    assert "largest deviation 1" in gather["message"]
    assert gather["rows"][0]["busbw_gbps"] == 129.05 and gather["rows"][0]["wrong_is_lower_bound"]
    assert gather["command"].endswith(
        "all_gather_perf -b 4294967296 -e 4294967296 -f 2 -w 1 -n 5 -c 1 -d float -g 8"
    )
    log = tmp_path / "out" / "raw" / "here" / "nccl-tests-all_gather.log"
    assert log.read_text() == captured.read_text()
    assert by_id["bench.all_gather"].evidence == "raw/here/nccl-tests-all_gather.log"
    assert scatter["status"] == "ERROR" and scatter["tool"] == "nccl-tests" and scatter["rows"] == []
    assert "reduce_scatter_perf is missing on here" in scatter["message"]
    problem = by_id["bench.nccl_tests"]
    assert problem.status == "ERROR" and problem.host == "here"
    assert "nccl-tests cannot run on here: reduce_scatter_perf is missing in" in problem.message
    assert by_id["bench.reduce_scatter"].status == "ERROR"


def test_without_a_folder_nothing_runs(tmp_path: Path) -> None:
    checks, benchmarks = stage_run(tmp_path, {})
    assert [b["status"] for b in benchmarks] == ["ERROR", "ERROR"]
    assert "nccl_tests_dir" in benchmarks[0]["message"]
    assert next(c.id for c in checks if c.status == "ERROR") == "bench.nccl_tests"
    assert not any(c.id == "nccl.transport" for c in checks), "nothing measured, no transport to judge"


def test_what_nccl_tests_cannot_run_is_handed_to_torch_only_when_the_fallback_says_so(tmp_path: Path) -> None:
    build = tmp_path / "build"
    build.mkdir()
    for fallback, handed in ((None, []), ("torch", ["all_gather", "reduce_scatter"])):
        ctx, checks, benchmarks = context(
            tmp_path, {"nccl_tests_dir": str(build), "nccl_tests_fallback": fallback}
        )
        stage = Stage(ctx)
        handoff = NcclTestsBench(stage, Setup("nccl", 8, ctx.hosts, [])).run(list(PLAN.collectives))
        assert handoff.collectives == handed and not handoff.measured
        (problem,) = checks if fallback else [c for c in checks if c.id == "bench.nccl_tests"]
        assert problem.status == ("WARN" if fallback else "ERROR") and problem.host == "here"
        if fallback:
            assert benchmarks == [], "torch measures them"
            assert "measured with torch instead" in problem.message
            assert handoff.note.startswith(
                "measured with torch: nccl-tests cannot run (all_gather_perf is missing"
            )
        else:
            assert [b["status"] for b in benchmarks] == ["ERROR", "ERROR"]
    # Without GPUs nccl-tests cannot run at all.
    ctx, checks, _ = context(tmp_path, {"nccl_tests_dir": str(build), "nccl_tests_fallback": "torch"})
    handoff = NcclTestsBench(Stage(ctx), Setup("gloo", 1, ctx.hosts, [])).run(["all_reduce"])
    assert handoff.collectives == ["all_reduce"] and "no GPU was found" in handoff.note


def test_a_binary_that_cannot_start_is_an_error_in_its_own_words(tmp_path: Path) -> None:
    build = tmp_path / "build"
    build.mkdir()
    words = (
        "all_gather_perf: error while loading shared libraries: libnccl.so.2: cannot open shared object file"
    )
    _executable(build / "all_gather_perf", f"#!/bin/sh\necho '{words}' >&2\nexit 127\n")
    _executable(build / "reduce_scatter_perf", "#!/bin/sh\nexit 0\n")
    _, benchmarks = stage_run(tmp_path, {"nccl_tests_dir": str(build)})
    gather, scatter = benchmarks
    assert gather["status"] == "ERROR" and gather["rows"] == []
    assert f"the benchmark failed on here: {words}" in gather["message"]
    assert scatter["status"] == "ERROR"
    assert "reduce_scatter_perf exited 0 on every host but the program never finished" in scatter["message"]


def test_a_short_result_on_three_hosts_is_bisected_with_nccl_tests_pairs(tmp_path: Path) -> None:
    """Three hosts on this machine; the stand-in mpirun prints the real 2-node EFA run (32.7 GB/s at 1 GiB)
    for every job, so the whole run and every pair fall below p4d's range: a cluster-wide shortfall."""
    record = tmp_path / "mpirun.argv"
    captured = NCCL_TESTS_CASES / "efa_p4d_two_nodes_mpirun_info" / "input.txt"
    mpirun = _executable(tmp_path / "mpirun", f'#!/bin/sh\necho "$@" >> {record}\ncat {captured}\n')
    build = tmp_path / "build"
    build.mkdir()
    _executable(build / "all_reduce_perf")
    common = {
        "ansible_connection": "local",
        "bench_gpus_per_host": 8,
        "nccl_tests_dir": str(build),
        "mpirun": str(mpirun),
        "line_rate_gbps": 100,
        "expected_hca_count": 4,
        "localize_repeats": 2,
        "localize_max_repeats": 2,
    }
    hosts = [Host(f"h{i}", vars=Vars({**common, "ansible_host": f"10.0.0.{i}"})) for i in (1, 2, 3)]
    plan = SimpleNamespace(
        **{**vars(PLAN), "collectives": ("all_reduce",), "min_bytes": 8, "max_bytes": 1 << 30}
    )
    checks: list[CheckResult] = []
    benchmarks: list[dict[str, Any]] = []
    ctx = BenchContext(
        hosts,
        {h.name: LocalConnection(h) for h in hosts},
        {},
        plan,
        tmp_path / "out",
        f"unit-{tmp_path.name}",
        checks.append,
        benchmarks.append,
    )
    run_benchmark_stage(ctx)
    (entry,) = benchmarks
    assert entry["status"] == "FAIL" and "below the normal range" in entry["message"]
    launches = record.read_text().splitlines()
    assert launches[0].startswith("-np 24 -H 10.0.0.1:8,10.0.0.2:8,10.0.0.3:8 ")
    pairs = launches[1:]
    assert pairs and all(p.startswith("-np 16 -H ") and " -b 1073741824 -e 1073741824 " in p for p in pairs)
    straggler = next(c for c in checks if c.id == "bench.straggler")
    assert straggler.status == "WARN" and "cluster-wide" in straggler.message, (
        straggler.message,
        straggler.observed,
    )
    raw = tmp_path / "out" / "raw" / "h1"
    assert (raw / "nccl-tests-all_reduce.log").exists()
    assert any(p.name.startswith("nccl-tests-all_reduce.loc") for p in raw.iterdir())
