"""The connector interface: what every way of reaching a host provides, and what they share.

A connector (``ssh``, ``local``; ``kubectl`` and ``srun`` later) is a subclass of :class:`Connection`
that opens the host and implements :meth:`Connection._execute`: start a shell script, stream its two
outputs to sinks, give up at a deadline the caller may move. Everything else — a framed batch of commands
each under its own ``timeout``, output capped per command (``diagnose.core.streams``), a watchdog that takes a
silent host for frozen, stopping the batch's whole session on interrupt (:func:`stop_running_batches`),
files written through the exec stream (no SFTP) — is shared here, so every transport behaves the same and
the engine never asks which one it talks to.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import shlex
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from diagnose.core.check import Command
from diagnose.core.hosts import Host
from diagnose.core.model import CommandOutput
from diagnose.core.redact import redact_text
from diagnose.core.streams import DEFAULT_MAX_OUTPUT_BYTES, Capped, FramedStream
from diagnose.core.units import counted

# paramiko logs every failed handshake with a traceback; the reason reaches the operator as a
# host.reachable result instead, and cron mail must not fill with tracebacks.
logging.getLogger("paramiko").setLevel(logging.CRITICAL)
#: Each command a host ran, with how it ended: what ``diagnose run -v`` shows on stderr (DEBUG).
COMMANDS_LOG = logging.getLogger("diagnose.commands")

DEFAULT_CONNECT_TIMEOUT_S = 10.0
# Extra seconds a whole batch may take beyond the sum of its commands' timeouts before the channel is
# abandoned: covers `timeout -k` grace periods and shell start-up.
BATCH_SLACK_S = 10.0
KILL_GRACE_S = 2
# How long past a command's own timeout (and its kill grace) the batch may stay silent before the host is
# taken for frozen: shell start-up, a loaded host, the network.
FREEZE_GRACE_S = 8.0
# What a plain ``run`` (launcher polls, fetched logs) keeps: a safety net, well above any real output.
RUN_OUTPUT_CAP = 64 * 1024 * 1024
STOP_TIMEOUT_S = 5.0
_PLAIN_COMMAND = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./=:,+-]*( [A-Za-z0-9_./=:,+-]+)*")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class ConnectError(Exception):
    """The host could not be reached or refused us; the message is what the operator needs to read."""


def _exit_code_of(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def batch_script(commands: Sequence[Command], token: str, timeout_cap: float | None = None) -> str:
    """One POSIX shell script running every command with its own timeout and framed output.

    Marker lines carrying a random token frame each command on both streams — stdout gets the command's
    output and then its exit code, stderr gets its error output — so no output can forge a boundary, and
    the batch costs the host no temporary files and no process beyond the command itself and its
    ``timeout`` (coreutils/busybox). Where ``timeout`` is missing the command runs unbounded and the
    channel timeout is the backstop.
    """
    # Every write of the shell is a packet of its own on the wire (a read and an encryption for sshd, a
    # packet for the controller): a command's END marker and the next command's OUT marker go out in one
    # printf per stream, the SID line with the first OUT marker. The bytes are the same.
    lines = ["if command -v timeout >/dev/null 2>&1; then t=timeout; else t=; fi"]
    # (format, arguments) still to print on stdout and on stderr before the next OUT marker.
    out: tuple[str, str] = ("%s SID %s\\n", f"'{token}' \"$$\"")  # the batch shell leads its session
    err: tuple[str, str] = ("", "")
    for command in commands:
        seconds = command.timeout if timeout_cap is None else min(command.timeout, timeout_cap)
        limit = f"{max(1, round(seconds))}"
        # A plain command line (words only) is exec'd by timeout directly: one process instead of two.
        plain = _PLAIN_COMMAND.fullmatch(command.script) is not None
        run = command.script if plain else f"sh -c {shlex.quote(command.script)}"
        begin = f"'{token} OUT {command.key}'"
        lines += [
            f"{_printf(out, begin)}; {_printf(err, begin)} >&2",
            f'if [ -n "$t" ]; then timeout -k {KILL_GRACE_S} {limit} {run} </dev/null; '
            f"else {run} </dev/null; fi",
            "rc=$?",
        ]
        end = f"'{token} END {command.key}'"
        out, err = ("\\n%s %s\\n", f'{end} "$rc $t"'), ("\\n%s\\n", end)
    lines.append(f"{_printf(out)}; {_printf(err)} >&2" if err[0] else _printf(out))
    return "\n".join(lines) + "\n"


def _printf(pending: tuple[str, str], line: str | None = None) -> str:
    """One printf of ``pending`` (a format and its quoted arguments) and then ``line``, a quoted word."""
    form, args = pending
    if line is not None:
        form, args = form + "%s\\n", f"{args} {line}".lstrip()
    return f"printf '{form}' {args}"


def framed_outputs(
    out: FramedStream, err: FramedStream, commands: Sequence[Command]
) -> dict[str, CommandOutput]:
    """One CommandOutput per command key from a batch's two framed streams.

    A command whose markers are missing (the batch was cut short) gets ``error`` set, so the check that
    needed it reports an ERROR instead of judging half an output.
    """
    results: dict[str, CommandOutput] = {}
    for command in commands:
        done = out.finished(command.key)
        if done is None:
            results[command.key] = CommandOutput(error="the batch ended before this command finished")
            continue
        body, tail = done
        code_text, _, wrapper = tail.partition(" ")
        code = _exit_code_of(code_text)
        stderr = err.finished(command.key)
        results[command.key] = CommandOutput(
            stdout=body,
            stderr=stderr[0] if stderr else "",
            exit_code=code,
            timed_out=bool(wrapper.strip()) and code in (124, 137),
            duration_s=out.seconds(command.key),
        )
    return results


def parse_batch_output(
    stdout: str, stderr: str, commands: Sequence[Command], token: str, limit: int = DEFAULT_MAX_OUTPUT_BYTES
) -> dict[str, CommandOutput]:
    """Split a batch script's two complete streams back into one CommandOutput per command key."""
    out, err = FramedStream(token, limit), FramedStream(token, limit)
    out.feed(stdout.encode())
    out.close()
    err.feed(stderr.encode())
    err.close()
    return framed_outputs(out, err, commands)


def kill_session_script(session: int) -> str:
    """Shell that stops every process of a session: TERM, a short wait, KILL; prints ``left=<n>``.

    Killing by session rather than process group matters: ``timeout`` moves each command into a process
    group of its own, but nothing leaves the batch's session. A zombie is not counted: it is dead, only
    not yet reaped by its parent (sshd, or this controller for a local shell).
    """
    return (
        f"s={int(session)}\n"
        'p() { { if command -v pgrep >/dev/null 2>&1; then pgrep -s "$s"; '
        "else ps -eo pid=,sid= | awk -v s=\"$s\" '$2==s{print $1}'; fi; } | while read -r q; do "
        "st=$(sed 's/.*) //' \"/proc/$q/stat\" 2>/dev/null | cut -c1); "
        '[ -n "$st" ] && [ "$st" != Z ] && echo "$q"; done; }\n'
        'k() { for q in $(p); do kill "-$1" "$q" 2>/dev/null; done; }\n'
        "k TERM; i=0\n"
        'while [ -n "$(p)" ] && [ $i -lt 15 ]; do sleep 0.1; i=$((i+1)); done\n'
        "k KILL; sleep 0.1\n"
        'printf "left=%s\\n" "$(p | wc -l | tr -d \' \')"\n'
    )


def env_prefix(env: dict[str, str] | None) -> str:
    """``export K=V;`` for each variable; a name that is not a POSIX environment name is refused here
    too, whatever the callers validated, so no variable name ever reaches a shell unchecked."""
    parts = []
    for key, value in (env or {}).items():
        if not ENV_NAME.match(key):
            raise ValueError(f"{key!r} is not a valid environment variable name")
        parts.append(f"export {key}={shlex.quote(value)}; ")
    return "".join(parts)


@dataclass
class Exec:
    """How one remote script ended: an exit code, or abandoned (``timed_out``), or never ran (``error``)."""

    exit_code: int | None = None
    timed_out: bool = False
    error: str | None = None


Sink = Callable[[bytes], None]

_RUNNING: dict[str, Connection] = {}  # batch token -> connection, once the batch's session is known
_IN_FLIGHT: dict[str, Connection] = {}  # batch token -> connection, from the batch's start to its end
_STREAMS: dict[str, FramedStream] = {}  # batch token -> its stdout, read for the command running now
_RUNNING_LOCK = threading.Lock()
_SETTLED = threading.Condition(_RUNNING_LOCK)  # notified as each batch ends
_STOPS = [0]  # how many stops were asked for: a batch that learns its session after one stops itself


class Connection(ABC):
    """A host we can run commands on.

    Subclasses provide :meth:`_execute` (start a shell script, stream its two outputs to sinks, give up
    at a deadline the caller may move) and :meth:`open`; running, batching, capping, stopping and file
    transfer are shared, so every transport behaves the same.
    """

    def __init__(self, host: Host) -> None:
        self.host = host
        self.name = host.name
        self.max_output_bytes = host.vars.int("max_output_bytes", None) or DEFAULT_MAX_OUTPUT_BYTES
        self._session: int | None = None  # the remote session of the batch in flight
        self._stopping = threading.Lock()  # held while a stop runs: closing then would cut it off

    @abstractmethod
    def open(self) -> None:
        """Connect now; raise ConnectError with the reason if the host cannot be used."""

    @abstractmethod
    def _execute(
        self, script: str, stdin: bytes | None, out: Sink, err: Sink, deadline: Callable[[], float]
    ) -> Exec:
        """Run ``script`` with ``/bin/sh`` semantics; abandon it once ``time.monotonic()`` passes
        ``deadline()`` (asked again as output arrives, so a caller can extend it on progress)."""

    def close(self) -> None:
        """Release the connection; safe to call twice."""
        return None

    def run(
        self, script: str, timeout: float, env: dict[str, str] | None = None, stdin: str | None = None
    ) -> CommandOutput:
        """Run one shell script; a script still running after ``timeout`` seconds is abandoned."""
        started = time.monotonic()
        out, err = Capped(RUN_OUTPUT_CAP), Capped(RUN_OUTPUT_CAP)
        ended = self._execute(
            env_prefix(env) + script,
            stdin.encode() if stdin is not None else None,
            out.add,
            err.add,
            lambda: started + timeout,
        )
        output = CommandOutput(
            stdout=out.text(),
            stderr=err.text(),
            exit_code=ended.exit_code,
            timed_out=ended.timed_out,
            error=ended.error,
            duration_s=time.monotonic() - started,
        )
        self._log_command(script, output)
        return output

    def _log_command(self, script: str, output: CommandOutput, key: str | None = None) -> None:
        """One DEBUG line per command (``-v``): host, the script's first line (secret-named assignments
        masked), how and when it ended. The environment handed to a script is left out: it may carry a token."""
        if not COMMANDS_LOG.isEnabledFor(logging.DEBUG):
            return
        lines = [redact_text(line) for line in script.strip().splitlines()] or [""]
        shown = lines[0] if len(lines[0]) <= 100 else lines[0][:99] + "…"
        more = f" (+{len(lines) - 1} lines)" if len(lines) > 1 else ""
        ended = f"not run: {output.error}" if output.error else output.ended
        label = f"{key}: " if key else ""
        COMMANDS_LOG.debug(
            "%s: %s`%s`%s %s after %.2f s", self.name, label, shown, more, ended, output.duration_s
        )

    def put_text(self, remote_path: str, content: str, mode: int = 0o644) -> None:
        """Write a file on the host through the exec stream (no SFTP subsystem needed), atomically."""
        quoted = shlex.quote(remote_path)
        script = (
            f"mkdir -p -- {shlex.quote(os.path.dirname(remote_path) or '.')} && "
            f'cat > {quoted}.part."$$" && chmod {mode:o} {quoted}.part."$$" && '
            f'mv -f {quoted}.part."$$" {quoted}'
        )
        result = self.run(script, timeout=60, stdin=content)
        if not result.ok:
            reason = result.error or (result.stderr.strip() or f"exit code {result.exit_code}")[:300]
            raise OSError(f"could not write {remote_path} on {self.name}: {reason}")

    def get_file(self, remote_path: str, local_path: Path, max_bytes: int, timeout: float = 300) -> int:
        """Copy one file from the host through the exec stream, byte for byte; its size.

        A file larger than ``max_bytes`` is refused before any byte is written: a half-copied trace
        would read as a valid but shorter one.
        """
        quoted = shlex.quote(remote_path)
        script = (
            f"s=$(wc -c < {quoted}) || exit 3; "
            f'if [ "$s" -gt {int(max_bytes)} ]; then echo "too large: $s bytes" >&2; exit 4; fi; '
            f"cat -- {quoted}"
        )
        started = time.monotonic()
        err = Capped(64 * 1024)
        part = local_path.with_name(local_path.name + ".part")
        with open(part, "wb") as handle:
            ended = self._execute(script, None, handle.write, err.add, lambda: started + timeout)
        if ended.error or ended.timed_out or ended.exit_code != 0:
            part.unlink(missing_ok=True)
            reason = ended.error or ("timed out" if ended.timed_out else err.text().strip())
            raise OSError(f"could not copy {remote_path} from {self.name}: {reason or ended.exit_code}")
        part.replace(local_path)
        return local_path.stat().st_size

    def run_batch(
        self, commands: Sequence[Command], timeout_cap: float | None = None
    ) -> dict[str, CommandOutput]:
        """Run every command in one round trip; see :func:`batch_script`.

        The batch is abandoned when the host stops making progress: no command may stay silent past its
        own timeout, its kill grace and :data:`FREEZE_GRACE_S` — a frozen host costs the longest single
        timeout, not the sum of all of them. The sum remains a backstop.
        """
        if not commands:
            return {}
        token = "@@diagnose-" + secrets.token_hex(8)
        script = batch_script(commands, token, timeout_cap)
        limits = [min(c.timeout, timeout_cap or c.timeout) for c in commands]
        budget = sum(limit + KILL_GRACE_S for limit in limits) + BATCH_SLACK_S
        out = FramedStream(token, self.max_output_bytes)
        err = FramedStream(token, self.max_output_bytes)
        started = time.monotonic()
        progress = {"markers": -1, "at": started, "until": started + budget}
        with _RUNNING_LOCK:
            stops_seen = _STOPS[0]
            _IN_FLIGHT[token] = self
            _STREAMS[token] = out
        interrupted = False

        def deadline() -> float:
            nonlocal interrupted
            if out.markers != progress["markers"]:  # progress: the next command's own timeout starts now
                now = time.monotonic()
                step = self._step_limit(out, commands, limits)
                progress.update(
                    markers=out.markers,
                    at=now,
                    until=min(started + budget, now + step + KILL_GRACE_S + FREEZE_GRACE_S),
                )
                if out.session is not None and self._session is None:
                    self._session = out.session
                    with _RUNNING_LOCK:
                        _RUNNING[token] = self
                        # A stop asked for before this reader saw the session could not reach it: the
                        # batch is abandoned here and stopped below, as a stop would have done.
                        interrupted = _STOPS[0] != stops_seen
            return 0.0 if interrupted else progress["until"]

        try:
            ended = self._execute(script, None, out.feed, err.feed, deadline)
            reason = ended.error
            if ended.timed_out:
                reason = self._why_abandoned(out, commands, progress["at"], started, budget, interrupted)
                stop_problem = self.stop_batch(timeout=STOP_TIMEOUT_S if interrupted else 2.0)
                if stop_problem:
                    reason += f"; {stop_problem}"
        finally:
            self._session = None
            with _RUNNING_LOCK:
                _RUNNING.pop(token, None)
                _IN_FLIGHT.pop(token, None)
                _STREAMS.pop(token, None)
                _SETTLED.notify_all()
        out.close()
        err.close()
        outputs = framed_outputs(out, err, commands)
        if reason:
            for output in outputs.values():
                if output.error:
                    output.error = reason
        for command in commands:
            if command.key in outputs:
                self._log_command(command.script, outputs[command.key], command.key)
        return outputs

    def _why_abandoned(
        self,
        out: FramedStream,
        commands: Sequence[Command],
        last_progress: float,
        started: float,
        budget: float,
        interrupted: bool,
    ) -> str:
        """Why a batch was given up before its exit status came: the run's stop, its budget, or silence."""
        if interrupted:
            return "stopped with the rest of the run (interrupted, or its time budget spent)"
        if time.monotonic() - started >= budget:
            return f"the command batch exceeded {budget:.0f} s"
        silent = time.monotonic() - last_progress
        current = out.current or self._next_key(out, commands)
        return (
            f"{self.name} stopped answering: no progress for {silent:.0f} s while `{current}` ran, "
            "past that command's own timeout (host or sshd frozen, or the network gone)"
        )

    @staticmethod
    def _next_key(out: FramedStream, commands: Sequence[Command]) -> str:
        done = [c.key for c in commands if c.key in out.sections]
        return commands[len(done)].key if len(done) < len(commands) else commands[-1].key

    @staticmethod
    def _step_limit(out: FramedStream, commands: Sequence[Command], limits: list[float]) -> float:
        """The time the command now running (or about to) may take by its own timeout."""
        started = [i for i, c in enumerate(commands) if c.key in out.sections]
        if not started:
            return limits[0]
        last = started[-1]
        if out.current is None and last + 1 < len(commands):
            return limits[last + 1]
        return limits[last]

    def stop_batch(self, timeout: float = STOP_TIMEOUT_S) -> str | None:
        """Stop every process of the batch in flight (over a new channel); None, or why it could not."""
        session = self._session
        if session is None:
            return None
        try:
            with self._stopping:
                result = self.run(kill_session_script(session), timeout=timeout)
        except Exception as exc:  # the connection may be the thing that broke
            return f"could not stop the checks on {self.name}: {type(exc).__name__}: {exc}"
        left = result.stdout.rpartition("left=")[2].strip()
        if not result.ok or not left.isdigit():
            why = result.error or ("no answer" if result.timed_out else result.ended)
            return f"could not stop the checks on {self.name} ({why})"
        if int(left):
            return f"{counted(left, 'process', 'processes')} of the checks survived SIGKILL on {self.name}"
        return None


def running_batch_hosts() -> list[str]:
    """The hosts with a check batch in flight now: what a stop is about to end."""
    with _RUNNING_LOCK:
        return sorted({c.name for c in _IN_FLIGHT.values()})


def running_commands() -> list[tuple[str, str | None, float]]:
    """Per check batch in flight: its host, the key of the command running there (None between two
    commands, or before the first) and for how many seconds it has run. A stage cut short, and a host stage
    that goes on for long, say by these which host holds it up with what."""
    now = time.monotonic()
    with _RUNNING_LOCK:
        batches = [(c.name, _STREAMS[t]) for t, c in _IN_FLIGHT.items() if t in _STREAMS]
    return sorted((name, out.current, now - out.since if out.current else 0.0) for name, out in batches)


def stop_running_batches(timeout: float = STOP_TIMEOUT_S) -> list[str]:
    """Stop the remote batch of every connection that has one in flight, in parallel, within about
    ``timeout`` seconds; the list says what could not be stopped (empty: everything was).

    A batch whose session the controller has not read yet (it started a moment ago, or its reader is
    behind on a loaded controller) cannot be stopped from here: its own reader stops it as soon as it
    reads the session, and this waits, within the same ``timeout``, for it to end.
    """
    with _RUNNING_LOCK:
        _STOPS[0] += 1
        running = dict(_RUNNING)
        starting = {token: c for token, c in _IN_FLIGHT.items() if token not in running}
    problems: list[str] = []
    if running:
        with ThreadPoolExecutor(max_workers=min(64, len(running))) as pool:
            results = list(pool.map(lambda c: c.stop_batch(timeout), running.values()))
        problems = [problem for problem in results if problem]
    if starting:
        with _SETTLED:
            _SETTLED.wait_for(lambda: _IN_FLIGHT.keys().isdisjoint(starting), timeout)
            left = sorted(c.name for token, c in starting.items() if token in _IN_FLIGHT)
        problems += [
            f"could not stop the checks on {name}: they had not yet answered when the run was stopped"
            for name in left
        ]
    return problems
