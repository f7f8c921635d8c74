"""The ``srun`` connector: a Slurm node through a one-task step of the job that holds it.

Where compute nodes refuse SSH (only jobs run there), the host checks still reach every node of an
allocation: each script runs as ``srun --jobid J --overlap --nodes 1 --ntasks 1 --nodelist NODE
/bin/sh -c SCRIPT`` (``ansible_connection: srun``; the default for the nodes of an allocation, see
:mod:`diagnose.targets.slurm_nodes`). ``--overlap`` lets it share the node with the benchmark's step and with the
other checks. The transport is a local program like ``local``'s shell, so it shares that connector's
streaming loop; batches, caps, the frozen-host watchdog, stopping by session (another step on the same
node runs the kill script) and files written through the exec stream come from the base class unchanged.

Variables: ``slurm_job_id`` (default ``$SLURM_JOB_ID``: the allocation diagnose runs in) and
``slurm_node`` (the node's Slurm name, default the host's name).

:class:`SrunStep` runs one batch on many nodes as ONE step (a task per node), for the host stage of
:mod:`diagnose.engine.step_stage`: at 16,384 nodes the per-node path asks slurmctld for 32,768 steps
(a ``true`` to open each node, then its batch), this for 8 (one per wave of 2,048). srun brings every
task's output home over its own connections, labelled with the task id (``--label``); two things make
that exact:

* srun's buffered I/O cuts a line at 1 KiB and labels each piece as a line of its own, so each task
  passes its batch's two streams through ``awk``, which cuts every line into pieces of at most
  :data:`PIECE_BYTES` behind a one-letter tag (``o`` a stdout line, ``O`` a piece of one still going on,
  ``e``/``E`` the same for stderr, on the task's stderr); the controller glues them back, byte for byte;
* the task's first line names its node and step (``n <node> <job>.<step>``): Slurm numbers the tasks
  in its own node order, so the node is read, never guessed.

A node that never printed its first line "did not start"; one whose batch stopped making progress (no
marker past the running command's own timeout and grace, as the per-host watchdog of
:mod:`diagnose.connectors.base` decides) has "no output by the deadline". Once every node has finished
or is one of those, the step is cancelled (``scancel JOB.STEP``): one frozen node does not hold the others'
results, and nothing of the step is left running. ``--no-kill`` keeps the step going when a node fails
under it (its slurmd gone): the watchdog names that node, the others finish.
"""

from __future__ import annotations

import contextlib
import math
import os
import secrets
import selectors
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from diagnose.connectors.base import (
    BATCH_SLACK_S,
    DEFAULT_CONNECT_TIMEOUT_S,
    FREEZE_GRACE_S,
    KILL_GRACE_S,
    ConnectError,
    Connection,
    Exec,
    Sink,
    batch_script,
    framed_outputs,
)
from diagnose.connectors.local import stream_process
from diagnose.core.check import Command
from diagnose.core.hosts import Host
from diagnose.core.model import CommandOutput
from diagnose.core.process import ProgramError, run_program
from diagnose.core.streams import DEFAULT_MAX_OUTPUT_BYTES, FramedStream
from diagnose.parsers.srun_output import task_endings

# A step is created by slurmctld and started by slurmd: slower than an SSH login on a busy controller.
OPEN_TIMEOUT_S = 30.0
#: Nodes per step of the host stage (variable ``slurm_step_nodes``): larger node lists go in waves.
DEFAULT_STEP_NODES = 2048
#: The longest piece of a line a task prints: srun cuts a line at 1 KiB (tag, label and newline
#: included), so pieces stay well below.
PIECE_BYTES = 900
# How long a cancelled step may take to end (slurmstepd's KillWait is 30 s by default).
CANCEL_WAIT_S = 40.0
SCANCEL_TIMEOUT_S = 30.0
# Cut every line into tagged pieces (f: the tag of a last piece, p: of one that goes on; w: the width),
# each piece written whole by one write (an interactive mawk writes every printf argument on its own).
_ENCODE = (
    '{ s = $0; while (length(s) > w) { o = p substr(s, 1, w) "\\n"; printf "%s", o; s = substr(s, w + 1) } '
    'o = f s "\\n"; printf "%s", o; fflush() }'
)


def step_argv(job: str, node: str, script: str) -> list[str]:
    """One task on ``node`` in job ``job`` running ``script``; srun's informational lines kept quiet."""
    return [
        "srun",
        f"--jobid={job}",
        "--overlap",
        "--nodes=1",
        "--ntasks=1",
        f"--nodelist={node}",
        "--quiet",
        "--export=ALL",
        "--job-name=diagnose-check",
        "/bin/sh",
        "-c",
        script,
    ]


def node_of(host: Host) -> str:
    """The host's Slurm node name: ``slurm_node``, default the host's name."""
    return host.vars.str("slurm_node") or host.name


def job_of(host: Host) -> str | None:
    """The job whose steps reach the host: ``slurm_job_id``, default ``$SLURM_JOB_ID``; None outside one."""
    return host.vars.str("slurm_job_id") or os.environ.get("SLURM_JOB_ID") or None


class SrunConnection(Connection):
    """One node of a Slurm job (``slurm_node``, default the host name), reached by steps of that job."""

    def __init__(self, host: Host) -> None:
        super().__init__(host)
        self.node = node_of(host)
        self.job = job_of(host)
        self.connect_timeout = host.vars.float("diagnose_connect_timeout", None) or DEFAULT_CONNECT_TIMEOUT_S

    def open(self) -> None:
        """Check that a step reaches the node now: a quick ``true`` through srun."""
        if self.job is None:
            raise ConnectError(
                "ansible_connection=srun needs a Slurm allocation: run inside salloc or sbatch "
                "(diagnose run --slurm-submit), or set slurm_job_id"
            )
        result = self.run("true", timeout=max(self.connect_timeout, OPEN_TIMEOUT_S))
        if result.error:
            raise ConnectError(result.error)
        if result.timed_out:
            raise ConnectError(f"no step of job {self.job} started on {self.node} in time")
        if result.exit_code != 0:
            words = next((ln.strip() for ln in result.stderr.splitlines() if ln.strip()), "no error text")
            raise ConnectError(f"srun could not reach {self.node} in job {self.job}: {words[:300]}")

    def _execute(
        self, script: str, stdin: bytes | None, out: Sink, err: Sink, deadline: Callable[[], float]
    ) -> Exec:
        if self.job is None:
            return Exec(error="no Slurm job to start a step in (slurm_job_id, SLURM_JOB_ID)")
        return stream_process(step_argv(self.job, self.node, script), stdin, out, err, deadline)


def task_script(batch: str) -> str:
    """What every task of a checks step runs: its node and step first, then ``batch`` with each of its
    streams cut into tagged pieces on the task's stream of the same name (see the module docstring).
    One writer per stream: two ``awk`` on one pipe would interleave their pieces mid-line."""
    encode = f"LC_ALL=C $a -v w={PIECE_BYTES}"
    return "\n".join(
        [
            'printf "n %s %s.%s\\n" "$SLURMD_NODENAME" "$SLURM_JOB_ID" "$SLURM_STEP_ID"',
            f"b={shlex.quote(batch)}",
            f"e={shlex.quote(_ENCODE)}",
            # mawk (Debian's awk) waits for a full input buffer unless interactive: no progress would
            # reach the controller before the batch ends.
            'a=awk; case $(awk -W version 2>&1 </dev/null) in *mawk*) a="awk -W interactive";; esac',
            "exec 3>&1",
            f'{{ /bin/sh -c "$b" 2>&4 </dev/null | {encode} -v f=o -v p=O "$e" >&3; }} 4>&1 '
            f'| {encode} -v f=e -v p=E "$e" >&2',
        ]
    )


def checks_step_argv(job: str | None, nodes: Sequence[str], minutes: int) -> list[str]:
    """One task per node of ``nodes``: a step of job ``job`` beside whatever runs there (``--overlap``),
    or a job of its own where none is held (``--time`` bounds it). The step goes on when a node fails
    under it (``--no-kill``) or a task exits badly; output labelled by task."""
    where = [f"--jobid={job}", "--overlap"] if job else [f"--time={minutes}"]
    return [
        "srun",
        *where,
        f"--nodes={len(nodes)}",
        f"--ntasks={len(nodes)}",
        "--ntasks-per-node=1",
        f"--nodelist={','.join(nodes)}",
        "--no-kill",
        "--kill-on-bad-exit=0",
        "--label",
        "--export=ALL",
        "--job-name=diagnose-checks",
    ]


@dataclass
class NodeRun:
    """One node's task in a checks step, as the controller follows it."""

    node: str
    out: FramedStream
    err: FramedStream
    started: float | None = None  # when its first line arrived
    progress_at: float = 0.0  # when its last marker arrived
    markers: int = -1
    until: float = math.inf  # past this without progress, the node is taken for frozen
    problem: str | None = None  # why its batch did not finish; None while it may
    pieces: dict[bytes, bytes] = field(default_factory=dict)  # tag -> a line not yet complete


@dataclass
class StepResult:
    """What one node's task of the step gave: every command's output, and ``error`` when the node did
    not start or did not finish (then the commands it never finished carry that error too)."""

    outputs: dict[str, CommandOutput]
    error: str | None = None
    started: bool = False


_LIVE: dict[int, SrunStep] = {}
_LIVE_LOCK = threading.Lock()


class SrunStep:
    """One batch of commands on ``nodes`` as a single step (job ``job``, or one of its own when None).

    :meth:`run` starts it, follows every task from srun's output on the controller and returns a
    :class:`StepResult` per node; :meth:`cancel` (from another thread: Ctrl-C, the run's time budget)
    ends it with ``scancel``.
    """

    def __init__(
        self,
        job: str | None,
        nodes: Sequence[str],
        commands: Sequence[Command],
        timeout_cap: float | None = None,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        start_timeout: float = OPEN_TIMEOUT_S,
    ) -> None:
        self.job = job
        self.nodes = list(nodes)
        self.commands = list(commands)
        self.token = "@@diagnose-" + secrets.token_hex(8)
        self.limits = {c.key: min(c.timeout, timeout_cap or c.timeout) for c in self.commands}
        self.script = task_script(batch_script(self.commands, self.token, timeout_cap))
        self.budget = sum(limit + KILL_GRACE_S for limit in self.limits.values()) + BATCH_SLACK_S
        self.start_timeout = start_timeout
        self.runs = {
            n: NodeRun(
                n, FramedStream(self.token, max_output_bytes), FramedStream(self.token, max_output_bytes)
            )
            for n in self.nodes
        }
        self.by_task: dict[int, NodeRun] = {}
        self.step: str | None = None  # JOB.STEP, from the first task's line
        self.srun_lines: list[str] = []  # srun's own words, and what tasks said before their batch began
        self.proc: subprocess.Popen[bytes] | None = None
        self.cancelled: str | None = None
        self.begun = 0.0

    @property
    def argv(self) -> list[str]:
        minutes = math.ceil((self.start_timeout + self.budget) / 60) + 1
        return [*checks_step_argv(self.job, self.nodes, minutes), "/bin/sh", "-c", self.script]

    def run(self, stop: Callable[[], str | None] | None = None) -> dict[str, StepResult]:
        """Run the step to its end; ``stop`` says why to cancel it now (None: go on)."""
        if not self.commands:
            return {n: StepResult({}, started=True) for n in self.nodes}
        self.begun = time.monotonic()
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # Ctrl-C on the terminal is ours to act on: scancel
            )
        except OSError as exc:
            return self.results(f"did not start: cannot start srun: {exc.strerror or exc}")
        with _LIVE_LOCK:
            _LIVE[id(self)] = self
        try:
            self._follow(stop)
        finally:
            with _LIVE_LOCK:
                _LIVE.pop(id(self), None)
            if self.proc.poll() is None:  # an exception on the way: nothing of the step outlives us
                self.cancel("diagnose stopped following the step")
                self.proc.wait()
        return self.results(None)

    def _follow(self, stop: Callable[[], str | None] | None) -> None:
        proc = self.proc
        assert proc is not None and proc.stdout is not None and proc.stderr is not None
        selector = selectors.DefaultSelector()
        selector.register(proc.stdout, selectors.EVENT_READ, False)
        selector.register(proc.stderr, selectors.EVENT_READ, True)
        pending = {proc.stdout.fileno(): b"", proc.stderr.fileno(): b""}
        open_streams = 2
        kill_at = math.inf
        try:
            while open_streams:
                now = time.monotonic()
                if self.cancelled is None:
                    reason = (stop() if stop is not None else None) or self._hopeless(now)
                    if reason:
                        self.cancel(reason)
                if self.cancelled is not None and kill_at == math.inf:
                    kill_at = now + CANCEL_WAIT_S
                if now > kill_at:
                    _signal(proc, signal.SIGKILL)
                    self.srun_lines.append(f"srun did not end {CANCEL_WAIT_S:.0f} s after the cancel; killed")
                    break
                for key, _ in selector.select(timeout=0.2):
                    data = os.read(key.fd, 65536)
                    if not data:
                        selector.unregister(key.fileobj)
                        open_streams -= 1
                        data = b"\n" if pending[key.fd] else b""
                    lines = (pending[key.fd] + data).split(b"\n")
                    pending[key.fd] = lines.pop()
                    self.take_lines(lines, stderr=key.data)
        finally:
            selector.close()
            proc.stdout.close()
            proc.stderr.close()
        proc.wait()

    def take_lines(self, lines: list[bytes], stderr: bool = False) -> None:
        """Complete lines from srun's stdout (or ``stderr``): its tasks' tagged pieces (stdout: ``n``,
        ``o``, ``O``; stderr: ``e``, ``E``) go to their node; anything else is srun's or a task's own
        words, kept for the messages. A task's consecutive lines reach its stream in one piece: at 2,048
        nodes a wave brings millions of lines to this one thread."""
        tags = b"eE" if stderr else b"noO"
        now = time.monotonic()
        held: list[bytes] = []  # complete lines for ``holder``, not yet fed
        holder: NodeRun | None = None
        for line in lines:
            label, _, payload = line.partition(b": ")
            task = int(label) if label.strip().isdigit() else None
            tag = payload[:1]
            if task is None or not tag or tag not in tags:
                text = line.decode("utf-8", errors="replace").strip()
                if task is not None:  # a task's words before its batch began (no awk, no sh)
                    text = f"task {task}: {payload.decode('utf-8', errors='replace')}"
                if text:
                    self.srun_lines.append(text)
                continue
            if tag == b"n":
                self._started(task, payload[1:].decode("utf-8", errors="replace").split(), now)
                continue
            run = self.by_task.get(task)
            if run is None:
                continue
            if run is not holder:
                self._feed(holder, held, stderr, now)
                holder, held = run, []
            if tag in b"OE":
                run.pieces[tag] = run.pieces.get(tag, b"") + payload[1:]
            else:
                held += [run.pieces.pop(tag.upper(), b""), payload[1:], b"\n"]
        self._feed(holder, held, stderr, now)

    def _feed(self, run: NodeRun | None, held: list[bytes], stderr: bool, now: float) -> None:
        if run is None or not held:
            return
        if stderr:
            run.err.feed(b"".join(held))
            return
        run.out.feed(b"".join(held))
        if run.out.markers != run.markers:
            run.markers, run.progress_at = run.out.markers, now
            run.until = self._until(run, now)

    def _started(self, task: int, words: list[str], now: float) -> None:
        if not words or words[0] not in self.runs:
            self.srun_lines.append(f"task {task} started on a node not asked for: {' '.join(words)}")
            return
        run = self.runs[words[0]]
        run.started = run.progress_at = now
        run.until = self._until(run, now)
        self.by_task[task] = run
        if self.step is None and len(words) > 1 and "." in words[1]:
            self.step = words[1]

    def _until(self, run: NodeRun, now: float) -> float:
        """When the node counts as frozen unless it shows progress: the command now running (or next)
        may take its own timeout, its kill grace and the freeze grace, within the whole batch's budget."""
        keys = [c.key for c in self.commands]
        begun = [k for k in keys if k in run.out.sections]
        if not begun:
            key = keys[0]
        elif run.out.current is None and len(begun) < len(keys):
            key = keys[len(begun)]
        else:
            key = begun[-1]
        assert run.started is not None
        return min(run.started + self.budget, now + self.limits[key] + KILL_GRACE_S + FREEZE_GRACE_S)

    def _finished(self, run: NodeRun) -> bool:
        section = run.out.sections.get(self.commands[-1].key)
        return section is not None and section.end is not None

    def _hopeless(self, now: float) -> str | None:
        """Why to cancel the step now: every node has finished, or is frozen, or never started in time.
        Marks the nodes that are hopeless on the way."""
        waiting = False
        for run in self.runs.values():
            if run.problem is not None or self._finished(run):
                continue
            if run.started is None:
                if now - self.begun > self.start_timeout:
                    said = f" ({self.srun_lines[-1]})" if self.srun_lines else ""
                    run.problem = (
                        f"did not start: no task of the step began on {run.node} within "
                        f"{self.start_timeout:.0f} s{said}"
                    )
                else:
                    waiting = True
            elif now > run.until:
                current = run.out.current or self._next_key(run)
                run.problem = (
                    f"no output by the deadline: {run.node} made no progress for {now - run.progress_at:.0f} s "
                    f"while `{current}` ran, past that command's own timeout (node frozen, or its task lost)"
                )
            else:
                waiting = True
        if waiting:
            return None
        stuck = sorted(r.node for r in self.runs.values() if r.problem is not None)
        return f"nothing more to wait for ({', '.join(stuck)} did not finish)" if stuck else None

    def _next_key(self, run: NodeRun) -> str:
        left = [c.key for c in self.commands if c.key not in run.out.sections]
        return left[0] if left else self.commands[-1].key

    def cancel(self, reason: str) -> None:
        """End the step now: ``scancel JOB.STEP`` once a task has named it, else srun's own double
        interrupt (a step still being created). ``reason`` goes to every node not finished."""
        if self.cancelled is not None:
            return
        self.cancelled = reason
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        if self.step is not None:
            try:
                done = run_program(["scancel", self.step], SCANCEL_TIMEOUT_S)
                failed = done.returncode != 0 and (done.stderr.strip()[:200] or f"exit {done.returncode}")
            except ProgramError as exc:
                failed = str(exc)
            self.srun_lines.append(
                f"scancel {self.step} failed: {failed}" if failed else f"step {self.step} cancelled: {reason}"
            )
            if not failed:
                return
        _signal(proc, signal.SIGINT)
        time.sleep(0.3)
        _signal(proc, signal.SIGINT)  # twice within a second: srun gives the step up at once

    def results(self, error: str | None = None) -> dict[str, StepResult]:
        """Every node's outcome from what arrived (``error``: why none of them ran)."""
        failures = {}
        for ending in task_endings(self.srun_lines):
            if ending["how"] == "node failure":
                failures[ending["nodes"]] = f"Slurm reported a node failure on {ending['nodes']}"
        said = next((ln for ln in self.srun_lines if ln.startswith("srun: error:")), None)
        results = {}
        for run in self.runs.values():
            outputs = framed_outputs(run.out, run.err, self.commands)
            problem = error or failures.get(run.node) or run.problem
            if problem is None and not self._finished(run):
                if run.started is None:
                    problem = "did not start" + (
                        f": {said}" if said else " (srun ended without starting its task)"
                    )
                elif self.cancelled is not None:
                    problem = f"the step was cancelled ({self.cancelled}) while `{self._next_key(run)}` ran"
                else:
                    problem = f"its task ended before the batch finished, in `{self._next_key(run)}`"
                    mark = next((f"task {t}: " for t, r in self.by_task.items() if r is run), None)
                    words = [ln[len(mark) :] for ln in self.srun_lines if mark and ln.startswith(mark)]
                    if words:  # the task's own words: a shell or awk that could not run
                        problem += f" ({words[-1][:300]})"
            if problem is not None:
                for output in outputs.values():
                    if output.error:
                        output.error = problem
            results[run.node] = StepResult(outputs, problem, started=run.started is not None)
        return results


def cancel_running_steps(reason: str) -> None:
    """Cancel every checks step in flight (Ctrl-C, the run's time budget); each ``run`` then returns."""
    with _LIVE_LOCK:
        live = list(_LIVE.values())
    for step in live:
        step.cancel(reason)


def _signal(proc: subprocess.Popen[bytes], signum: int) -> None:
    """Signal srun's session on the controller; it may have ended since it was last looked at."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signum)
