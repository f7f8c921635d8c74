"""Progress on a terminal and in a log (issue 36, item 1): after the host bar, a run showed nothing for
minutes while the benchmarks ran. The terminal now shows the stage under way, its hosts and the latest step
(rich, live, gone once the stage ends); without a terminal each is a timestamped line.

The reporters are driven as the engine drives them, through a real rich Console writing to a terminal
(force_terminal) whose output is kept; the engine's side is held by tests/integration/test_progress.py.
"""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from diagnose.commands.run import LineReporter, TerminalReporter, reporter_for, where
from diagnose.engine.reporter import HOST_STAGE
from diagnose.engine.underway import Underway
from diagnose.launchers.progress import LaunchProgress, Teller

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def test_the_terminal_shows_the_stage_its_hosts_and_the_step_under_way_then_clears() -> None:
    screen = io.StringIO()
    reporter = TerminalReporter(Console(file=screen, force_terminal=True, width=120))
    teller = Teller(reporter)
    with reporter.stage("benchmarks", ["node1", "node2"]):
        launch = LaunchProgress(teller, 2)
        launch.begin(["node1", "node2"], "torchrun")
        launch.record({"event": "warm", "collective": "all_reduce"})
        shown = ANSI.sub("", screen.getvalue())
        assert "benchmarks on node[1-2]" in shown and "node[1-2]: all_reduce, 4 ranks" in shown
        with teller.stage("GPU stress", ["node1"]):
            stress = LaunchProgress(teller, 1)
            stress.begin(["node1"], "torchrun")
            stress.record({"event": "begin", "collective": "memtest", "bytes": 0})
            shown = ANSI.sub("", screen.getvalue())
            assert "  GPU stress on node1" in shown and "node1: memtest, 1 rank" in shown
            stress.ended("hung")
            assert "node1: torchrun hung, stopped after 0 s" in ANSI.sub("", screen.getvalue())
    assert reporter._live is None, "the display ends with the last stage"


def test_the_terminal_shows_a_long_step_told_again_and_a_stage_cut_short_stays_on_screen() -> None:
    """Issue 43: the live display shows the heartbeat's time against planned and latest figure, as the log
    does; Ctrl-C in the host checks leaves 'interrupted', never 'done', with the command still running."""
    screen = io.StringIO()
    now = [0.0]
    reporter = Underway(
        TerminalReporter(Console(file=screen, force_terminal=True, width=160)),
        interval_s=30,
        clock=lambda: now[0],
        running=lambda: [("q3", "ibstat", 6.0)],
    )
    teller = Teller(reporter)
    with reporter.stage("benchmarks", ["gpu1"]):
        teller.step(["gpu1"], "burnin, 8 ranks", 60.0)
        teller.figure(["gpu1"], "612 TFLOP/s, 71 °C")
        now[0] = 31.0
        reporter.beat()
        shown = ANSI.sub("", screen.getvalue())
        assert (
            "gpu1: burnin, 8 ranks still running, 31 s of 1 min 00 s planned; latest 612 TFLOP/s, 71 °C"
            in shown
        )
    reporter.hosts_started(3)
    reporter.stage_interrupted(HOST_STAGE, 6.2)
    shown = ANSI.sub("", screen.getvalue())
    assert "diagnose: host checks interrupted after 6 s; q3 still running ibstat (6 s)" in shown
    assert "done in" not in shown


def test_a_log_gets_one_stamped_line_a_stage_and_a_step_never_one_a_size() -> None:
    log = io.StringIO()
    reporter = LineReporter(log)
    teller = Teller(reporter)
    with reporter.stage("benchmarks", ["node1", "node2"]):
        launch = LaunchProgress(teller, 2)
        launch.begin(["node1", "node2"], "torchrun")
        for size in (4096, 16384, 65536):
            launch.record({"event": "begin", "collective": "all_reduce", "bytes": size})
            launch.record({"event": "row", "collective": "all_reduce", "bytes": size})
        launch.ended("done")
    reporter.run_finished(135.2)
    lines = log.getvalue().splitlines()
    stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ diagnose: "
    assert [re.sub(stamp, "", line) for line in lines] == [
        "benchmarks on node[1-2]",
        "benchmarks on node[1-2]: all_reduce, 4 ranks",
        "benchmarks done in 0 s",
        "done in 2 min 15 s",
    ]
    assert all(re.match(stamp, line) for line in lines)


def test_quiet_tells_nothing_and_long_host_lists_are_cut(capsys: pytest.CaptureFixture[str]) -> None:
    quiet = reporter_for(quiet=True, terminal=False)
    with quiet.stage("benchmarks", ["node1"]):
        Teller(quiet).step(["node1"], "all_reduce, 1 rank")
    quiet.run_finished(3.0)
    assert capsys.readouterr().err == "", "--quiet: cron mail stays the summary"
    assert isinstance(reporter_for(quiet=False, terminal=False), LineReporter)
    assert where([f"gpu{i:03d}" for i in range(1, 65)]) == "gpu[001-064]"
    assert where(["a", "b", "c", "d", "e", "f"]) == "a, b, c, d, … (6 hosts)"
