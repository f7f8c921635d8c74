"""``diagnose run``: where the hosts come from, the run executed with its progress on the terminal, and the
summary an operator reads at the end.

The engine (:mod:`diagnose.engine.run`) prints nothing; this module gives it a reporter — on a terminal a
:class:`TerminalReporter` (a bar over the hosts, then the stage, hosts and step under way), without one a
:class:`LineReporter` (a timestamped stderr line per stage and step, and again every
``progress_interval_s`` while one goes on), with ``--quiet`` nothing but the engine's problems — and words
its outcome. The CLI maps that outcome to the exit code.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
import warnings
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

from diagnose.core.units import counted, duration
from diagnose.engine.reporter import HOST_STAGE, Reporter
from diagnose.engine.retry import RETRY_FILE
from diagnose.engine.run import Run, RunOutcome, RunRequest
from diagnose.render.acted import acted_lines
from diagnose.render.causes import cause_lines, causes_of
from diagnose.render.hostlist import fold
from diagnose.render.stage_times import stage_entry, stage_text
from diagnose.render.tally import coverage_line, coverage_of, tally_text, verdict_label
from diagnose.targets.slurm_nodes import SlurmQuery

#: How many host groups a progress line names before it counts the rest.
MAX_GROUPS = 4
#: The order statuses are counted in on the summary line, worst first.
TALLY_ORDER = ("FAIL", "ERROR", "WARN", "PASS", "SKIP")


def slurm_query(
    slurm: bool, submit: bool, partition: str | None, nodes: str | None, state: str | None
) -> SlurmQuery | None:
    """The Slurm host source the ``--slurm*`` options ask for, or None when none is given."""
    if not (slurm or submit or partition or nodes or state):
        return None
    if submit:  # sbatch picks the job's nodes; a state only narrows the rotation's candidates
        return SlurmQuery(partition, nodes, allocation=False)
    return SlurmQuery(partition, nodes, state)


def where(hosts: Sequence[str]) -> str:
    """Hosts as a progress line names them: folded into ranges (``node[1-64]``), the first few groups of a
    list that would not fold."""
    folded = fold(hosts)
    if len(folded) <= MAX_GROUPS:
        return ", ".join(folded)
    return f"{', '.join(folded[:MAX_GROUPS])}, … ({counted(len(hosts), 'host')})"


class TerminalReporter(Reporter):
    """On a terminal: a progress bar over the hosts, then, while the benchmarks and the later stages run, a
    live display of each stage under way (with its time) and the latest step (which host, which collective
    or phase), which a long step's heartbeat rewrites with its time against planned and its latest figure.
    A normal end leaves nothing behind: the summary follows on a clean screen; a stage cut short leaves one
    line saying so and what it was still running. The engine's problems are ``diagnose: ...`` lines on
    stderr."""

    def __init__(self, console: Any = None) -> None:
        from rich.console import Console

        self.console = console or Console(stderr=True)
        self._bar: Any = None
        self._task: Any = None
        self._live: Any = None
        self._stages: list[tuple[str, Any]] = []
        self._step: Any = None
        self._lock = threading.Lock()

    def hosts_started(self, total: int) -> None:
        if not total:
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            transient=True,
            console=self.console,
        )
        self._task = self._bar.add_task("hosts", total=total)
        self._bar.start()

    def host_done(self, name: str) -> None:
        if self._bar is not None:
            self._bar.update(self._task, advance=1, description=name)

    def hosts_finished(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def stage_started(self, stage: str, hosts: Sequence[str] = ()) -> None:
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        with self._lock:
            if self._live is None:
                self._live = Progress(
                    SpinnerColumn(),
                    TextColumn("{task.description}", markup=False),
                    TimeElapsedColumn(),
                    transient=True,
                    console=self.console,
                )
                self._live.start()
            indent = "  " * len(self._stages)
            text = f"{indent}{stage} on {where(hosts)}" if hosts else f"{indent}{stage}"
            self._stages.append((stage, self._live.add_task(text, total=None)))
            self._drop_step()
            self._live.refresh()  # at once, not at the next tick: a short stage is shown too

    def step(self, stage: str, hosts: Sequence[str], detail: str, planned_s: float | None = None) -> None:
        with self._lock:
            self._show_step(f"{where(hosts)}: {detail}" if hosts else detail)

    def still(self, stage: str, hosts: Sequence[str], text: str) -> None:
        if stage == HOST_STAGE and self._bar is not None:
            self._bar.update(self._task, description=text)
            return
        with self._lock:
            self._show_step(f"{where(hosts)}: {text}" if hosts else text)

    def _show_step(self, text: str) -> None:
        if self._live is None:
            return
        self._drop_step()  # added anew, so it stays under the stage it belongs to
        indent = "  " * len(self._stages)
        self._step = self._live.add_task(f"{indent}{text}", total=None)
        self._live.refresh()

    def stage_finished(self, stage: str, seconds: float) -> None:
        with self._lock:
            if self._live is None or not self._stages:
                return
            _, task = self._stages.pop()
            self._live.remove_task(task)
            self._drop_step()
            if not self._stages:
                self._live.stop()
                self._live = None

    def stage_interrupted(self, stage: str, seconds: float, running: Sequence[str] = ()) -> None:
        if stage == HOST_STAGE:
            self.hosts_finished()
        else:
            self.stage_finished(stage, seconds)
        self.console.print(
            f"diagnose: {stage_text(stage_entry(stage, seconds, running))}", markup=False, highlight=False
        )

    def _drop_step(self) -> None:
        if self._step is not None:
            self._live.remove_task(self._step)
            self._step = None

    def problem(self, message: str) -> None:
        print(f"diagnose: {message}", file=sys.stderr)


class LineReporter(Reporter):
    """Without a terminal (cron, CI, a pipe): one timestamped line on stderr per stage, per step and per
    stage's end (``2026-11-27T07:09:19Z diagnose: benchmarks on node[1-2]: all_reduce, 4 ranks``), and one
    each heartbeat while a step goes on (``GPU stress on node1: burnin, 8 ranks still running, 31 s of
    1 min 00 s planned; latest 71 °C``), so that a log shows what ran when, and a slow stage is told from a
    hung one. Never a line per host or per measured row; stdout keeps only the summary."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream
        self._lock = threading.Lock()
        self._hosts_began = 0.0

    def say(self, text: str) -> None:
        """One line, stamped in UTC to the second; a stream that is gone costs the run nothing."""
        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        stream = self.stream or sys.stderr
        with self._lock:
            try:
                stream.write(f"{stamp} diagnose: {text}\n")
                stream.flush()
            except (OSError, ValueError):
                return

    def hosts_started(self, total: int) -> None:
        self._hosts_began = time.monotonic()
        self.say(f"{HOST_STAGE} on {counted(total, 'host')}")

    def hosts_finished(self) -> None:
        self.say(stage_text(stage_entry(HOST_STAGE, time.monotonic() - self._hosts_began)))

    def stage_started(self, stage: str, hosts: Sequence[str] = ()) -> None:
        self.say(f"{stage} on {where(hosts)}" if hosts else stage)

    def step(self, stage: str, hosts: Sequence[str], detail: str, planned_s: float | None = None) -> None:
        self.say(f"{stage} on {where(hosts)}: {detail}")

    def still(self, stage: str, hosts: Sequence[str], text: str) -> None:
        self.say(f"{stage} on {where(hosts)}: {text}" if hosts else f"{stage}: {text}")

    def stage_finished(self, stage: str, seconds: float) -> None:
        self.say(stage_text(stage_entry(stage, seconds)))

    def stage_interrupted(self, stage: str, seconds: float, running: Sequence[str] = ()) -> None:
        self.say(stage_text(stage_entry(stage, seconds, running)))

    def run_finished(self, seconds: float) -> None:
        self.say(f"done in {duration(seconds)}")

    def problem(self, message: str) -> None:
        print(f"diagnose: {message}", file=sys.stderr)


def reporter_for(quiet: bool, terminal: bool) -> Reporter:
    """``--quiet``: the engine's problems only (cron mail stays the summary); on a terminal the live display;
    otherwise timestamped lines on stderr."""
    if quiet:
        return QuietReporter()
    return TerminalReporter() if terminal else LineReporter()


class QuietReporter(Reporter):
    """No progress at all; the engine's problems still reach stderr (they need a human)."""

    def problem(self, message: str) -> None:
        print(f"diagnose: {message}", file=sys.stderr)


def _terminate(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def execute(request: RunRequest, quiet: bool) -> RunOutcome:
    """Run the request to its end, telling progress as :func:`reporter_for` says; SIGTERM (a scheduler's
    stop) ends it like Ctrl-C, results kept. With ``--quiet`` no library's Python warning reaches stderr
    either: there it is a cron job's mail, and it holds the verdict line alone."""
    signal.signal(signal.SIGTERM, _terminate)
    with warnings.catch_warnings():
        if quiet:
            warnings.simplefilter("ignore")
        return Run(request, reporter_for(quiet, sys.stderr.isatty())).execute()


def summary_lines(document: dict[str, Any], out_dir: Path | None, written: list[Path]) -> list[str]:
    """The verdict with the count of each status, the hosts and the run folder; then what the verdict stands
    on (its coverage, one line); then, unless the run passed, why it did not: one line per cause (its
    status, hosts, checks, message and what to do, :mod:`diagnose.render.causes`, the grouping the report
    shows too), with the results it explains on a line under it (``+5 consequences (ids)``); then what diagnose did to nodes and the bug reports it brought home, at most three lines
    (:mod:`diagnose.render.acted`; nothing on a run that acted on none); then, when hosts failed, the
    ``--limit @failed.retry`` that retests them; then each file written. The counts are :mod:`diagnose.render.tally`'s, the same the report,
    JUnit and Prometheus show."""
    coverage = coverage_of(document)
    hosts = len(document["hosts"])
    note = document["run"].get("profile_note")
    label = verdict_label(document["verdict"], coverage)
    verdict = f"{label} ({note})" if note else label
    tally = tally_text(coverage, TALLY_ORDER)
    lines = [
        f"diagnose: {verdict} — {counted(hosts, 'host')}, {tally or 'no results'} — {out_dir}",
        f"diagnose: {coverage_line(document['verdict'], coverage)}",
    ]
    if document["verdict"] != "PASS":
        lines += cause_lines(causes_of(document), _rest_at(out_dir, written))
    lines += acted_lines(document)
    retry = out_dir / RETRY_FILE if out_dir is not None else None
    if retry is not None and retry.is_file() and retry.stat().st_size:
        which = (
            "that failed or were not checked to the end"
            if document["verdict"] == "INCOMPLETE"
            else "that failed once repaired"
        )
        lines.append(f"diagnose: to retest the hosts {which}: --limit @{retry}")
    return lines + [f"  {path}" for path in written]


def _rest_at(out_dir: Path | None, written: list[Path]) -> str:
    """Where the causes the terminal leaves out are: the report's findings, and every result in results.json."""
    results = next((p for p in written if p.name == "results.json"), None)
    if results is None and out_dir is not None:
        results = out_dir / "results.json"
    report = next((p for p in written if p.suffix in (".html", ".pdf")), None)
    where = [f"the findings of {report}"] if report else []
    where += [f"every result in {results}"] if results else []
    return "; ".join(where) or "results.json"


def interrupted_lines(results: Path | None, stopped: list[str], not_stopped: list[str]) -> list[str]:
    """What the operator reads on stderr after Ctrl-C: where the results so far are, what was stopped, and
    whether anything started on the hosts may still run (each problem on a line of its own)."""
    lines = [f"diagnose: interrupted; results so far are in {results}"]
    lines += [f"diagnose: stopped {line}" for line in stopped]
    if not_stopped:
        lines.append("diagnose: could not stop everything it started:")
        lines += [f"  {problem}" for problem in not_stopped]
    else:
        lines.append("diagnose: everything started on the hosts was stopped")
    return lines
