"""Progress without a terminal (issue 36, item 1): `diagnose run` under cron, CI or a pipe printed nothing
for minutes while the collectives and probes ran, so nobody could tell a slow stage from a hung one.

A fresh `diagnose run` process (stderr a pipe, as under cron) over two real sshd test hosts, with a short
gloo sweep and the fleet probes (two gloo ranks per host), must write timestamped lines on stderr naming each
stage, its hosts and each step as it starts, in the order they ran, before the summary on stdout; never a
line per measured size.

A step that runs on (issue 43, item 3: 41 s of silence during sdc on a CPU test host, a one-minute burn-in
told only when the GPU stress ended) must be told again every ``progress_interval_s`` (here 1 s instead of
30) with its host, its time against what was planned and its latest figure; a host stage held up by a
hanging ``ibstat`` names the host and the command. A host stage cut short by Ctrl-C (item 4: it read
``host checks done in 6 s``) must say ``host checks interrupted after``, with the host and the command it
was still running, on stderr, in results.json's ``run.stages`` and in the report.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest

from tests.support.bedhosts import command_lines, wait_until
from tests.support.cli import diagnose
from tests.support.paths import REPO
from tests.support.playbooks import write_playbook
from tests.support.testbed import HostSpec, Reply, TestBed

pytestmark = pytest.mark.integration

SWEEP_AND_PROBES = """name: progress
description: a short gloo sweep and the fleet probes
checks: [host.reachable, net.port_range]
benchmarks:
  collectives: [all_reduce]
  min_bytes: 4096
  max_bytes: 65536
  step_factor: 4
  warmup_iters: 1
  iters: 2
  straggler_isolation: false
  fleet_probes: true
"""
STAMPED = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) diagnose: (.+)$")


def test_a_run_without_a_terminal_tells_each_stage_host_and_step_on_stderr(
    testbed: TestBed, tmp_path: Path
) -> None:
    testbed.add_many([HostSpec("node1"), HostSpec("node2")])
    inventory = testbed.write_inventory(
        tmp_path / "inv.yaml",
        extra_vars={
            "diagnose_profile": "cpu-testbed",
            "bench_procs_per_host": 2,
            "bench_startup_timeout_s": 180,
            "ansible_python_interpreter": sys.executable,
        },
    )
    playbook = write_playbook(tmp_path, SWEEP_AND_PROBES)
    out = tmp_path / "out"
    argv = ["run", "-i", str(inventory), "--playbook", str(playbook), "-o", str(out), "--format", "json,html"]
    done = diagnose(*argv, cwd=tmp_path, timeout=400)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    stamped = [m.groups() for m in map(STAMPED.match, done.stderr.splitlines()) if m]
    told = [text for _, text in stamped]
    expected = [
        "host checks on 2 hosts",
        "host checks done in ",
        "benchmarks on node[1-2]",
        "benchmarks on node[1-2]: all_reduce, 4 ranks",
        "fleet probes on node[1-2]",
        "fleet probes on node1: memcpy, 1 rank",
        "fleet probes on node1: all_reduce, 2 ranks",
        "fleet probes done in ",
        "benchmarks done in ",
        "second snapshot on node[1-2]",
        "reports (html, json)",
        "done in ",
    ]
    at = [next((i for i, text in enumerate(told) if text.startswith(e)), None) for e in expected]
    assert None not in at, (
        f"missing {[e for e, i in zip(expected, at, strict=True) if i is None]}:\n{done.stderr}"
    )
    assert at == sorted(at), f"out of order:\n{done.stderr}"
    assert told.count("benchmarks on node[1-2]: all_reduce, 4 ranks") == 1, "one line a step, none a size"
    times = [datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ") for stamp, _ in stamped]
    assert times == sorted(times)
    assert all(not STAMPED.match(line) for line in done.stdout.splitlines()), "stdout keeps the summary only"
    assert done.stdout.startswith("diagnose: "), done.stdout


STRESS = """name: stress-progress
description: the GPU stress stage alone, its burn-in capped to seconds on CPU hosts
checks: [host.reachable]
vars:
  burnin_minutes: 10
benchmarks:
  enabled: true
  collectives: [all_reduce]
  min_bytes: 4K
  max_bytes: 4K
  warmup_iters: 1
  iters: 2
  straggler_isolation: false
  stress: true
"""
STILL = re.compile(r"^GPU stress on (node\d): (\S+), 2 ranks still running, (\d+) s(?: of (\d+) s planned)?")


def test_a_long_step_without_a_terminal_is_told_again_with_its_host_time_and_plan(
    testbed: TestBed, tmp_path: Path
) -> None:
    testbed.add_many([HostSpec("node1"), HostSpec("node2")])
    inventory = testbed.write_inventory(
        tmp_path / "inv.yaml",
        extra_vars={
            "diagnose_profile": "cpu-testbed",
            "bench_procs_per_host": 2,
            "bench_startup_timeout_s": 300,
            "ansible_python_interpreter": sys.executable,
            "progress_interval_s": 1,
        },
    )
    playbook = write_playbook(tmp_path, STRESS)
    argv = ["run", "-i", str(inventory), "--playbook", str(playbook), "-o", str(tmp_path / "out")]
    done = diagnose(*argv, "--format", "json", cwd=tmp_path, timeout=500)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    told = [m.group(2) for m in map(STAMPED.match, done.stderr.splitlines()) if m]
    still = [m for m in map(STILL.match, told) if m]
    assert still, f"no step told again while it ran:\n{done.stderr}"
    burnin = [m for m in still if m.group(2) == "burnin"]
    assert burnin, f"the burn-in (2 s on a CPU host) was not told again:\n{done.stderr}"
    assert all(m.group(4) == "2" for m in burnin), "the burn-in's time is set against the 2 s planned"
    assert {m.group(1) for m in still} <= {"node1", "node2"}
    ended = next(i for i, text in enumerate(told) if text.startswith("GPU stress done in "))
    assert all(told.index(m.string) < ended for m in still), "told while it ran, not after"


class HangingRun:
    """`diagnose run` in a fresh process over q1, q2 and q3, whose ``ibstat`` hangs, stderr a pipe read line by
    line as it comes, so that a test waits on what the run has said."""

    def __init__(self, testbed: TestBed, tmp_path: Path, formats: str = "json") -> None:
        testbed.add_many([HostSpec("q1"), HostSpec("q2")])
        self.stuck = testbed.add(HostSpec("q3", tools={"ibstat": Reply(stdout="partial\n", hang=True)}))
        inventory = testbed.write_inventory(tmp_path / "inv.yaml", extra_vars={"progress_interval_s": 1})
        text = "name: hang\ndescription: one hanging tool\nchecks: [host.reachable, ib.port_state]\n"
        playbook = write_playbook(tmp_path, text)
        self.out = tmp_path / "out"
        argv = [
            "run",
            "-i",
            str(inventory),
            "--playbook",
            str(playbook),
            "-o",
            str(self.out),
            "--format",
            formats,
        ]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "diagnose.cli", *argv, "-e", "command_timeout_s=300"],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self.said: list[str] = []  # stdout
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.stdout_reader = threading.Thread(target=self._read_stdout, daemon=True)
        self.stdout_reader.start()
        wait_until(lambda: command_lines(self.stuck, "ibstat"), 60, "ibstat to hang on q3")

    def _read(self) -> None:
        for line in self.proc.stderr or []:
            self.lines.append(line)

    def _read_stdout(self) -> None:
        for line in self.proc.stdout or []:
            self.said.append(line)

    def checked(self) -> set[str]:
        """The hosts results.json has check results of so far."""
        try:
            return {c["host"] for c in json.loads((self.out / "results.json").read_text())["checks"]}
        except (OSError, ValueError):
            return set()

    def interrupt(self) -> str:
        """Ctrl-C; the whole of stderr once the run has ended (exit 130); its stdout is kept in ``said``."""
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=60)
        self.reader.join(timeout=10)
        self.stdout_reader.join(timeout=10)
        stderr = "".join(self.lines)
        assert self.proc.returncode == 130, stderr
        return stderr


def test_a_host_stage_held_up_by_a_hanging_command_is_told_again_naming_host_and_command(
    testbed: TestBed, tmp_path: Path
) -> None:
    run = HangingRun(testbed, tmp_path)
    held_up = re.compile(
        r"diagnose: host checks: 2 of 3 hosts done after \d+ s; q3 still running ibstat \(\d+ s\)"
    )
    wait_until(lambda: any(held_up.search(line) for line in run.lines), 60, "the host stage told again")
    run.interrupt()


def test_ctrl_c_in_the_host_checks_says_interrupted_and_what_was_still_running(
    testbed: TestBed, tmp_path: Path
) -> None:
    run = HangingRun(testbed, tmp_path)
    wait_until(lambda: {"q1", "q2"} <= run.checked(), 60, "the results of q1 and q2")
    stderr = run.interrupt()
    assert "host checks done in" not in stderr, "a stage cut short is not done"
    said = re.search(
        r"diagnose: (host checks interrupted after \d+ s; q3 still running ibstat \(\d+ s\))\n", stderr
    )
    assert said, stderr
    out = run.out
    stages = json.loads((out / "results.json").read_text())["run"]["stages"]
    assert [s["stage"] for s in stages] == ["host checks"] and stages[0]["interrupted"] is True
    assert re.fullmatch(r"q3 still running ibstat \(\d+ s\)", stages[0]["still_running"][0]), stages
    report = diagnose("report", str(out), "--format", "html", cwd=tmp_path, timeout=120)
    assert report.returncode == 0, report.stderr
    html = (out / "report.html").read_text()
    shown = re.search(r'data-role="stages">([^<]*)<', html)
    assert shown and shown.group(1) == said.group(1), shown


def test_ctrl_c_prints_the_incomplete_verdict_and_writes_the_reports_asked_for(
    testbed: TestBed, tmp_path: Path
) -> None:
    """Issue 45, item 4: an interrupted run said nothing on stdout and wrote no report until `diagnose
    report`. Its stdout must hold the INCOMPLETE verdict with the counts so far and the run folder, and each
    report asked for must be written, of what was measured, saying INCOMPLETE."""
    run = HangingRun(testbed, tmp_path, formats="json,html,pdf,junit,prom")
    wait_until(lambda: {"q1", "q2"} <= run.checked(), 60, "the results of q1 and q2")
    stderr = run.interrupt()
    out = run.out
    document = json.loads((out / "results.json").read_text())
    assert document["verdict"] == "INCOMPLETE" and document["run"]["interrupted"] is True
    statuses = Counter(c["status"] for c in document["checks"])
    tally = ", ".join(f"{statuses[s]} {s}" for s in ("FAIL", "ERROR", "WARN", "PASS", "SKIP") if statuses[s])
    assert statuses["PASS"], document["checks"]
    said = "".join(run.said)
    verdict = rf"diagnose: INCOMPLETE( \(no profile chosen .*\))? — 3 hosts, {tally} — {re.escape(str(out))}"
    assert re.fullmatch(verdict, said.splitlines()[0]), said
    assert re.search(r"^diagnose: \d+ of \d+ results measured before the run was cut short", said, re.M), said
    html = (out / "report.html").read_text()
    assert re.search(r'class="verdict-word">INCOMPLETE<', html)
    assert "the run was interrupted" in html
    junit = (out / "junit.xml").read_text()
    assert re.search(r'<error message="[^"]*interrupted[^"]*" type="INCOMPLETE"', junit), junit
    prom = (out / "diagnose.prom").read_text()
    assert re.search(r"^diagnose_run_incomplete(\{\})? 1(\.0)?$", prom, re.M), prom
    written = [out / "report.html", out / "junit.xml", out / "diagnose.prom"]
    if importlib.util.find_spec("weasyprint") is not None:
        written.insert(1, out / "report.pdf")
        assert (out / "report.pdf").stat().st_size
    else:
        assert "diagnose: report.pdf not written" in stderr, stderr
    listed = [line.strip() for line in said.splitlines() if line.startswith("  ")]
    assert listed[-len(written) :] == [str(p) for p in written], said
