"""The life of one benchmark launch, whatever starts it: start, follow, stop, bring the evidence home.

Everything goes through each host's existing :class:`~diagnose.connectors.Connection`; nothing but a
POSIX shell and ``setsid`` is needed there, plus whatever the kind of launch runs.

Life of one launch (:func:`run_launch`):

1. start the job detached, in a session of its own, in ``/tmp/diagnose-<run_id>-<tag>-n<node>/`` (one
   folder per node, none shared between launches, so hosts sharing a /tmp — containers on one machine,
   test hosts — never collide or remove another's), with a per-launch token in its
   environment — launchers put their workers in sessions of their own too, so the token (which every
   descendant inherits) is what finds them all again;
2. poll every host about once a second: its exit status, and on node 0 the new lines of the progress
   file, so rows measured before a hang or a crash are kept;
3. decide: all done; a host's job failed (its own words are the message); a host stopped answering
   (named); the next row did not arrive within its time budget (hung: named by collective and size);
4. stop what is left on every host still reachable — SIGTERM, then SIGKILL, to every process carrying the
   token, whatever its session (:mod:`diagnose.launchers.stopping`) — and count what survived;
5. fetch each rank's NCCL log and the job's output into ``<out>/raw/<host>/`` and remove the remote
   folder.

Each kind of launch is one short module with a subclass of :class:`Launch`:
:mod:`diagnose.launchers.torchrun` (torchrun on every host, over each host's connection) and
:mod:`diagnose.launchers.mpirun` (one command on the first host: the program itself on one node, or
mpirun starting the ranks across nodes). A new kind (srun, kubectl exec) is a new such module: it sets
``runner`` and implements :meth:`Launch.start` (with :func:`~diagnose.launchers.remote.detached_script`) and
:meth:`Launch.failure_detail`, overriding :meth:`Launch.decode`, :meth:`Launch.stop_targets` or
:meth:`Launch.place` only where its job differs. :func:`run_launch` gives every kind the same follow, stop
and cleanup discipline and registers the job where an interrupt stops it
(:func:`~diagnose.launchers.stopping.stop_live_launches`).
"""

from __future__ import annotations

import json
import secrets
import shlex
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from diagnose.core.hosts import Host, safe_name
from diagnose.core.model import CommandOutput
from diagnose.launchers.progress import LaunchProgress, Teller
from diagnose.launchers.remote import (
    COLLECTED,
    collect_script,
    poll_script,
    remote_dir,
    remove_script,
    split_files,
)
from diagnose.launchers.stopping import (
    LIVE,
    LIVE_LOCK,
    TERM_GRACE_S,
    Stopped,
    kill_script,
    said,
    survivors,
)
from diagnose.shipped import common, gpu_sampler

if TYPE_CHECKING:
    from diagnose.connectors import Connection

POLL_INTERVAL_S = 1.0
POLL_TIMEOUT_S = 20.0
# After one host's job fails, how long the others get to notice and exit on their own.
FAILURE_GRACE_S = 10.0
# After the last row, how long the job may take to tear down before it is stopped.
EXIT_GRACE_S = 60.0


@dataclass
class LaunchSpec:
    """One job over some hosts: ``row_budget_s`` the seconds the next row may take, ``told`` its listener."""

    run_id: str
    tag: str
    hosts: Sequence[Host]
    connections: Mapping[str, Connection]
    nproc: int
    backend: str
    program_args: list[str]
    expected_rows: list[tuple[str, int]]
    row_budget_s: Callable[[str, int], float]
    out_dir: Path
    startup_timeout_s: float = 180.0
    deadline: float | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    # Per host, on top of ``env``: a host's own bench_env (its GPUs, its NIC names) stays its own.
    host_env: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # The program torchrun starts (default: the collective benchmark, diagnose.shipped.collective_bench). It is
    # copied as ``program.py`` with the files of ``beside`` next to it under their own names, so it may import
    # nothing but the standard library, torch and those (common.py, gpu_sampler.py).
    program: Path | None = None
    beside: tuple[Path, ...] = (Path(common.__file__), Path(gpu_sampler.__file__))
    # A folder inside the launch's remote folder (given to the program as ``--files-dir``) whose files come
    # home byte for byte as ``<out>/raw/<host>/<tag>/<name>`` (profiler traces), each up to ``fetch_max_bytes``.
    fetch_dir: str | None = None
    fetch_max_bytes: int = 512 * 1024 * 1024
    told: Teller | None = None
    # Seconds a phase of the program is meant to take, where it has a length of its own (a burn-in): what
    # the run's heartbeat sets a long step's elapsed time against.
    planned_s: Callable[[str], float | None] | None = None


@dataclass
class LaunchOutcome:
    """What one launch produced; ``status`` is done, failed, hung, host_lost or deadline."""

    status: str
    message: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    start: dict[str, Any] | None = None
    failed_hosts: list[str] = field(default_factory=list)
    in_progress: tuple[str, int] | None = None
    logs: dict[int, Path] = field(default_factory=dict)
    rank_hosts: dict[int, str] = field(default_factory=dict)
    leftovers: dict[str, int] = field(default_factory=dict)
    # Per host where a stop ran: (processes found, of them those that needed SIGKILL); and the survivors.
    stopped: dict[str, tuple[int, int]] = field(default_factory=dict)
    survivors: dict[str, list[str]] = field(default_factory=dict)
    evidence: dict[str, str] = field(default_factory=dict)
    # Files brought home from ``fetch_dir``, by "host:name"; the problems met fetching them.
    files: dict[str, Path] = field(default_factory=dict)
    fetch_errors: list[str] = field(default_factory=list)


class Launch(ABC):
    """One launch in progress; see the module docstring for its life and how a kind of launch differs.

    ``runner`` names what was started in messages; ``progress_file`` is the file in the first host's
    remote folder whose new lines :meth:`decode` turns into progress records (``start``, ``warm``,
    ``begin``, ``row``, ``done``); by default the benchmark program's results file.
    """

    runner: str
    progress_file = "results.jsonl"
    #: What :meth:`collect` brings home from each host's folder (see :func:`collect_script`).
    collected: tuple[str, ...] = COLLECTED

    def __init__(self, spec: LaunchSpec) -> None:
        self.spec = spec
        self.token = f"{spec.run_id}-{spec.tag}-{secrets.token_hex(6)}"
        self.hosts = list(spec.hosts)
        self.folders = {h.name: remote_dir(spec.run_id, spec.tag, i) for i, h in enumerate(self.hosts)}
        self.pool = ThreadPoolExecutor(max_workers=max(1, min(64, len(self.hosts))))
        self.lost: dict[str, str] = {}
        self.outcome = LaunchOutcome(status="running", message="")
        self.outcome.rank_hosts = {
            node * spec.nproc + local: host.name
            for node, host in enumerate(self.hosts)
            for local in range(spec.nproc)
        }
        self._offset = 0
        self._partial = ""
        self._done = False
        self._warmed: set[str] = set()
        self.told = LaunchProgress(spec.told, spec.nproc, spec.planned_s)

    # -- I/O on every host at once ----------------------------------------------------------------------
    def _each(
        self, action: Callable[[Host], CommandOutput], hosts: Sequence[Host]
    ) -> dict[str, CommandOutput]:
        futures = {h.name: self.pool.submit(action, h) for h in hosts}
        results: dict[str, CommandOutput] = {}
        for name, future in futures.items():
            try:
                results[name] = future.result()
            except Exception as exc:  # a broken connection must not stop the others
                results[name] = CommandOutput(error=f"{type(exc).__name__}: {exc}")
        return results

    def _run(self, host: Host, script: str, timeout: float = POLL_TIMEOUT_S) -> CommandOutput:
        return self.spec.connections[host.name].run(script, timeout=timeout)

    def _reachable(self) -> list[Host]:
        return [h for h in self.hosts if h.name not in self.lost]

    def _mark_lost(self, results: Mapping[str, CommandOutput]) -> None:
        for name, result in results.items():
            if result.error or result.timed_out:
                self.lost.setdefault(name, result.error or f"no answer within {POLL_TIMEOUT_S:.0f} s")

    # -- phases -----------------------------------------------------------------------------------------
    @abstractmethod
    def start(self) -> None:
        """Start the job on its hosts and return at once; :class:`LaunchError` names the hosts to blame."""

    def follow(self) -> None:
        """Poll until the run ends, fails, hangs, loses a host or reaches the deadline."""
        spec, outcome = self.spec, self.outcome
        started = time.monotonic()
        last_progress = started
        failed_at: float | None = None
        expected = list(spec.expected_rows)
        while True:
            results = self.poll()
            self._mark_lost(results)
            now = time.monotonic()
            first = results.get(self.hosts[0].name)
            if first is not None and first.ok:
                for record in self._new_records(first.stdout):
                    last_progress = now
                    self._record(record, expected)
            codes = {n: self._exit_code(r.stdout) for n, r in results.items() if r.ok}
            if self.lost:
                names = ", ".join(sorted(self.lost))
                reasons = "; ".join(f"{n}: {self.lost[n]}" for n in sorted(self.lost))
                self._finish("host_lost", f"host {names} stopped answering during the benchmark ({reasons})")
                outcome.failed_hosts = sorted(self.lost)
                return
            failed = {n: c for n, c in codes.items() if c not in (None, 0)}
            if codes and all(c == 0 for c in codes.values()) and len(codes) == len(self.hosts):
                if self._done:
                    self._finish("done", "")
                else:
                    self._finish(
                        "failed", f"{self.runner} exited 0 on every host but the program never finished"
                    )
                return
            if failed:
                failed_at = failed_at or now
                if all(c is not None for c in codes.values()) or now - failed_at > FAILURE_GRACE_S:
                    outcome.failed_hosts = sorted(failed)
                    self._finish("failed", "")
                    return
            elif outcome.start is None and now - started > spec.startup_timeout_s:
                self._finish(
                    "hung",
                    f"{self.runner} did not get the ranks together within {spec.startup_timeout_s:.0f} s "
                    "(rendezvous or communicator set-up hung)",
                )
                return
            elif outcome.start is not None and expected:
                collective, nbytes = expected[0]
                budget = spec.row_budget_s(collective, nbytes)
                if collective not in self._warmed:
                    # The program warms up at every size of a collective before timing its first one.
                    budget = sum(spec.row_budget_s(c, b) for c, b in expected if c == collective)
                if now - last_progress > budget:
                    outcome.in_progress = (collective, nbytes)
                    self._finish(
                        "hung",
                        f"{collective} of {nbytes} bytes did not finish within {budget:.0f} s "
                        "(the collective hung)",
                    )
                    return
            elif outcome.start is not None and now - last_progress > EXIT_GRACE_S:
                # Every row is in; torchrun's exit barrier waits for all agents (mpirun for all ranks), so
                # one stuck host keeps the others from exiting. The measurements are complete: keep them,
                # name the hosts.
                stuck = sorted(n for n, c in codes.items() if c is None)
                status = "done" if self._done else "failed"
                self._finish(
                    status,
                    f"{self.runner} did not exit on {', '.join(stuck) or 'some host'} "
                    f"within {EXIT_GRACE_S:.0f} s "
                    "after the last row; stopped there",
                )
                return
            if spec.deadline is not None and now > spec.deadline:
                outcome.in_progress = expected[0] if expected else None
                self._finish("deadline", "the run's time budget ran out during the benchmark")
                return
            time.sleep(POLL_INTERVAL_S)

    def poll(self) -> dict[str, CommandOutput]:
        """Per reachable host, what :func:`poll_script` prints there: ``rc=<exit status or empty>`` and, on
        the first host, the progress file's bytes from the current offset on. A launch whose scheduler
        reports its job's state on the controller overrides this and saves the hosts a round trip."""
        return self._each(
            lambda h: self._run(
                h,
                poll_script(
                    self.folders[h.name], self._offset if h is self.hosts[0] else None, self.progress_file
                ),
            ),
            self._reachable(),
        )

    def _record(self, record: dict[str, Any], expected: list[tuple[str, int]]) -> None:
        event = record.get("event")
        self.told.record(record)
        if event == "start":
            self.outcome.start = record
        elif event in ("row", "begin"):
            key = (record["collective"], record["bytes"])
            if key in expected:  # a size the plan did not foresee leaves the hang budget as it is
                del expected[: expected.index(key) + (event == "row")]  # a row ends its size, a begin not
            if event == "row":
                self.outcome.rows.append(record)
        elif event == "warm":
            self._warmed.add(record["collective"])
        elif event == "done":
            self._done = True

    def _new_records(self, stdout: str) -> list[dict[str, Any]]:
        _, _, data = stdout.partition("\n")
        self._offset += len(data.encode("utf-8"))
        text = self._partial + data
        lines = text.split("\n")
        self._partial = lines.pop()
        return self.decode(lines)

    def decode(self, lines: list[str]) -> list[dict[str, Any]]:
        """Progress records from new complete lines of the progress file: the program's JSON lines."""
        records = []
        for line in lines:
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return records

    @staticmethod
    def _exit_code(stdout: str) -> int | None:
        value = stdout.split("\n", 1)[0].partition("rc=")[2].strip()
        return int(value) if value.lstrip("-").isdigit() else None

    def _finish(self, status: str, message: str) -> None:
        self.outcome.status = status
        self.outcome.message = message

    def stop_targets(self) -> list[Host]:
        """The hosts where processes of the launch may run: those it started something on."""
        return self._reachable()

    def stop(self, timeout: float = TERM_GRACE_S + 30) -> None:
        """Stop every process of the launch on every host still reachable; note what was stopped there and
        what survived (:func:`kill_script`)."""
        results = self._each(
            lambda h: self._run(h, kill_script(self.token), timeout=timeout),
            self.stop_targets(),
        )
        for name, result in results.items():
            told = said(result.stdout)
            if result.ok and told.get("left", "").isdigit():
                self.outcome.leftovers[name] = int(told["left"])
                self.outcome.stopped[name] = (int(told.get("found") or 0), int(told.get("killed") or 0))
                self.outcome.survivors[name] = survivors(result.stdout)
            else:
                why = result.error or ("no answer" if result.timed_out else f"exit {result.exit_code}")
                self.lost.setdefault(name, f"could not stop the benchmark there ({why})")

    def stop_interrupted(self, timeout: float) -> Stopped:
        """Stop the launch an interrupt left running, on a pool of its own (the launch's may still be busy
        with a poll the interrupt cut short), and remove its folders; what it stopped, and what not."""
        busy, self.pool = self.pool, ThreadPoolExecutor(max_workers=max(1, min(64, len(self.hosts))))
        busy.shutdown(wait=False)
        what = f"{self.runner} ({self.spec.tag})"
        report = Stopped()
        try:
            self.stop(timeout=timeout)
            self.remove_folders(timeout=3)
        except Exception as exc:  # keep going: the other launches must still be stopped
            report.problems.append(f"{what}: {type(exc).__name__}: {exc}")
            return report
        finally:
            self.pool.shutdown(wait=False)
        report.tell(what, self.outcome.stopped, self.outcome.leftovers, self.outcome.survivors)
        for name in sorted(self.lost):
            folder = self.folders[name]
            report.problems.append(
                f"could not stop {what} on {name}: {self.lost[name]}; {folder} is left there"
            )
        return report

    def collect(self) -> None:
        """Bring logs and program output home, then remove the remote folders."""
        spec = self.spec
        results = self._each(
            lambda h: self._run(h, collect_script(self.folders[h.name], self.collected), timeout=120),
            self._reachable(),
        )
        for name, result in results.items():
            if not result.ok:
                continue
            for filename, content in split_files(result.stdout).items():
                self.keep(name, filename, content)
        if spec.fetch_dir:
            self.fetch_files(spec.fetch_dir)
        self.remove_folders()

    def fetch_files(self, subdir: str) -> None:
        """Copy every file of ``subdir`` in each host's remote folder home, one file at a time."""
        spec = self.spec

        def fetch(host: Host) -> CommandOutput:
            remote = f"{self.folders[host.name]}/{subdir}"
            listing = self._run(host, f"cd {shlex.quote(remote)} 2>/dev/null && ls -1A")
            names = [n for n in listing.stdout.splitlines() if n and n == safe_name(n)] if listing.ok else []
            local = spec.out_dir / "raw" / safe_name(host.name) / safe_name(spec.tag)
            for filename in names:
                local.mkdir(parents=True, exist_ok=True)
                try:
                    connection = spec.connections[host.name]
                    connection.get_file(f"{remote}/{filename}", local / filename, spec.fetch_max_bytes)
                except OSError as exc:
                    self.outcome.fetch_errors.append(str(exc))
                    continue
                self.outcome.files[f"{host.name}:{filename}"] = local / filename
            return listing

        self._each(fetch, self._reachable())

    def remove_folders(self, timeout: float = POLL_TIMEOUT_S) -> None:
        """Remove the launch's remote folders on every host still reachable."""
        self._each(
            lambda h: self._run(h, remove_script(self.folders[h.name]), timeout=timeout),
            self._reachable(),
        )

    def keep(self, name: str, filename: str, content: str) -> Path:
        """Write one file of host ``name``'s output under ``<out>/raw/<host>/`` where :meth:`place` says."""
        folder = self.spec.out_dir / "raw" / safe_name(name)
        folder.mkdir(parents=True, exist_ok=True)
        suffix = "" if self.spec.tag == "main" else f".{safe_name(self.spec.tag)}"
        path = self.place(folder, name, filename, suffix)
        path.write_text(content, encoding="utf-8", errors="replace")
        return path

    def place(self, folder: Path, name: str, filename: str, suffix: str) -> Path:
        """Where one fetched file of host ``name`` goes, recorded as a rank's NCCL log or as evidence."""
        if filename.startswith("nccl-rank") and filename.endswith(".log"):
            rank = int(filename[len("nccl-rank") : -len(".log")])
            path = folder / f"nccl-rank{rank}{suffix}.log"
            self.outcome.logs[rank] = path
        else:
            path = folder / f"bench{suffix}.{filename}"
            self.outcome.evidence[f"{name}:{filename}"] = str(path.relative_to(self.spec.out_dir))
        return path

    @abstractmethod
    def failure_detail(self) -> str:
        """The job's own words on why it failed (the tail of its error output), for the message."""


class LaunchError(Exception):
    """The launch could not even start; ``hosts`` are the ones to blame."""

    def __init__(self, message: str, hosts: list[str]) -> None:
        super().__init__(message)
        self.hosts = hosts


_WAVE = threading.local()  # a launch_in_parallel worker's event, set once an interrupt left it running


def _clean_up(job: Launch) -> None:
    with LIVE_LOCK:
        LIVE.pop(id(job), None)
    for step in (job.stop, job.collect):
        try:
            step()
        except Exception as exc:  # cleanup must reach every step; say what could not be done
            job.outcome.message += f" (cleanup step {step.__name__} failed: {exc})"
    job.pool.shutdown(wait=False)


def run_launch(job: Launch) -> LaunchOutcome:
    """Start, follow, stop and clean up one job of any kind; its outcome, with failures explained.

    An interrupt (Ctrl-C, SIGTERM) leaves the job registered and propagates at once: the caller then stops
    every launch and every host's checks together, within one bounded wait
    (:func:`~diagnose.launchers.stopping.stop_live_launches`).
    """
    with LIVE_LOCK:
        if getattr(_WAVE, "interrupted", None) is not None and _WAVE.interrupted.is_set():
            raise KeyboardInterrupt  # its wave (launch_in_parallel) was interrupted: start nothing new
        LIVE[id(job)] = job.stop_interrupted
    job.told.begin(list(job.folders), job.runner)  # folders: every host it runs on (mpirun's others too)
    try:
        try:
            job.start()
        except LaunchError as exc:
            job.outcome.status, job.outcome.message = "failed", str(exc)
            job.outcome.failed_hosts = exc.hosts
        else:
            job.follow()
    except KeyboardInterrupt:
        raise
    except BaseException:
        _clean_up(job)
        raise
    _clean_up(job)
    outcome = job.outcome
    if outcome.status == "failed" and not outcome.message:
        detail = job.failure_detail()
        names = ", ".join(outcome.failed_hosts)
        outcome.message = f"the benchmark failed on {names}" + (f": {detail}" if detail else "")
    lost_late = sorted(set(job.lost) - set(outcome.failed_hosts))
    if lost_late and outcome.status != "host_lost":
        outcome.message += f" (and could not clean up on {', '.join(lost_late)})"
    job.told.ended(outcome.status)
    return outcome


def launch_in_parallel(
    work: Callable[[Any], Any], items: Sequence[Any], workers: int, name: str = "launch"
) -> list[Any]:
    """``work(item)`` for every item, at most ``workers`` at once, in order. An interrupt does not wait for the
    launches under way (a burn-in would hold Ctrl-C for minutes): the run's stop ends them
    (:func:`~diagnose.launchers.stopping.stop_live_launches`), and no item or further launch of a worker
    starts."""
    interrupted = threading.Event()

    def worker(item: Any) -> Any:
        _WAVE.interrupted = interrupted  # read by run_launch
        try:
            return work(item)
        finally:
            _WAVE.interrupted = None

    pool = ThreadPoolExecutor(max_workers=max(1, min(workers, len(items))), thread_name_prefix=name)
    try:
        results = [future.result() for future in [pool.submit(worker, item) for item in items]]
    except KeyboardInterrupt:
        with LIVE_LOCK:  # before the run's stop reads the live launches
            interrupted.set()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    except BaseException:
        pool.shutdown()  # a launch that broke: the others finish and clean up before it is raised
        raise
    pool.shutdown()
    return results
