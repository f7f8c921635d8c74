"""``benchmarks.tool: nccl-tests`` over real sshd test hosts (tests/support/testbed.py).

The hosts carry stand-ins for nccl-tests and Open MPI's ``mpirun``: small shell scripts on the login PATH
that record their arguments and print REAL captured nccl-tests output from tests/facts/nccl_tests/:

* across two hosts, ``mpirun`` prints ``efa_p4d_two_nodes_mpirun_info``: all_reduce_perf over two
  p4d.24xlarge (16 A100, EFA) under Open MPI --tag-output, NCCL INFO lines and the old ``error`` table,
  from the launcher log in README.md of github.com/aws-samples/aws-efa-eks (commit 043dbe74);
* on one host, ``all_gather_perf`` prints ``old_no_redop_allgather``: 8x A100-SXM4-40GB in one process,
  tests/data/nccl_allgather.log of github.com/microsoft/superbenchmark (commit 86e14156).

Everything else is diagnose's own: the SSH connections, the preflight, the detached start, the polling
of the growing table, the stop by token on every host of the job, the evidence and the verdicts.
"""

from __future__ import annotations

import json
import secrets
import shlex
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from diagnose.benchmarks.stage import BenchContext, run_benchmark_stage
from diagnose.cli import main
from diagnose.connectors import connect
from diagnose.core.hosts import Host
from diagnose.core.model import CheckResult
from diagnose.core.vars import Vars
from diagnose.launchers.stopping import TOKEN_VAR
from tests.support.paths import FACTS
from tests.support.testbed import TOOLS_DIR, HostSpec, TestBed, TestHost

pytestmark = pytest.mark.integration

NCCL_TESTS_CASES = FACTS / "nccl_tests"
TWO_NODES = NCCL_TESTS_CASES / "efa_p4d_two_nodes_mpirun_info" / "input.txt"
ONE_NODE = NCCL_TESTS_CASES / "old_no_redop_allgather" / "input.txt"
# The captured run: all_reduce, 8 B .. 1 GiB by 2, 5 warm-up and 1000 timed iterations, 8 GPUs per node.
PLAN = SimpleNamespace(
    enabled=True,
    workload="dense",
    collectives=("all_reduce",),
    min_bytes=8,
    max_bytes=1 << 30,
    step_factor=2,
    warmup_iters=5,
    iters=1000,
    tool="nccl-tests",
    straggler_isolation=True,
    timeout_s=None,
)
# p4d.24xlarge: 4 EFA links of 100 Gb/s per node.
P4D = {"line_rate_gbps": 100, "expected_hca_count": 4, "bench_gpus_per_host": 8}


def printer(record: Path, captured: Path | None, rc: int = 0) -> str:
    """A stand-in binary: appends its arguments to ``record``, prints the captured output, exits ``rc``."""
    show = f"cat {shlex.quote(str(captured))}\n" if captured else ""
    return f'#!/bin/sh\nprintf "%s\\n" "$*" >> {shlex.quote(str(record))}\n{show}exit {rc}\n'


def hosts_of(bed: TestBed, names: list[str], extra: dict[str, Any]) -> list[Host]:
    common = {
        "ansible_user": "root",
        "ansible_ssh_private_key_file": str(bed.client_key),
        "diagnose_known_hosts_file": str(bed.known_hosts),
        "ansible_python_interpreter": sys.executable,
        "nccl_tests_dir": TOOLS_DIR,
        **extra,
    }
    return [
        Host(
            name,
            vars=Vars(
                {**common, "ansible_host": bed.hosts[name].address, "ansible_port": bed.hosts[name].port},
                name,
            ),
        )
        for name in names
    ]


class BenchRun:
    """One benchmark stage over some bed hosts, with everything it emitted."""

    def __init__(
        self, bed: TestBed, tmp_path: Path, names: list[str], plan: Any, extra: dict[str, Any]
    ) -> None:
        self.hosts = hosts_of(bed, names, extra)
        self.out = tmp_path / "out"
        self.run_id = f"it-nt-{secrets.token_hex(3)}"
        self.checks: list[CheckResult] = []
        self.benchmarks: list[dict[str, Any]] = []
        connections = {}
        for host in self.hosts:
            connections[host.name] = connect(host)
            connections[host.name].open()
        self.context = BenchContext(
            self.hosts,
            connections,
            {},
            plan,
            self.out,
            self.run_id,
            self.checks.append,
            self.benchmarks.append,
        )

    def run(self) -> None:
        try:
            run_benchmark_stage(self.context)
        finally:
            for connection in self.context.connections.values():
                connection.close()

    def check(self, check_id: str) -> CheckResult:
        return next(c for c in self.checks if c.id == check_id)

    def bench(self, collective: str) -> dict[str, Any]:
        return next(b for b in self.benchmarks if b["collective"] == collective)


def processes(bed: TestBed, host: TestHost, needle: str) -> list[str]:
    """Command lines inside one test host (its own pid namespace) that contain ``needle``."""
    return [line for line in bed.ssh(host, "ps -eo args=").stdout.splitlines() if needle in line]


def test_cli_run_measures_across_two_hosts_with_mpirun(testbed: TestBed, tmp_path: Path) -> None:
    record = tmp_path / "mpirun.argv"
    binaries = {"all_reduce_perf": printer(tmp_path / "unused", None, 1)}
    testbed.add_many(
        [
            HostSpec(
                "node1",
                tools={**binaries, "mpirun": printer(record, TWO_NODES)},
                env={"NCCL_NVLS_ENABLE": "0"},
            ),
            HostSpec("node2", tools={**binaries, "mpirun": printer(tmp_path / "unused", None, 1)}),
        ]
    )
    inventory = testbed.write_inventory(
        tmp_path / "inventory.yaml",
        host_vars={name: {"nccl_tests_mpi_host": f"gpu-{name}"} for name in ("node1", "node2")},
    )
    playbook = tmp_path / "nccl-tests.yaml"
    playbook.write_text(
        "name: nccl-tests\n"
        'checks: ["net.port_range"]\n'
        "vars:\n"
        f"  nccl_tests_dir: {TOOLS_DIR}\n"
        "  nccl_tests_mpi_args: --allow-run-as-root --tag-output\n"
        "  bench_gpus_per_host: 8\n"
        "  line_rate_gbps: 100\n"
        "  expected_hca_count: 4\n"
        "benchmarks:\n"
        "  collectives: [all_reduce]\n"
        "  min_bytes: 8\n"
        "  max_bytes: 1G\n"
        "  warmup_iters: 5\n"
        "  iters: 1000\n"
        "  tool: nccl-tests\n"
    )
    out = tmp_path / "out"
    code = main(
        ["run", "-i", str(inventory), "--playbook", str(playbook), "-o", str(out), "--format", "json", "-q"]
    )
    results = json.loads((out / "results.json").read_text())

    (argv,) = record.read_text().splitlines()
    assert argv.split() == [
        "-np", "16", "-H", "gpu-node1:8,gpu-node2:8", "--allow-run-as-root", "--tag-output",
        "-x", "NCCL_DEBUG=INFO", "-x", "NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH", "-x", "NCCL_NVLS_ENABLE",
        "-x", TOKEN_VAR, f"{TOOLS_DIR}/all_reduce_perf",
        "-b", "8", "-e", "1073741824", "-f", "2", "-w", "5", "-n", "1000", "-c", "1", "-d", "float", "-g", "1",
    ]  # fmt: skip
    (entry,) = results["benchmarks"]
    assert entry["tool"] == "nccl-tests" and entry["backend"] == "nccl"
    assert (entry["hosts"], entry["nodes"], entry["ranks"]) == (["node1", "node2"], 2, 16)
    assert [r["bytes"] for r in entry["rows"]] == [8 << i for i in range(28)]
    assert entry["rows"][-1]["busbw_gbps"] == 32.71 and entry["rows"][-1]["time_us"] == 61556.0
    assert all(r["wrong"] == 0 for r in entry["rows"]), "5e-07 is float rounding, within tolerance"
    assert "largest deviation 5e-07, within nccl-tests' tolerance" in entry["message"]
    assert entry["transport"] == {"inter_node": "NET/OFI", "intra_node": ["P2P/IPC"], "gdrdma": True}
    # Judged like a torch result: 85 % of 4 x 100 Gb/s at two nodes, and this run fell short.
    assert entry["status"] == "FAIL"
    assert "busbw 32.7 GB/s at 1 GiB on 2 nodes: below the normal range 36–49 GB/s" in entry["message"]
    assert entry["normal_range_gbps"] == [36.1, 48.9] and entry["judged_from_bytes"] == 64 << 20
    checks = {(c["id"], c["host"]): c for c in results["checks"]}
    transport = checks[("nccl.transport", None)]
    assert transport["status"] == "PASS" and "NET/OFI" in transport["message"]
    assert transport["evidence"] == "raw/node1/nccl-tests-all_reduce.log"
    assert checks[("bench.all_reduce", None)]["status"] == "FAIL"
    assert (out / "raw" / "node1" / "nccl-tests-all_reduce.log").read_text() == TWO_NODES.read_text()
    assert results["verdict"] == "FAIL" and code == 1


def test_a_missing_binary_is_an_error_naming_the_host(testbed: TestBed, tmp_path: Path) -> None:
    record = tmp_path / "mpirun.argv"
    unused = printer(tmp_path / "unused", None, 1)
    testbed.add_many(
        [
            HostSpec(
                "node1",
                tools={
                    "all_reduce_perf": unused,
                    "all_gather_perf": unused,
                    "mpirun": printer(record, TWO_NODES),
                },
            ),
            HostSpec("node2", tools={"all_reduce_perf": unused, "mpirun": unused}),
        ]
    )
    plan = SimpleNamespace(**{**vars(PLAN), "collectives": ("all_reduce", "all_gather")})
    stage = BenchRun(testbed, tmp_path, ["node1", "node2"], plan, P4D)
    stage.run()
    problem = stage.check("bench.nccl_tests")
    assert problem.status == "ERROR" and problem.host == "node2"
    assert problem.message.startswith(
        f"nccl-tests cannot run on node2: all_gather_perf is missing in {TOOLS_DIR}"
    )
    gather = stage.bench("all_gather")
    assert gather["status"] == "ERROR" and gather["tool"] == "nccl-tests"
    assert (
        gather["message"]
        == "all_gather not measured: nccl-tests cannot run: all_gather_perf is missing on node2"
    )
    assert stage.check("bench.all_gather").status == "ERROR"
    # The collective every host can run is still measured, once, with mpirun.
    assert len(record.read_text().splitlines()) == 1
    reduce = stage.bench("all_reduce")
    assert reduce["tool"] == "nccl-tests" and len(reduce["rows"]) == 28


def test_one_host_runs_the_binary_itself(testbed: TestBed, tmp_path: Path) -> None:
    record = tmp_path / "all_gather_perf.argv"
    testbed.add(HostSpec("node1", tools={"all_gather_perf": printer(record, ONE_NODE)}))
    plan = SimpleNamespace(
        **{**vars(PLAN), "collectives": ("all_gather",), "min_bytes": 1, "max_bytes": 8 << 30}
    )
    stage = BenchRun(testbed, tmp_path, ["node1"], plan, {"bench_gpus_per_host": 8, "nvlink_busbw_gbps": 230})
    stage.run()
    assert record.read_text().split() == [
        "-b", "1", "-e", "8589934592", "-f", "2", "-w", "5", "-n", "1000", "-c", "1", "-d", "float", "-g", "8",
    ]  # fmt: skip
    entry = stage.bench("all_gather")
    assert (entry["tool"], entry["nodes"], entry["ranks"], entry["status"]) == ("nccl-tests", 1, 8, "PASS")
    assert len(entry["rows"]) == 29 and entry["rows"][-1]["busbw_gbps"] == 223.39
    assert "within the normal range 196–264 GB/s" in entry["message"]
    assert "results not validated" in entry["message"], "that run had validation off (error N/A)"
    # That capture holds no NCCL connection line, and the verdict says so rather than guessing.
    assert stage.check("nccl.transport").status == "ERROR"
    assert not list(Path("/tmp").glob(f"diagnose-{stage.run_id}-*")), "the remote folders are removed"


def test_a_hung_run_is_stopped_on_every_host_of_the_job(testbed: TestBed, tmp_path: Path) -> None:
    """node1's mpirun starts a 'rank' on node2 over SSH, as Open MPI does, passing the token it was given
    with -x, prints the captured output up to the 64-byte row and hangs."""
    unused = printer(tmp_path / "unused", None, 1)
    node2 = testbed.add(HostSpec("node2", tools={"all_reduce_perf": unused, "mpirun": unused}))
    lines = TWO_NODES.read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if line.split(":")[-1].split()[:1] == ["128"])
    partial = tmp_path / "partial.txt"
    partial.write_text("".join(lines[:cut]))
    ssh = shlex.join(testbed.ssh_argv(node2, "")[:-1])
    remote = f'"export {TOKEN_VAR}=${TOKEN_VAR}; sleep 3600 </dev/null >/dev/null 2>&1 & echo rank-started"'
    mpirun = (
        "#!/bin/sh\n"
        f"{ssh} {remote} >> {shlex.quote(str(tmp_path / 'remote'))} 2>&1\n"
        f"cat {shlex.quote(str(partial))}\n"
        "exec sleep 3600\n"
    )
    testbed.add(HostSpec("node1", tools={"all_reduce_perf": unused, "mpirun": mpirun}))
    plan = SimpleNamespace(**{**vars(PLAN), "timeout_s": 2})
    stage = BenchRun(testbed, tmp_path, ["node1", "node2"], plan, P4D)
    stage.run()
    assert (tmp_path / "remote").read_text().strip() == "rank-started"
    entry = stage.bench("all_reduce")
    assert entry["status"] == "ERROR"
    assert "all_reduce of 128 bytes did not finish within 2 s (the collective hung)" in entry["message"]
    assert [r["bytes"] for r in entry["rows"]] == [8, 16, 32, 64], "rows measured before the hang are kept"
    for host in testbed.hosts.values():
        assert processes(testbed, host, "sleep 3600") == [], f"left behind on {host.name}"
    assert not any(c.id == "bench.cleanup" and c.status == "ERROR" for c in stage.checks)
