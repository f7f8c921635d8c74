"""What a run has under way (issue 43, items 3 and 4): a step that runs on is told again every interval with
its hosts, its time against what was planned and its latest figure; a stage cut short is told as
interrupted with what it was still running, and results.json's ``run.stages`` says the same.

:class:`Underway` is driven as the engine drives it, its clock and the host batches in flight given by the
test, so no test waits; the real run, over sshd test hosts, is tests/integration/test_progress.py.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from diagnose.engine.reporter import HOST_STAGE, Reporter
from diagnose.engine.results import ResultsStore
from diagnose.engine.underway import MAX_TOLD, Underway
from diagnose.launchers.progress import LaunchProgress, Teller, figure_of


class Heard(Reporter):
    """What the caller's reporter was told: each heartbeat and each stage cut short, as lines."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def still(self, stage: str, hosts: Sequence[str], text: str) -> None:
        self.lines.append(f"{stage} on {','.join(hosts)}: {text}" if hosts else f"{stage}: {text}")

    def stage_interrupted(self, stage: str, seconds: float, running: Sequence[str] = ()) -> None:
        self.lines.append(f"{stage} interrupted after {seconds:g}: {list(running)}")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


BURNIN_ROW = {
    "event": "row",
    "collective": "burnin",
    "bytes": 0,
    "gpus": [{"tflops": 612.4}, {"tflops": 598.7}],
    "fields": ["clocks.sm", "clocks.mem", "temperature.gpu"],
    "samples": {
        "0000:18:00.0": [[1.0, 1980.0, 2619.0, 65.0], [2.0, 1965.0, 2619.0, 70.0]],
        "0000:2A:00.0": [[1.0, 1980.0, 2619.0, 68.0], [2.0, 1755.0, 2619.0, 71.0]],
    },
}


def test_a_long_step_is_told_again_each_interval_with_its_plan_and_latest_figure() -> None:
    heard, clock = Heard(), Clock()
    underway = Underway(heard, interval_s=30, clock=clock, running=list)
    teller = Teller(underway)
    with underway.stage("benchmarks", ["gpu1"]), teller.stage("GPU stress", ["gpu1"]):
        launch = LaunchProgress(teller, 8, {"burnin": 60.0}.get)
        launch.begin(["gpu1"], "torchrun")
        launch.record({"event": "begin", "collective": "burnin", "bytes": 0})
        clock.now += 29
        assert underway.beat() == 1 and heard.lines == [], "nothing before the interval; next due in 1 s"
        clock.now += 1
        underway.beat()
        assert heard.lines == [
            "GPU stress on gpu1: burnin, 8 ranks still running, 30 s of 1 min 00 s planned"
        ]
        launch.record(BURNIN_ROW)
        clock.now += 32
        underway.beat()
        assert heard.lines[-1] == (
            "GPU stress on gpu1: burnin, 8 ranks still running, 1 min 02 s of 1 min 00 s planned; "
            "latest 599 TFLOP/s, 71 °C, 1755 MHz"
        )
        launch.ended("done")
        clock.now += 30
        underway.beat()
        assert heard.lines[-1] == "GPU stress on gpu1: still running after 1 min 32 s", (
            "a stage whose launches ended is told itself"
        )
    assert [s["stage"] for s in underway.stages] == ["GPU stress", "benchmarks"]
    assert not any(s.get("interrupted") for s in underway.stages)


def test_a_stage_is_not_told_again_while_lines_about_the_stages_inside_it_come() -> None:
    heard, clock = Heard(), Clock()
    underway = Underway(heard, interval_s=30, clock=clock, running=list)
    teller = Teller(underway)
    with underway.stage("benchmarks", ["gpu1"]):
        with teller.stage("GPU stress", ["gpu1"]):
            clock.now += 29
            teller.step(["gpu1"], "sdc, 8 ranks")
            clock.now += 29
        clock.now += 1
        underway.beat()
        assert heard.lines == [], "the GPU stress just ended: the benchmarks around it are not silent"
        clock.now += 30
        underway.beat()
        assert heard.lines == ["benchmarks on gpu1: still running after 1 min 29 s"]


def test_the_host_stage_names_each_host_still_running_and_its_command() -> None:
    heard, clock = Heard(), Clock()
    running = [(f"q{i}", "ibstat", 31.0) for i in range(3, 3 + MAX_TOLD + 2)]
    underway = Underway(heard, interval_s=30, clock=clock, running=lambda: running)
    underway.hosts_started(8)
    underway.host_done("q1")
    underway.host_done("q2")
    clock.now += 31
    underway.beat()
    shown = "; ".join(f"q{i} still running ibstat (31 s)" for i in range(3, 3 + MAX_TOLD))
    assert heard.lines == [f"host checks: 2 of 8 hosts done after 31 s; {shown}; 2 more hosts still running"]


def test_many_launches_are_told_in_a_few_lines_not_one_each() -> None:
    heard, clock = Heard(), Clock()
    underway = Underway(heard, interval_s=30, clock=clock, running=list)
    teller = Teller(underway)
    with teller.stage("GPU stress", []):
        for n in range(10):
            teller.step([f"gpu{n}"], "sdc, 8 ranks")
        clock.now += 30
        underway.beat()
    assert len(heard.lines) == MAX_TOLD + 1
    assert heard.lines[-1] == f"GPU stress: and {10 - MAX_TOLD} more steps still running"


def test_a_host_stage_cut_short_is_recorded_interrupted_with_what_it_was_running(tmp_path: Path) -> None:
    heard, clock = Heard(), Clock()
    store = ResultsStore(tmp_path / "results.json", {"id": "run"})
    underway = Underway(heard, interval_s=30, clock=clock, running=lambda: [("q3", "ibstat", 6.2)])
    underway.keep(store)
    underway.hosts_started(3)
    clock.now += 6
    underway.stage_interrupted(HOST_STAGE, 6.04)
    assert heard.lines == ["host checks interrupted after 6.04: ['q3 still running ibstat (6 s)']"]
    written = json.loads((tmp_path / "results.json").read_text())["run"]["stages"]
    assert written == [
        {
            "stage": "host checks",
            "seconds": 6.0,
            "interrupted": True,
            "still_running": ["q3 still running ibstat (6 s)"],
        }
    ]


def test_a_benchmark_stage_cut_short_names_the_step_each_launch_was_at() -> None:
    heard, clock = Heard(), Clock()
    underway = Underway(heard, interval_s=30, clock=clock, running=list)
    teller = Teller(underway)
    try:
        with underway.stage("benchmarks", ["gpu1"]), teller.stage("GPU stress", ["gpu1"]):
            teller.step(["gpu1"], "burnin, 8 ranks", 600.0)
            clock.now += 20
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert [line.split(" after ")[0] for line in heard.lines] == [
        "GPU stress interrupted",
        "benchmarks interrupted",
    ]
    assert heard.lines[0].endswith(": ['gpu1 still running burnin, 8 ranks (20 s)']")
    assert [(s["stage"], s["still_running"]) for s in underway.stages] == [
        ("GPU stress", ["gpu1 still running burnin, 8 ranks (20 s)"]),
        ("benchmarks", []),
    ]
    assert "done" not in " ".join(heard.lines)


def test_a_row_without_figures_gives_none() -> None:
    assert figure_of({"event": "row", "collective": "sdc", "bytes": 0, "gpus": [{"checksum": "ab"}]}) is None
    assert figure_of({"event": "row", "collective": "all_reduce", "bytes": 1 << 20, "busbw_gbps": 41.25}) == (
        "41.2 GB/s busbw at 1 MiB"
    )
