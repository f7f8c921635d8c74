"""Hostile input and faults against real sshd test hosts: what a site's security and operations review
asks of a tool that runs unattended on production.

No injection through any inventory or playbook text; no secret in any file written or on stdout/stderr;
nothing left running on a host after Ctrl-C; no unbounded output; a frozen host costs one command's
timeout, not the sum; no host needs an SFTP subsystem; bad connection values are configuration errors.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from diagnose.connectors.base import BATCH_SLACK_S, FREEZE_GRACE_S, KILL_GRACE_S
from tests.support.bedhosts import bench_processes, command_lines, wait_until
from tests.support.cli import diagnose
from tests.support.paths import REPO
from tests.support.playbooks import GLOO_BENCH, PORTS_ONLY, write_playbook
from tests.support.stagerun import StageRun
from tests.support.testbed import HostSpec, Reply, TestBed

pytestmark = pytest.mark.integration


def run_diagnose(
    tmp_path: Path, inventory: Path, text: str = PORTS_ONLY, *extra: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`diagnose run` in a fresh process over ``inventory`` with the playbook ``text``, into tmp/out."""
    argv = ["run", "-i", str(inventory), "--playbook", str(write_playbook(tmp_path, text))]
    return diagnose(*argv, "-o", str(tmp_path / "out"), *extra, cwd=tmp_path, timeout=timeout)


def written_text(folder: Path) -> str:
    """Every file a run wrote, as text (PDFs through pdftotext, so compressed streams hide nothing)."""
    parts = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        if path.suffix == ".pdf":
            done = subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True, check=True)
            parts.append(done.stdout)
        parts.append(path.read_bytes().decode("utf-8", errors="replace"))
    return "\n".join(parts)


# ------------------------------------------------------------------------------------------ 1. injection

KEY_PAYLOADS = ["C;touch {m};D", "$(touch {m})", "`touch {m}`", "A B", "X=1;touch {m}", "1BAD"]
VALUE_PAYLOADS = ["$(touch {m})", "`touch {m}`", "x; touch {m}", "'; touch {m}; '", 'a"b$(touch {m})']


@pytest.mark.parametrize("payload", KEY_PAYLOADS)
def test_bench_env_key_payload_is_a_config_error_naming_host_and_variable(
    testbed: TestBed, tmp_path: Path, payload: str
) -> None:
    marker = tmp_path / "pwned"
    host = testbed.add(HostSpec("node1"))
    key = payload.format(m=marker)
    inventory = testbed.write_inventory(tmp_path / "inv.yaml", host_vars={"node1": {"bench_env": {key: "1"}}})
    done = run_diagnose(tmp_path, inventory, GLOO_BENCH, timeout=120)
    assert done.returncode == 2, done.stderr
    line = done.stderr.strip()
    assert "\n" not in line and "bench_env" in line and "node1" in line and "inv.yaml:" in line
    assert not marker.exists()
    assert not (tmp_path / "out" / "results.json").exists(), "nothing may run on a configuration error"
    assert not host.log.read_text().count("Accepted publickey"), "no host may be touched"


def test_bench_env_key_payload_in_ini_text_is_refused_too(testbed: TestBed, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    testbed.add(HostSpec("node1"))
    inventory = testbed.write_inventory(
        tmp_path / "inv.ini", fmt="ini", extra_vars={"bench_env": f"OK=1,$(touch {marker})=2"}
    )
    done = run_diagnose(tmp_path, inventory, GLOO_BENCH, timeout=120)
    assert done.returncode == 2 and "bench_env" in done.stderr and "inv.ini:" in done.stderr
    assert not marker.exists()


def test_payloads_in_values_reach_no_shell(testbed: TestBed, tmp_path: Path) -> None:
    """Values of every variable that reaches a remote shell carry payloads; none may run, and the gloo
    benchmark still runs with the bench_env values exported as plain strings."""
    marker = tmp_path / "pwned"
    testbed.add_many([HostSpec("node1"), HostSpec("node2")])
    env = {f"DIAG_V{i}": p.format(m=marker) for i, p in enumerate(VALUE_PAYLOADS)}
    inventory = testbed.write_inventory(
        tmp_path / "inv.yaml",
        extra_vars={"bench_env": env, "bench_startup_timeout_s": 120},
        host_vars={
            "node1": {"ansible_python_interpreter": sys.executable},
            # The interpreter path itself is a payload on node2: quoted, it is a missing file.
            "node2": {"ansible_python_interpreter": f"python3;touch {marker}"},
        },
    )
    done = run_diagnose(tmp_path, inventory, GLOO_BENCH, "--format", "json", timeout=400)
    assert done.returncode in (0, 1), done.stderr
    assert not marker.exists(), "a payload ran"
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    probe = next(c for c in results["checks"] if c["id"] == "nccl.version" and c["host"] == "node2")
    assert "touch" in json.dumps(probe), "node2's interpreter path must be reported as given"


def test_nccl_tests_paths_and_mpirun_arguments_reach_no_shell(testbed: TestBed, tmp_path: Path) -> None:
    """nccl_tests_dir, mpirun and nccl_tests_mpi_args with payloads: preflight finds nothing to run,
    and nothing runs."""
    marker = tmp_path / "pwned"
    testbed.add_many([HostSpec("node1"), HostSpec("node2")])
    inventory = testbed.write_inventory(
        tmp_path / "inv.yaml",
        extra_vars={
            "nccl_tests_dir": f"/opt/nccl-tests;touch {marker}",
            "mpirun": f"mpirun$(touch {marker})",
            "nccl_tests_mpi_args": f"--mca x `touch {marker}`",
        },
    )
    text = GLOO_BENCH.replace("benchmarks:\n", "benchmarks:\n  tool: nccl-tests\n")
    done = run_diagnose(tmp_path, inventory, text, "--format", "json", timeout=300)
    assert done.returncode == 1, done.stderr
    assert not marker.exists()
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert any(c["id"] == "bench.nccl_tests" and c["status"] == "ERROR" for c in results["checks"])


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("ansible_host", "127.0.0.1\n  ProxyCommand touch {m}"),
        ("ansible_host", "-oProxyCommand=touch {m}"),
        ("ansible_user", "root\n  ProxyCommand touch {m}"),
        ("ansible_ssh_private_key_file", 'key"\n  ProxyCommand touch {m}'),
        ("nccl_tests_mpi_host", "node;touch {m}"),
    ],
)
def test_connection_text_that_would_reach_ssh_config_or_mpirun_is_refused(
    testbed: TestBed, tmp_path: Path, variable: str, value: str
) -> None:
    """The custom checks write an ssh_config and mpirun takes ``-H`` names: a line break or an option
    there would run a command on the controller. Such values stop the run with exit 2."""
    marker = tmp_path / "pwned"
    testbed.add(HostSpec("node1"))
    inventory = testbed.write_inventory(
        tmp_path / "inv.yaml", host_vars={"node1": {variable: value.format(m=marker)}}
    )
    done = run_diagnose(tmp_path, inventory, timeout=60)
    assert done.returncode == 2, done.stderr
    assert variable in done.stderr and "inv.yaml:" in done.stderr
    assert not marker.exists()


# --------------------------------------------------------------------------------------------- 2. secrets


def test_a_secret_given_with_e_is_in_no_file_and_no_output(testbed: TestBed, tmp_path: Path) -> None:
    secret = "S3cr3t-" + os.urandom(6).hex()
    testbed.add(HostSpec("node1"))
    inventory = testbed.write_inventory(tmp_path / "inv.yaml", extra_vars={"site_api_token": secret})
    out = tmp_path / "out"
    done = run_diagnose(
        tmp_path,
        inventory,
        PORTS_ONLY,
        "--format",
        "json,html,pdf,junit,prom",
        "-e",
        f"api_token={secret}",
        "-e",
        f'{{"db_password": "{secret}"}}',
        f"--extra-vars=ansible_become_pass={secret} x=1",
        f"-eclient_secret={secret}",
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    assert secret not in done.stdout + done.stderr
    record = written_text(out)
    assert "REDACTED" in record and "x=1" in record, "the command line is still recorded, masked"
    assert secret not in record


# ---------------------------------------------------------------------------------------- 3. interrupts


def _checked_hosts(out: Path) -> set[str]:
    try:
        return {c["host"] for c in json.loads((out / "results.json").read_text())["checks"]}
    except (OSError, ValueError):
        return set()


def _start(argv: list[str], cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "diagnose.cli", *argv],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_stops_the_batch_still_running_on_a_hanging_host(
    testbed: TestBed, tmp_path: Path, signum: int
) -> None:
    quick = testbed.add(HostSpec("quick"))
    stuck = testbed.add(HostSpec("stuck", tools={"ibstat": Reply(stdout="partial\n", hang=True)}))
    inventory = testbed.write_inventory(tmp_path / "inv.yaml")
    text = (
        "name: hang\ndescription: one hanging tool\nchecks: [host.reachable, net.port_range, ib.port_state]\n"
    )
    out = tmp_path / "out"
    proc = _start(
        [
            "run",
            "-i",
            str(inventory),
            "--playbook",
            str(write_playbook(tmp_path, text)),
            "-o",
            str(out),
            "--format",
            "json",
            "-e",
            "command_timeout_s=300",
        ],
        tmp_path,
    )
    wait_until(lambda: command_lines(stuck, "ibstat"), 60, "ibstat to hang on the stuck host")
    wait_until(lambda: quick.name in _checked_hosts(out), 60, "the quick host's results")
    proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    wait_until(lambda: not command_lines(stuck, "ibstat"), 5, "the stuck batch to be gone")
    assert not command_lines(stuck, "timeout ")
    assert "everything started on the hosts was stopped" in stderr
    results = json.loads((out / "results.json").read_text())
    assert results["verdict"] == "INCOMPLETE" and results["run"]["interrupted"] is True
    quick_results = [c for c in results["checks"] if c["host"] == quick.name]
    assert any(c["id"] == "net.port_range" and c["status"] == "PASS" for c in quick_results)


def test_interrupt_during_the_benchmark_stops_torchrun_on_every_host(
    testbed: TestBed, tmp_path: Path
) -> None:
    hosts = testbed.add_many([HostSpec("node1"), HostSpec("node2")])
    inventory = testbed.write_inventory(
        tmp_path / "inv.yaml",
        extra_vars={"ansible_python_interpreter": sys.executable, "bench_startup_timeout_s": 120},
    )
    long_sweep = GLOO_BENCH.replace("max_bytes: 16384", "max_bytes: 67108864").replace(
        "iters: 2", "iters: 20"
    )
    out = tmp_path / "out"
    proc = _start(
        [
            "run",
            "-i",
            str(inventory),
            "--playbook",
            str(write_playbook(tmp_path, long_sweep)),
            "-o",
            str(out),
            "--format",
            "json,junit",
        ],
        tmp_path,
    )
    wait_until(lambda: all(command_lines(h, "program.py") for h in hosts), 180, "the ranks to start")
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    # SIGKILLed ranks that are exiting count as stopped; ps lists them until they are reaped, which took over
    # 5 s once on a CI machine at a load average above 200
    deadline = time.monotonic() + 15
    while any(bench_processes(testbed, h) for h in hosts) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = {h.name: testbed.ssh(h, "ps -eo pid=,stat=,args=").stdout for h in hosts}
    assert not any(bench_processes(testbed, h) for h in hosts), (
        f"ranks left: {left}\nstderr: {stderr[-3000:]}"
    )
    results = json.loads((out / "results.json").read_text())
    assert results["verdict"] == "INCOMPLETE"
    # what was measured before the benchmarks is reported: the verdict on stdout, the JUnit CI reads
    verdict = (
        rf"diagnose: INCOMPLETE( \(no profile chosen .*\))? — 2 hosts, \d+ PASS.* — {re.escape(str(out))}\n"
    )
    assert re.match(verdict, stdout), stdout
    assert f"  {out / 'junit.xml'}" in stdout.splitlines(), stdout
    assert 'type="INCOMPLETE"' in (out / "junit.xml").read_text()


# --------------------------------------------------------------------------------- 4. unbounded output


def test_a_50_mib_output_is_capped_with_head_and_tail_kept(testbed: TestBed, tmp_path: Path) -> None:
    flood = (
        "#!/bin/sh\necho 'first line of the flood'\n"
        "head -c 52428800 /dev/zero | tr '\\000' 'x'\necho\necho 'last line of the flood'\n"
    )
    testbed.add_many([HostSpec("loud", tools={"ibstat": flood}), HostSpec("calm")])
    inventory = testbed.write_inventory(tmp_path / "inv.yaml", extra_vars={"max_output_bytes": 1048576})
    text = "name: loud\ndescription: a flood\nchecks: [host.reachable, net.port_range, ib.port_state]\n"
    out = tmp_path / "out"
    done = run_diagnose(tmp_path, inventory, text, "--format", "json", timeout=240)
    assert done.returncode in (0, 1), done.stderr
    evidence = out / "raw" / "loud" / "ibstat.txt"
    kept = evidence.read_text()
    assert evidence.stat().st_size < 1100000
    assert kept.startswith("first line of the flood") and kept.rstrip().endswith("last line of the flood")
    assert "bytes cut from the middle of 52428" in kept
    results = json.loads((out / "results.json").read_text())
    port_state = {c["host"]: c for c in results["checks"] if c["id"] == "ib.port_state"}
    assert port_state["loud"]["status"] in ("ERROR", "FAIL")  # judged on what was kept, not lost
    assert any(c["host"] == "calm" and c["status"] == "PASS" for c in results["checks"])


# ------------------------------------------------------------------------------------- 5. frozen host


def test_a_frozen_host_costs_one_timeout_and_is_named(testbed: TestBed, tmp_path: Path) -> None:
    """Timed from the moment ibstat started on the frozen host: one timeout (3 s, its kill grace, the
    freeze grace, the 2 s stop of a batch that cannot answer) is 15 s from there; the sum of the four
    commands' timeouts, the batch's backstop, is 30 s from the batch's start. The bound lies between."""
    flag = tmp_path / "ibstat-started"
    slow = f"#!/bin/sh\ntouch {flag}\nsleep 2\necho 'CA mlx5_0'\n"
    frozen = testbed.add(HostSpec("frozen", tools={"ibstat": slow}))
    testbed.add(HostSpec("fine"))
    timeout = 3
    inventory = testbed.write_inventory(tmp_path / "inv.yaml", extra_vars={"command_timeout_s": timeout})
    text = (
        "name: freeze\ndescription: a host frozen mid-batch\n"
        "checks: [host.reachable, ib.port_state, net.port_range, nccl.env]\n"
    )
    out = tmp_path / "out"
    proc = _start(
        [
            "run",
            "-i",
            str(inventory),
            "--playbook",
            str(write_playbook(tmp_path, text)),
            "-o",
            str(out),
            "--format",
            "json",
        ],
        tmp_path,
    )
    try:
        wait_until(flag.exists, 60, "ibstat to start on the frozen host")
        started = time.monotonic()
        frozen.freeze()
        _, stderr = proc.communicate(timeout=60)
    finally:
        frozen.thaw()
    held = time.monotonic() - started
    one = timeout + KILL_GRACE_S + FREEZE_GRACE_S + 2.0
    the_sum = 4 * (timeout + KILL_GRACE_S) + BATCH_SLACK_S
    assert held < (one + the_sum) / 2, f"a frozen host held the run {held:.0f} s (one timeout: {one:.0f} s)"
    assert proc.returncode == 1, stderr
    results = json.loads((out / "results.json").read_text())
    mine = {c["id"]: c for c in results["checks"] if c["host"] == "frozen"}
    assert mine["host.reachable"]["status"] == "FAIL"
    assert "stopped answering" in mine["host.reachable"]["message"]
    for check_id in ("ib.port_state", "net.port_range", "nccl.env"):
        assert mine[check_id]["status"] == "ERROR", mine[check_id]
        assert "stopped answering" in mine[check_id]["message"]
    fine = {c["id"]: c for c in results["checks"] if c["host"] == "fine"}
    assert fine["host.reachable"]["status"] == fine["net.port_range"]["status"] == "PASS"
    assert not any("stopped answering" in c["message"] for c in fine.values())


# ----------------------------------------------------------------------------------------- 7. no SFTP


def test_hosts_without_an_sftp_subsystem_run_the_benchmark(testbed: TestBed, tmp_path: Path) -> None:
    testbed.add_many([HostSpec("node1", sftp=False), HostSpec("node2", sftp=False)])
    node1 = testbed.hosts["node1"]
    ssh = testbed.ssh_argv(node1, "true")
    sftp = subprocess.run(
        ["sftp", "-F", "/dev/null", "-P", str(node1.port), *ssh[5:-2], "-b", "-", ssh[-2]],
        input="ls\n",
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert sftp.returncode != 0, "the host must really have no SFTP subsystem"
    run = StageRun(testbed, tmp_path, "it-nosftp")
    run()
    entry = run.bench("all_reduce")
    assert entry["status"] in ("PASS", "WARN"), entry["message"]
    assert entry["rows"] and not any(r["wrong"] for r in entry["rows"])


# ------------------------------------------------------------------------------- 8. connection values


@pytest.mark.parametrize(
    ("variable", "value", "words"),
    [
        ("ansible_port", "abc", "must be an integer"),
        ("ansible_port", 70000, "between 1 and 65535"),
        ("ansible_connection", "winrm", "not supported"),
        ("ansible_ssh_timeout", "soon", "must be a number"),
        ("max_output_bytes", 10, "at least 1024"),
    ],
)
def test_bad_connection_values_exit_2_naming_file_and_line(
    testbed: TestBed, tmp_path: Path, variable: str, value: object, words: str
) -> None:
    testbed.add(HostSpec("node1"))
    inventory = testbed.write_inventory(tmp_path / "inv.yaml", host_vars={"node1": {variable: value}})
    done = run_diagnose(tmp_path, inventory, timeout=60)
    assert done.returncode == 2, done.stderr
    line = done.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert words in line and variable in line
    assert line.startswith(f"diagnose: {inventory}:")


def test_a_custom_check_path_with_shell_characters_runs_as_a_file_name(
    testbed: TestBed, tmp_path: Path
) -> None:
    """Custom testinfra modules are handed to pytest as argv words, never through a shell."""
    marker = tmp_path / "pwned"
    module = tmp_path / f"site;touch {marker.name};x.py"
    module.write_text("def test_root_exists(host):\n    assert host.file('/').is_directory\n")
    testbed.add(HostSpec("node1"))
    inventory = testbed.write_inventory(tmp_path / "inv.yaml")
    text = PORTS_ONLY + f"custom_checks: [{json.dumps(module.name)}]\n"
    done = run_diagnose(tmp_path, inventory, text, "--format", "json", timeout=240)
    assert done.returncode == 0, done.stderr
    assert not marker.exists()
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    custom = [c for c in results["checks"] if c["id"].startswith("custom.")]
    assert custom and all(c["status"] == "PASS" for c in custom), custom


def test_the_nightly_time_budget_stops_a_hanging_batch_on_the_host(testbed: TestBed, tmp_path: Path) -> None:
    """A run out of its time budget abandons the hosts still answering checks and stops their batches."""
    stuck = testbed.add(HostSpec("stuck", tools={"ibstat": Reply(stdout="partial\n", hang=True)}))
    testbed.add(HostSpec("quick"))
    inventory = testbed.write_inventory(tmp_path / "inv.yaml", extra_vars={"command_timeout_s": 300})
    text = (
        "name: night\ndescription: a short budget\nchecks: [host.reachable, net.port_range, ib.port_state]\n"
        "nightly:\n  time_budget_s: 4\n"
    )
    began = time.monotonic()
    done = run_diagnose(tmp_path, inventory, text, "--format", "json", "--history", str(tmp_path / "h.db"))
    assert time.monotonic() - began < 60, "the budget, not the 300 s command timeout, ends the run"
    assert done.returncode == 1, done.stderr
    wait_until(lambda: not command_lines(stuck, "ibstat"), 5, "the stuck batch to be gone")
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    reach = {c["host"]: c for c in results["checks"] if c["id"] == "host.reachable"}
    assert reach["stuck"]["status"] == "ERROR" and "time budget" in reach["stuck"]["message"]
    assert reach["quick"]["status"] == "PASS"
