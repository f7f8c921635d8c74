"""``diagnose run``: where the hosts come from, the run executed with its progress on the terminal, and the
summary an operator reads at the end.

The engine (:mod:`diagnose.engine.run`) prints nothing; this module gives it a :class:`TerminalReporter`
(a progress bar on a terminal, the engine's problems on stderr) and words its outcome. The CLI maps that
outcome to the exit code.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

from diagnose.engine.reporter import Reporter
from diagnose.engine.run import Run, RunOutcome, RunRequest
from diagnose.render.acted import acted_lines
from diagnose.render.causes import cause_lines, causes_of
from diagnose.render.tally import coverage_line, coverage_of, tally_text, verdict_label
from diagnose.core.units import counted, duration
from diagnose.slurm.hosts import SlurmQuery

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


class TerminalReporter(Reporter):
    """A progress bar over the hosts on a terminal, silence otherwise (cron mail must stay one line); the
    engine's problems as ``diagnose: ...`` lines on stderr either way."""

    def __init__(self, show_progress: bool) -> None:
        self.show_progress = show_progress
        self._bar: Any = None
        self._task: Any = None

    def hosts_started(self, total: int) -> None:
        if not (self.show_progress and total):
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            transient=True,
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

    def problem(self, message: str) -> None:
        print(f"diagnose: {message}", file=sys.stderr)


def _terminate(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def execute(request: RunRequest, show_progress: bool) -> RunOutcome:
    """Run the request to its end; SIGTERM (a scheduler's stop) ends it like Ctrl-C, results kept."""
    signal.signal(signal.SIGTERM, _terminate)
    return Run(request, TerminalReporter(show_progress)).execute()


def summary_lines(document: dict[str, Any], out_dir: Path | None, written: list[Path]) -> list[str]:
    """The verdict with the count of each status, the hosts and the run folder; then what the verdict stands
    on (its coverage, one line); then, unless the run passed, why it did not: one line per cause (its
    status, hosts, checks, message and what to do, :mod:`diagnose.render.causes`, the grouping the report
    shows too), with the results it explains on a line under it (``+5 consequences (ids)``); then what diagnose did to nodes and the bug reports it brought home, at most three lines
    (:mod:`diagnose.render.acted`; nothing on a run that acted on none); then each file written. The counts are :mod:`diagnose.render.tally`'s, the same the report,
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
