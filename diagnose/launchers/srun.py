"""torchrun as the tasks of one Slurm step: ``srun`` inside the allocation instead of a start per host.

Inside a Slurm job the nodes are the scheduler's: a benchmark started over SSH would escape its
accounting, its cgroups and its cleanup. Here the controller (the batch host, or a login node inside
``salloc``) starts one step of the job, one task per node, and follows it from its own two output streams:

1. ``srun --jobid J --nodes N --ntasks-per-node 1 --nodelist ... --label /bin/sh -c TASK`` starts in a
   session of its own on the controller, the program and the files beside it (:func:`shipped_files`) on
   its stdin as one tar stream, which srun hands to every task;
2. each task finds its node rank from ``$SLURMD_NODENAME`` among the launch's hosts (rank 0 is the first
   host, as with every launcher, whatever order Slurm gives the step's nodes), unpacks the files into
   ``/tmp/diagnose-<run>-<tag>-n<rank>/``, prints a marker line with its rank and the step id, then
   becomes ``torchrun --node-rank <rank>`` with a static rendezvous at the first host, its error output
   kept in that folder (srun loses a task's last stderr lines when ``--kill-on-bad-exit`` ends the step);
3. rank 0's progress lines reach the controller through srun's labelled stdout; srun's own verdict on
   each task (``srun: error: n2: task 1: Exited with exit code 1``) says which host failed, so nothing is
   polled on the hosts (:meth:`SrunLaunch.poll`);
4. a hung or interrupted step is cancelled with ``scancel <job>.<step>`` and named in the message; then,
   as for every launch, whatever still carries the launch's token is killed on each host over its
   connection and the NCCL logs come home (:mod:`diagnose.launchers.base`).

Chosen by ``bench_launcher: srun`` (the default for the nodes of an allocation, see
:mod:`diagnose.targets.slurm_nodes`). Variables: ``slurm_job_id`` (default ``$SLURM_JOB_ID``), ``slurm_node``
(a host's Slurm node name, default its name), and those of torchrun (``bench_python``,
``bench_master_addr``, ``bench_master_port``). Every Slurm command is an argv list, never a shell line.
"""

from __future__ import annotations

import contextlib
import io
import os
import shlex
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from diagnose.core.hosts import Host
from diagnose.core.model import CommandOutput
from diagnose.core.process import ProgramError, run_program
from diagnose.launchers.base import (
    TERM_GRACE_S,
    Launch,
    LaunchError,
    LaunchSpec,
)
from diagnose.launchers.remote import remote_dir
from diagnose.launchers.stopping import TOKEN_VAR
from diagnose.launchers.torchrun_argv import (
    PROGRAM_NAME,
    bench_python,
    free_port,
    free_port_script,
    program_args,
    shipped_files,
    torchrun_args,
)
from diagnose.parsers.srun_output import split_labelled, task_endings
from diagnose.parsers.torchrun_failure import rank_failure

#: The line each task prints first: ``@@diagnose-node <rank> <job>.<step>``.
NODE_MARK = "@@diagnose-node"
#: The task's node rank in its shell script (found from ``$SLURMD_NODENAME``).
RANK = "$i"
#: How srun begins its line on a task that exited by itself (the others ended on a signal).
EXITED = "Exited with exit code"
# How long a cancelled step may take to leave squeue (KillWait is 30 s by default; the test bed's is less).
CANCEL_WAIT_S = 40.0
SLURM_TIMEOUT_S = 30.0


def uses_srun(hosts: Sequence[Host]) -> bool:
    """Whether the launch goes through srun: the first host's ``bench_launcher``."""
    return bool(hosts) and hosts[0].vars.str("bench_launcher") == "srun"


def slurm_node(host: Host) -> str:
    return host.vars.str("slurm_node") or host.name


def job_of(host: Host) -> str | None:
    return host.vars.str("slurm_job_id") or os.environ.get("SLURM_JOB_ID") or None


def srun_argv(job: str, nodes: Sequence[str], tag: str) -> list[str]:
    """One task per node of ``nodes`` in job ``job``, output labelled by task, the controller's
    environment passed on (``--export=ALL`` whatever the site's default), the step killed as soon as
    one task fails, sharing the nodes with diagnose's own check steps (``--overlap``)."""
    return [
        "srun",
        f"--jobid={job}",
        f"--nodes={len(nodes)}",
        f"--ntasks={len(nodes)}",
        "--ntasks-per-node=1",
        f"--nodelist={','.join(nodes)}",
        "--overlap",
        "--label",
        "--export=ALL",
        "--kill-on-bad-exit=1",
        f"--job-name=diagnose-{tag}",
    ]


def task_script(
    nodes: Sequence[str],
    folder_base: str,
    token: str,
    pythons: Sequence[str],
    node_env: Sequence[dict[str, str]],
    torchrun: Sequence[str],
    args: Sequence[str],
) -> str:
    """The shell each task runs: find its rank by node name, unpack the files from stdin (a tar stream of
    :func:`files_archive`), become torchrun.

    ``torchrun`` holds the options with ``$i`` for the node rank; ``args`` are the program's, with paths
    relative to the task's folder. Everything from the inventory is quoted here.
    """
    branches = []
    for rank, (python, env) in enumerate(zip(pythons, node_env, strict=True)):
        settings = [f"py={shlex.quote(python)}", *(f"export {k}={shlex.quote(v)}" for k, v in env.items())]
        branches.append(f"{rank}) {'; '.join(settings)};;")
    options = " ".join(f'"{o}"' if o.endswith(f"={RANK}") else shlex.quote(o) for o in torchrun)
    return "\n".join(
        [
            f"nodes={shlex.quote(' '.join(nodes))}",
            'i=0; for n in $nodes; do [ "$n" = "$SLURMD_NODENAME" ] && break; i=$((i+1)); done',
            'case "$i" in',
            *branches,
            '*) echo "diagnose: node $SLURMD_NODENAME is not one of this launch\'s ($nodes)" >&2; exit 96;;',
            "esac",
            f"export {TOKEN_VAR}={shlex.quote(token)}",
            f'd={shlex.quote(folder_base)}"$i"',
            # torchrun's agent and ranks make their temp folders (torchelastic_*) in TMPDIR: the folder's.
            'export TMPDIR="$d/tmp"',
            # -m: the controller's clock may be ahead of the node's, and tar would warn about every file.
            'mkdir -p "$d/logs" "$d/tmp" && cd "$d" && tar -x -m --no-same-owner -f - || exit 97',
            f'echo "{NODE_MARK} $i $SLURM_JOB_ID.$SLURM_STEP_ID"',
            # The node keeps its own error output: srun drops a task's last words when the step is killed.
            "exec 2>err.txt",
            f'exec "$py" -m torch.distributed.run {options} {PROGRAM_NAME} {" ".join(map(shlex.quote, args))}',
        ]
    )


def files_archive(files: Mapping[str, str]) -> bytes:
    """``files`` (name -> text) as one uncompressed tar stream: a task has no connection to be sent files
    over, only the stdin srun forwards to every task, and tar is on every node."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as archive:
        for name, text in files.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def slurm_command(argv: list[str], timeout: float = SLURM_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """A Slurm client command (scancel, squeue); its failure to start is an answer, not an exception."""
    try:
        return run_program(argv, timeout)
    except ProgramError as exc:
        return subprocess.CompletedProcess(argv, 127, "", str(exc))


class SrunLaunch(Launch):
    """One Slurm step: a task per host, each a torchrun agent with ``spec.nproc`` ranks."""

    runner = "srun"

    def __init__(self, spec: LaunchSpec) -> None:
        super().__init__(spec)
        self.nodes = [slurm_node(h) for h in self.hosts]
        self.job = job_of(self.hosts[0]) if self.hosts else None
        self.local = Path(tempfile.mkdtemp(prefix=f"diagnose-srun-{spec.tag}-"))
        self.proc: subprocess.Popen[bytes] | None = None
        self.step: str | None = None
        self._task_rank: dict[int, int] = {}
        self._read = {"out.txt": 0, "err.txt": 0}
        self._pending = {"out.txt": b"", "err.txt": b""}
        self._srun_lines: list[str] = []
        self._orphans: list[str] = []

    # -- start ----------------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the step on the controller and return at once (srun waits for the step by itself)."""
        spec, first = self.spec, self.hosts[0]
        if self.job is None:
            raise LaunchError(
                "bench_launcher=srun needs a Slurm allocation: run inside salloc or sbatch "
                "(diagnose run --slurm-submit), or set slurm_job_id",
                [first.name],
            )
        strangers = sorted(h.name for h in self.hosts if job_of(h) != self.job)
        if strangers:
            raise LaunchError(f"{', '.join(strangers)} are not in Slurm job {self.job}", strangers)
        port = first.vars.int("bench_master_port", None)
        if port is None:
            port = free_port(first, self._run(first, free_port_script(bench_python(first))))
        single = len(self.hosts) == 1
        addr = "127.0.0.1" if single else first.vars.str("bench_master_addr") or first.address
        script = task_script(
            self.nodes,
            remote_dir(spec.run_id, spec.tag, 0).removesuffix("0"),
            self.token,
            [bench_python(h) for h in self.hosts],
            [{**spec.env, **spec.host_env.get(h.name, {})} for h in self.hosts],
            torchrun_args(len(self.hosts), RANK, spec.nproc, addr, port),
            program_args(spec, "."),
        )
        files = self.local / "files.tar"
        files.write_bytes(files_archive(shipped_files(spec)))
        argv = [*srun_argv(self.job, self.nodes, spec.tag), "/bin/sh", "-c", script]
        with open(files, "rb") as stdin, self._open("out.txt") as out, self._open("err.txt") as err:
            try:
                self.proc = subprocess.Popen(
                    argv, stdin=stdin, stdout=out, stderr=err, start_new_session=True
                )
            except OSError as exc:
                raise LaunchError(f"cannot start srun: {exc.strerror or exc}", [first.name]) from None

    def _open(self, name: str) -> IO[bytes]:
        return open(self.local / name, "wb")

    # -- follow ---------------------------------------------------------------------------------------
    def poll(self) -> dict[str, CommandOutput]:
        """Each host's exit status as srun reports it, and rank 0's new progress lines: read on the
        controller from srun's own output, so the hosts are not asked."""
        out = self._new_lines("out.txt")
        err = self._new_lines("err.txt")
        progress = []
        tasks, _ = split_labelled("\n".join(out))
        for task, lines in tasks.items():
            for line in lines:
                if line.startswith(NODE_MARK):
                    self._note_task(task, line)
                elif self._task_rank.get(task) == 0:
                    progress.append(line)
        self._srun_lines += split_labelled("\n".join(err))[1]
        codes, lost = self._codes()
        data = "".join(f"{line}\n" for line in progress)
        results = {}
        for index, host in enumerate(self.hosts):
            if host.name in self.lost:
                continue
            if host.name in lost:
                results[host.name] = CommandOutput(error=lost[host.name])
                continue
            code = codes.get(index)
            text = f"rc={'' if code is None else code}\n" + (data if index == 0 else "")
            results[host.name] = CommandOutput(stdout=text, exit_code=0)
        return results

    def _new_lines(self, name: str) -> list[str]:
        """The complete lines written to one of srun's output files since the last read."""
        with open(self.local / name, "rb") as handle:
            handle.seek(self._read[name])
            data = handle.read()
        self._read[name] += len(data)
        text = self._pending[name] + data
        complete, _, self._pending[name] = text.rpartition(b"\n")
        return complete.decode("utf-8", errors="replace").splitlines() if complete else []

    def _note_task(self, task: int, line: str) -> None:
        words = line.split()
        if len(words) >= 2 and words[1].isdigit():
            self._task_rank[task] = int(words[1])
        if len(words) >= 3 and self.step is None and "." in words[2]:
            self.step = words[2]

    def _codes(self) -> tuple[dict[int, int | None], dict[str, str]]:
        """Exit status by node rank, and the hosts Slurm reported lost, from srun's lines and its own end.

        Once a task has exited non-zero, the tasks that end on a signal were killed by the step
        (``--kill-on-bad-exit``): they are no cause of the failure, and count as ended once srun is done.
        """
        codes: dict[int, int | None] = dict.fromkeys(range(len(self.hosts)))
        lost: dict[str, str] = {}
        by_node = {node: rank for rank, node in enumerate(self.nodes)}
        endings = task_endings(self._srun_lines)
        caused = any(e["how"].startswith(EXITED) for e in endings)
        for ending in endings:
            ranks = [self._task_rank[t] for t in ending["tasks"] if t in self._task_rank]
            if not ranks and ending["nodes"] in by_node:
                ranks = [by_node[ending["nodes"]]]
            for rank in ranks:
                if ending["how"] == "node failure":
                    lost[self.hosts[rank].name] = f"Slurm reported a node failure on {self.nodes[rank]}"
                elif ending["how"].startswith(EXITED) or not caused:
                    codes[rank] = ending["code"] if ending["code"] is not None else 1
        ended = self.proc.poll() if self.proc is not None else 1
        if ended is not None:
            for rank, code in codes.items():
                if code is None:
                    codes[rank] = 0 if caused else ended
        return codes, lost

    # -- stop and collect -----------------------------------------------------------------------------
    def stop(self, timeout: float = TERM_GRACE_S + 30) -> None:
        """Cancel the step if it still runs (named in the message), then stop what carries the token."""
        self._cancel(min(timeout, CANCEL_WAIT_S))
        super().stop(timeout)

    def _cancel(self, wait: float) -> None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        self.poll()  # the step id may have arrived since the last poll
        if self.step is not None:
            done = slurm_command(["scancel", self.step])
            note = f"Slurm step {self.step} cancelled"
            if done.returncode != 0:
                note = f"scancel {self.step} failed: {done.stderr.strip()[:200] or done.returncode}"
        else:
            note = "srun stopped before its step started" + (
                f" ({self._srun_lines[-1].strip()[:200]})" if self._srun_lines else ""
            )
            _signal(proc, signal.SIGINT)
            time.sleep(0.3)
            _signal(proc, signal.SIGINT)  # twice within a second: srun gives up the step at once
        deadline = time.monotonic() + wait
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        if proc.poll() is None:
            _signal(proc, signal.SIGKILL)
            proc.wait()
            note += "; srun did not exit and was killed"
        if self.step is not None and self._step_listed(deadline):
            note += f"; squeue still lists step {self.step}"
        self.outcome.message += f" ({note})" if self.outcome.message else note

    def _step_listed(self, deadline: float) -> bool:
        """Whether squeue still shows the step once the wait is over (a step Slurm could not end)."""
        while True:
            done = slurm_command(["squeue", "-h", "-s", "-j", str(self.job), "-o", "%i"])
            listed = done.returncode == 0 and self.step in done.stdout.split()
            if not listed or time.monotonic() >= deadline:
                return listed
            time.sleep(0.5)

    def collect(self) -> None:
        """Each host's output from srun's stream, then its error output and NCCL logs from the host."""
        tasks_out, _ = split_labelled(self._local_text("out.txt"))
        tasks_err, srun_lines = split_labelled(self._local_text("err.txt"))
        for task, rank in sorted(self._task_rank.items(), key=lambda item: item[1]):
            lines = [ln for ln in tasks_out.get(task, []) if not ln.startswith(NODE_MARK)]
            self.keep(self.hosts[rank].name, "out.txt", "".join(f"{line}\n" for line in lines))
        # What a task wrote to srun's stderr came before its own err.txt (a task that could not even
        # start); slurmstepd's notices (``*** STEP 12.3 ON n1 CANCELLED ***``) arrive there too.
        labelled = [(task, line) for task, lines in sorted(tasks_err.items()) for line in lines]
        self._orphans = [f"task {t}: {line}" for t, line in labelled if not line.startswith("slurmstepd")]
        srun_lines = [*srun_lines, *(line for _, line in labelled if line.startswith("slurmstepd"))]
        if srun_lines or self._orphans:
            text = "".join(f"{line}\n" for line in [*self._orphans, *srun_lines])
            self.keep(self.hosts[0].name, "srun.txt", text)
        super().collect()

    def _local_text(self, name: str) -> str:
        """One of srun's output files on the controller; empty when srun never started."""
        path = self.local / name
        return path.read_text(errors="replace") if path.exists() else ""

    def remove_folders(self, timeout: float = 20.0) -> None:
        """The launch's folders on the hosts, and srun's output files on the controller."""
        super().remove_folders(timeout)
        shutil.rmtree(self.local, ignore_errors=True)

    def failure_detail(self) -> str:
        """srun's own error lines (the step could not start) and, per failed host, its first failed rank's
        own exception (else its last error lines)."""
        parts = [
            line.strip()
            for line in self._srun_lines
            if line.startswith("srun: error:") and not task_endings([line])
        ][:2] + self._orphans[-3:]
        for name in self.outcome.failed_hosts:
            err = self.outcome.evidence.get(f"{name}:err.txt")
            if err is None:
                continue
            words = rank_failure((self.spec.out_dir / err).read_text(errors="replace"))
            if words:
                parts.append(f"{name}: {words}")
        return "; ".join(parts)


def _signal(proc: subprocess.Popen[bytes], signum: int) -> None:
    """Signal srun's session on the controller; it may have ended since it was last looked at."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signum)
