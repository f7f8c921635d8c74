"""How diagnose talks to a host: one connection per host, reused for all of its commands.

``SSHConnection`` (Fabric/paramiko) and ``LocalConnection`` share one small base class, so the engine and
the benchmark launcher never know which transport they use. The per-host checks are sent as one batch
script: one SSH round trip and one remote shell per host instead of one per command, with each command
still under its own ``timeout`` on the host and its own stdout, stderr and exit code.

Everything a host prints is read as it arrives and kept within a cap (``diagnose.streams``); a batch must
make progress — each command ends within its own timeout and a grace — or the host is taken for frozen
and its batch is abandoned. Each running batch is registered with its remote session, so that an
interrupt, a SIGTERM or the nightly time budget can stop what was started on every host
(:func:`stop_running_batches`). Files travel through the exec stream, so hosts without an SFTP subsystem
work as well.

Jump hosts (``ProxyJump`` / ``ProxyCommand`` from ``ansible_ssh_common_args`` / ``ansible_ssh_extra_args``,
parsed by :mod:`diagnose.ssh_args`, or from ~/.ssh/config) are handled here rather than by Fabric's
``gateway``: Fabric would open one bastion login per target, admit the bastion's host key unchecked
(its default AutoAddPolicy) and expand ``%p`` of an inline ProxyCommand as 22. A jump host is logged
into once per run and path (:class:`_JumpHosts`), its key checked against the same known_hosts files and
policy as the targets; each target behind it gets a ``direct-tcpip`` channel of that shared transport as
its socket. The shared login closes when the last target using it closes, and :func:`close_jump_hosts`
closes whatever is left at the end of a run.
"""

from __future__ import annotations

import contextlib
import getpass
import logging
import os
import re
import secrets
import selectors
import shlex
import socket
import subprocess
import tempfile
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import IO

import paramiko
from fabric import Config
from fabric import Connection as FabricConnection
from paramiko.hostkeys import HostKeyEntry

from diagnose.check import Command
from diagnose.hosts import Host
from diagnose.model import CommandOutput
from diagnose.ssh_args import Hop, SSHArgs, SSHArgsError, expand_proxy_command, host_ssh_args, parse_jump_spec
from diagnose.streams import DEFAULT_MAX_OUTPUT_BYTES, Capped, FramedStream

# paramiko logs every failed handshake with a traceback; the reason reaches the operator as a
# host.reachable result instead, and cron mail must not fill with tracebacks.
logging.getLogger("paramiko").setLevel(logging.CRITICAL)

DEFAULT_CONNECT_TIMEOUT_S = 10.0
# Extra seconds a whole batch may take beyond the sum of its commands' timeouts before the channel is
# abandoned: covers `timeout -k` grace periods and shell start-up.
_BATCH_SLACK_S = 10.0
_KILL_GRACE_S = 2
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
    lines = [
        f"printf '%s SID %s\\n' '{token}' \"$$\"",  # the batch shell leads its session (sshd, setsid)
        "if command -v timeout >/dev/null 2>&1; then t=timeout; else t=; fi",
    ]
    for command in commands:
        seconds = command.timeout if timeout_cap is None else min(command.timeout, timeout_cap)
        limit = f"{max(1, round(seconds))}"
        # A plain command line (words only) is exec'd by timeout directly: one process instead of two.
        plain = _PLAIN_COMMAND.fullmatch(command.script) is not None
        run = command.script if plain else f"sh -c {shlex.quote(command.script)}"
        begin = f"{token} OUT {command.key}"
        lines += [
            f"printf '%s\\n' '{begin}'; printf '%s\\n' '{begin}' >&2",
            f'if [ -n "$t" ]; then timeout -k {_KILL_GRACE_S} {limit} {run} </dev/null; '
            f"else {run} </dev/null; fi",
            "rc=$?",
            f"printf '\\n%s %s\\n' '{token} END {command.key}' \"$rc $t\"; printf '\\n%s\\n' '{token} END {command.key}' >&2",
        ]
    return "\n".join(lines) + "\n"


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
    group of its own, but nothing leaves the batch's session.
    """
    return (
        f"s={int(session)}\n"
        'p() { if command -v pgrep >/dev/null 2>&1; then pgrep -s "$s"; '
        "else ps -eo pid=,sid= | awk -v s=\"$s\" '$2==s{print $1}'; fi; }\n"
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
class _Exec:
    """How one remote script ended: an exit code, or abandoned (``timed_out``), or never ran (``error``)."""

    exit_code: int | None = None
    timed_out: bool = False
    error: str | None = None


Sink = Callable[[bytes], None]

_RUNNING: dict[int, Connection] = {}  # id(connection) -> connection with a batch in flight
_RUNNING_LOCK = threading.Lock()


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
    ) -> _Exec:
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
        return CommandOutput(
            stdout=out.text(),
            stderr=err.text(),
            exit_code=ended.exit_code,
            timed_out=ended.timed_out,
            error=ended.error,
            duration_s=time.monotonic() - started,
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
        budget = sum(limit + _KILL_GRACE_S for limit in limits) + _BATCH_SLACK_S
        out = FramedStream(token, self.max_output_bytes)
        err = FramedStream(token, self.max_output_bytes)
        started = time.monotonic()
        progress = {"markers": -1, "at": started, "until": started + budget}

        def deadline() -> float:
            if out.markers != progress["markers"]:  # progress: the next command's own timeout starts now
                now = time.monotonic()
                step = self._step_limit(out, commands, limits)
                progress.update(
                    markers=out.markers,
                    at=now,
                    until=min(started + budget, now + step + _KILL_GRACE_S + FREEZE_GRACE_S),
                )
                if out.session is not None and self._session is None:
                    self._session = out.session
                    with _RUNNING_LOCK:
                        _RUNNING[id(self)] = self
            return progress["until"]

        try:
            ended = self._execute(script, None, out.feed, err.feed, deadline)
        finally:
            with _RUNNING_LOCK:
                _RUNNING.pop(id(self), None)
        out.close()
        err.close()
        outputs = framed_outputs(out, err, commands)
        reason = ended.error
        if ended.timed_out:
            silent = time.monotonic() - progress["at"]
            current = out.current or self._next_key(out, commands)
            if time.monotonic() - started >= budget:
                reason = f"the command batch exceeded {budget:.0f} s"
            else:
                reason = (
                    f"{self.name} stopped answering: no progress for {silent:.0f} s while `{current}` ran, "
                    "past that command's own timeout (host or sshd frozen, or the network gone)"
                )
            stop_problem = self.stop_batch(timeout=2.0)
            if stop_problem:
                reason += f"; {stop_problem}"
        self._session = None
        if reason:
            for output in outputs.values():
                if output.error:
                    output.error = reason
        return outputs

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
            why = result.error or ("no answer" if result.timed_out else f"exit {result.exit_code}")
            return f"could not stop the checks on {self.name} ({why})"
        if int(left):
            return f"{left} process(es) of the checks survived SIGKILL on {self.name}"
        return None


def stop_running_batches(timeout: float = STOP_TIMEOUT_S) -> list[str]:
    """Stop the remote batch of every connection that has one in flight, in parallel, within about
    ``timeout`` seconds; the list says what could not be stopped (empty: everything was)."""
    with _RUNNING_LOCK:
        running = list(_RUNNING.values())
    if not running:
        return []
    with ThreadPoolExecutor(max_workers=min(64, len(running))) as pool:
        results = list(pool.map(lambda c: c.stop_batch(timeout), running))
    return [problem for problem in results if problem]


class LocalConnection(Connection):
    """This machine, through a local shell (``ansible_connection: local``)."""

    def open(self) -> None:
        return None

    def _execute(
        self, script: str, stdin: bytes | None, out: Sink, err: Sink, deadline: Callable[[], float]
    ) -> _Exec:
        proc = subprocess.Popen(
            ["/bin/sh", "-c", script],
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # Ctrl-C on the terminal is ours to act on, not the host's
        )
        if stdin is not None and proc.stdin is not None:
            threading.Thread(target=_feed_and_close, args=(proc.stdin, stdin), daemon=True).start()
        assert proc.stdout is not None and proc.stderr is not None
        selector = selectors.DefaultSelector()
        selector.register(proc.stdout, selectors.EVENT_READ, out)
        selector.register(proc.stderr, selectors.EVENT_READ, err)
        open_streams = 2
        try:
            while open_streams:
                wait = deadline() - time.monotonic()
                if wait <= 0:
                    _kill_local_session(proc.pid)
                    proc.wait()
                    return _Exec(timed_out=True)
                for key, _ in selector.select(timeout=min(wait, 0.5)):
                    data = os.read(key.fd, 65536)
                    if data:
                        key.data(data)
                    else:
                        selector.unregister(key.fileobj)
                        open_streams -= 1
            return _Exec(exit_code=proc.wait())
        finally:
            selector.close()
            proc.stdout.close()
            proc.stderr.close()


def _feed_and_close(pipe: IO[bytes], data: bytes) -> None:
    try:
        pipe.write(data)
        pipe.close()
    except OSError:
        pass  # the script ended without reading its input


def _kill_local_session(session: int) -> None:
    subprocess.run(["/bin/sh", "-c", kill_session_script(session)], capture_output=True, timeout=10)


def _closed_early(exc: BaseException) -> bool:
    """paramiko reads the banner from a socket the peer already closed: EOF or a reset, not a timeout."""
    cause = exc.__cause__ or exc.__context__
    return isinstance(cause, (EOFError, ConnectionResetError, BrokenPipeError))


def _describe_connect_error(
    exc: BaseException, address: str, port: int, timeout: float, user: str | None
) -> str:
    """Turn paramiko/socket exceptions into the one line an operator acts on."""
    where = f"{address}:{port}"
    if isinstance(exc, paramiko.BadHostKeyException):
        return (
            f"host key for {where} has CHANGED (got {exc.key.get_name()} "
            f"{exc.key.get_fingerprint().hex()}); refusing to connect — check the host was reinstalled, "
            "then update known_hosts"
        )
    if isinstance(exc, paramiko.SSHException) and "not found in known_hosts" in str(exc):
        return (
            f"host key for {where} is not in known_hosts; add it (ssh-keyscan) or set "
            "ansible_host_key_checking=false / --accept-unknown-host-keys"
        )
    if isinstance(exc, paramiko.SSHException) and "banner" in str(exc) and _closed_early(exc):
        return (
            f"{where} closed the connection before sending the SSH banner (sshd refusing new sessions: "
            "MaxStartups, TCP wrappers or a firewall; or not an SSH server)"
        )
    if isinstance(exc, paramiko.SSHException) and ("banner" in str(exc) or "No existing session" in str(exc)):
        return (
            f"connection to {where} timed out after {timeout:.0f} s waiting for the SSH banner "
            "(sshd hung, overloaded, or not an SSH server)"
        )
    if isinstance(exc, paramiko.AuthenticationException):
        return f"authentication failed for {user or 'the SSH user'}@{where}: {exc}"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return f"connection to {where} timed out after {timeout:.0f} s"
    if isinstance(exc, ConnectionRefusedError):
        return f"connection to {where} refused (no SSH server listening?)"
    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        if exc.errors and all(isinstance(e, ConnectionRefusedError) for e in exc.errors.values()):
            return f"connection to {where} refused (no SSH server listening?)"
        return f"cannot connect to {where}: {exc.strerror or exc}"
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve {address}: {exc.strerror}"
    if isinstance(exc, OSError):
        return f"cannot connect to {where}: {exc.strerror or exc}"
    return f"SSH to {where} failed: {type(exc).__name__}: {exc}"


class _KnownHostsCache:
    """known_hosts files parsed once per run and indexed by host name, shared by every connection.

    Letting each of N connections parse an N-line known_hosts file costs O(N²) key decodings: seconds at
    a few hundred hosts, spent before the first command runs.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._files: dict[str, tuple[float, dict[str, list[paramiko.PKey]], list[HostKeyEntry]]] = {}

    def _load(self, path: str) -> tuple[dict[str, list[paramiko.PKey]], list[HostKeyEntry]]:
        try:
            mtime = os.stat(path).st_mtime
        except OSError:
            return {}, []
        with self._lock:
            cached = self._files.get(path)
            if cached is not None and cached[0] == mtime:
                return cached[1], cached[2]
            plain: dict[str, list[paramiko.PKey]] = {}
            hashed: list[HostKeyEntry] = []
            with open(path, encoding="utf-8", errors="replace") as handle:
                for raw in handle:
                    line = raw.strip()
                    if not line or line.startswith(("#", "@")):
                        continue
                    try:
                        entry = HostKeyEntry.from_line(line)
                    except (paramiko.SSHException, ValueError):
                        continue
                    if entry is None or entry.key is None:
                        continue
                    for hostname in entry.hostnames:
                        if hostname.startswith("|1|"):
                            hashed.append(entry)
                        else:
                            plain.setdefault(hostname, []).append(entry.key)
            self._files[path] = (mtime, plain, hashed)
            return plain, hashed

    def keys_for(self, path: str, name: str) -> list[paramiko.PKey]:
        plain, hashed = self._load(path)
        keys = list(plain.get(name, []))
        for entry in hashed:
            for hostname in entry.hostnames:
                if hostname.startswith("|1|") and paramiko.HostKeys.hash_host(name, hostname) == hostname:
                    keys.append(entry.key)
        return keys


_KNOWN_HOSTS = _KnownHostsCache()


class _AcceptUnknown(paramiko.MissingHostKeyPolicy):
    """Admit a host that known_hosts does not list, for this connection only and without a warning on
    stderr (cron mails stderr); a listed host whose key differs never reaches a policy: paramiko refuses
    it as a changed key."""

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        client.get_host_keys().add(hostname, key.get_name(), key)


@dataclass(frozen=True)
class _JumpLogin:
    """How to log into one jump host: the address after ~/.ssh/config, keys and host-key rules."""

    alias: str  # as written in ProxyJump (may be an ssh_config alias)
    address: str
    port: int
    user: str
    key_files: tuple[str, ...]
    allow_agent: bool
    known_hosts: tuple[str, ...]
    accept_unknown: bool
    timeout: float

    @property
    def ident(self) -> tuple[str, str, int]:
        return (self.user, self.address, self.port)

    def __str__(self) -> str:
        return f"{self.user}@{self.address}:{self.port}"


@dataclass
class _JumpEntry:
    """One shared jump-host login; ``users`` counts the target connections (and later hops) on it."""

    lock: threading.Lock
    client: paramiko.SSHClient | None = None
    users: int = 0
    failure: str | None = None
    failed_at: float = 0.0


def _host_key_name(address: str, port: int) -> str:
    return address if port == 22 else f"[{address}]:{port}"


def _load_host_keys(client: paramiko.SSHClient, files: Sequence[str], address: str, port: int) -> None:
    name = _host_key_name(address, port)
    for path in files:
        for key in _KNOWN_HOSTS.keys_for(path, name):
            client.get_host_keys().add(name, key.get_name(), key)


class _JumpHosts:
    """Jump-host logins shared by every target behind them, keyed by the path to them.

    A hundred targets behind one bastion cost one bastion login, not a hundred: the first target
    opens it (the others wait on its lock rather than racing), each target then gets a ``direct-tcpip``
    channel of the one transport. Targets that were waiting while a login failed get the same failure
    instead of each retrying it; a target that asks later tries again. The key is the whole path
    (user, host, port of every hop so far), so a chain a→b and a direct b are different logins.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[tuple[str, str, int], ...], _JumpEntry] = {}

    def _entry(self, key: tuple[tuple[str, str, int], ...]) -> _JumpEntry:
        with self._lock:
            return self._entries.setdefault(key, _JumpEntry(lock=threading.Lock()))

    def channel(
        self, chain: Sequence[_JumpLogin], destination: tuple[str, int], timeout: float
    ) -> tuple[paramiko.Channel, list[tuple[tuple[str, str, int], ...]]]:
        """A channel to ``destination`` through the chain, and the keys the caller must release."""
        held: list[tuple[tuple[str, str, int], ...]] = []
        try:
            transport: paramiko.Transport | None = None
            for index, hop in enumerate(chain):
                key = tuple(h.ident for h in chain[: index + 1])
                transport = self._login(key, hop, transport, chain[index - 1] if index else None)
                held.append(key)
            assert transport is not None
            last = chain[-1]
            try:
                channel = transport.open_channel("direct-tcpip", destination, ("", 0), timeout=timeout)
            except paramiko.ChannelException as exc:
                raise ConnectError(
                    f"jump host {last} could not connect to {destination[0]}:{destination[1]}: "
                    f"{exc.text} (SSH channel error {exc.code})"
                ) from exc
            except (paramiko.SSHException, OSError, EOFError) as exc:
                raise ConnectError(
                    f"jump host {last} gave no channel to {destination[0]}:{destination[1]}: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
            return channel, held
        except BaseException:
            self.release(held)
            raise

    def _login(
        self,
        key: tuple[tuple[str, str, int], ...],
        hop: _JumpLogin,
        via: paramiko.Transport | None,
        via_hop: _JumpLogin | None,
    ) -> paramiko.Transport:
        entry = self._entry(key)
        asked = time.monotonic()
        with entry.lock:
            client = entry.client
            transport = client.get_transport() if client is not None else None
            if transport is not None and transport.is_active():
                entry.users += 1
                return transport
            if entry.failure is not None and entry.failed_at >= asked:
                raise ConnectError(entry.failure)
            if client is not None:
                client.close()
                entry.client = None
            try:
                client = self._connect(hop, via, via_hop)
            except ConnectError as exc:
                entry.failure, entry.failed_at = str(exc), time.monotonic()
                raise
            entry.client, entry.failure, entry.users = client, None, entry.users + 1
            transport = client.get_transport()
            assert transport is not None
            return transport

    @staticmethod
    def _connect(
        hop: _JumpLogin, via: paramiko.Transport | None, via_hop: _JumpLogin | None
    ) -> paramiko.SSHClient:
        sock: paramiko.Channel | None = None
        if via is not None:
            try:
                sock = via.open_channel("direct-tcpip", (hop.address, hop.port), ("", 0), timeout=hop.timeout)
            except (paramiko.SSHException, OSError, EOFError) as exc:
                text = exc.text if isinstance(exc, paramiko.ChannelException) else f"{exc}"
                raise ConnectError(
                    f"jump host {via_hop} could not connect to jump host {hop}: {text}"
                ) from exc
        client = paramiko.SSHClient()
        _load_host_keys(client, hop.known_hosts, hop.address, hop.port)
        client.set_missing_host_key_policy(
            _AcceptUnknown() if hop.accept_unknown else paramiko.RejectPolicy()
        )
        try:
            client.connect(
                hop.address,
                port=hop.port,
                username=hop.user,
                key_filename=list(hop.key_files) or None,
                look_for_keys=not hop.key_files,
                allow_agent=hop.allow_agent,
                timeout=hop.timeout,
                banner_timeout=hop.timeout,
                auth_timeout=hop.timeout,
                channel_timeout=hop.timeout,
                sock=sock,
            )
        except Exception as exc:
            client.close()
            reason = _describe_connect_error(exc, hop.address, hop.port, hop.timeout, hop.user)
            named = f"{hop} ({hop.alias})" if hop.alias != hop.address else f"{hop}"
            raise ConnectError(f"jump host {named} failed: {reason}") from exc
        transport = client.get_transport()
        if transport is not None:
            transport.set_keepalive(15)
            _tcp_keepalive(transport.sock)
        return client

    def release(self, keys: Sequence[tuple[tuple[str, str, int], ...]]) -> None:
        """One user fewer on each login; a login nobody uses any more is closed (last hop first)."""
        for key in reversed(keys):
            entry = self._entry(key)
            with entry.lock:
                entry.users = max(0, entry.users - 1)
                if entry.users == 0 and entry.client is not None:
                    entry.client.close()
                    entry.client = None

    def close_all(self) -> None:
        with self._lock:
            entries = sorted(self._entries.items(), key=lambda item: -len(item[0]))
            self._entries.clear()
        for _, entry in entries:
            with entry.lock:
                if entry.client is not None:
                    entry.client.close()
                    entry.client = None
                entry.users = 0

    def open_count(self) -> int:
        """How many jump-host logins are open now (for tests and the fan-out bench)."""
        with self._lock:
            entries = list(self._entries.values())
        return sum(
            1
            for e in entries
            if e.client is not None and (t := e.client.get_transport()) is not None and t.is_active()
        )


_JUMPS = _JumpHosts()


def close_jump_hosts() -> None:
    """Close every shared jump-host login; the engine calls this when a run ends (idempotent).

    Each login also closes by itself when the last target connection through it is closed; this is the
    backstop for a run that ends without closing every connection (interrupt, time budget).
    """
    _JUMPS.close_all()


def open_jump_hosts() -> int:
    """How many shared jump-host logins are open now."""
    return _JUMPS.open_count()


class SSHConnection(Connection):
    """A remote host over SSH, honouring the ansible_* variables and ~/.ssh/config.

    Host keys are verified against known_hosts by default; ``accept_unknown_host_keys`` (Ansible's
    ``host_key_checking = False``) admits a host never seen before, but a key that differs from the one
    on record is refused either way. The options of ``ansible_ssh_common_args`` /
    ``ansible_ssh_extra_args`` fill in what the ansible_* variables leave unset (the variables come
    first on Ansible's ssh command line, and OpenSSH keeps the first value).

    Behind a jump host the same rules hold for the jump host: its key is checked against the same
    known_hosts files (plus its own ``UserKnownHostsFile`` in ~/.ssh/config) under the same policy; its
    user and port come from the ``user@host:port`` spec, else from ~/.ssh/config for that alias, else
    the local user and 22, as with OpenSSH. It is offered the keys ~/.ssh/config names for it and the
    target's own key files (OpenSSH would not pass ``-i`` to the jump login; offering one more key is
    harmless and is what inventories that give one key for everything expect), the agent as for the
    target, and the default keys when no key file is named at all.
    """

    def __init__(
        self, host: Host, accept_unknown_host_keys: bool = False, known_hosts: str | None = None
    ) -> None:
        super().__init__(host)
        v = host.vars
        try:
            self.ssh_args: SSHArgs = host_ssh_args(v)
        except SSHArgsError as exc:  # inventory validation refuses these first; a Host built elsewhere
            raise ConnectError(str(exc)) from None
        args = self.ssh_args
        self.connect_timeout = (
            v.float("ansible_ssh_timeout", None)
            or v.float("diagnose_connect_timeout", None)
            or args.connect_timeout
            or DEFAULT_CONNECT_TIMEOUT_S
        )
        checking = v.bool("ansible_host_key_checking", None)
        if checking is None and args.strict_host_key_checking is not None:
            checking = args.strict_host_key_checking
        self.accept_unknown = accept_unknown_host_keys or checking is False
        self.known_hosts = known_hosts or v.str("diagnose_known_hosts_file")
        self.allow_agent = bool(v.bool("diagnose_ssh_agent", True))
        connect_kwargs: dict[str, object] = {
            "banner_timeout": self.connect_timeout,
            "auth_timeout": self.connect_timeout,
            "allow_agent": self.allow_agent,
        }
        key_file = v.str("ansible_ssh_private_key_file") or v.str("ansible_private_key_file")
        key_files = [key_file] if key_file else []
        self.key_files = [os.path.expanduser(k) for k in [*key_files, *args.identity_files]]
        if self.key_files:
            connect_kwargs["key_filename"] = list(self.key_files)
            connect_kwargs["look_for_keys"] = False
        if args.compression:
            connect_kwargs["compress"] = True
        password = v.str("ansible_password") or v.str("ansible_ssh_pass")
        if password:
            connect_kwargs["password"] = password
        self._fabric = FabricConnection(
            host.address,
            user=v.str("ansible_user") or v.str("ansible_ssh_user") or args.user,
            port=v.int("ansible_port", None) or v.int("ansible_ssh_port", None) or args.port,
            connect_timeout=self.connect_timeout,
            connect_kwargs=connect_kwargs,
            config=Config(overrides={"load_ssh_configs": True}),
            gateway=False,  # jump hosts are ours: see the module docstring
        )
        self.port = self._fabric.port
        self._jump_keys: list[tuple[tuple[str, str, int], ...]] = []
        self._channel: paramiko.Channel | None = None  # the direct-tcpip channel through a jump host
        self._proxy: _ProxyCommand | None = None

    def _known_hosts_files(self, config_files: str | list[str] | None = None) -> list[str]:
        files = [os.path.expanduser("~/.ssh/known_hosts")]
        if isinstance(config_files, list):
            config_files = " ".join(config_files)
        for path in [config_files, self.known_hosts, *self.ssh_args.known_hosts_files]:
            files += [os.path.expanduser(one) for one in (path or "").split()]
        return files

    def _prepare_host_keys(self) -> None:
        client = self._fabric.client
        files = self._known_hosts_files(self._fabric.ssh_config.get("userknownhostsfile"))
        # after ~/.ssh/config HostName: the name paramiko checks
        _load_host_keys(client, files, self._fabric.host, self.port)
        policy = _AcceptUnknown() if self.accept_unknown else paramiko.RejectPolicy()
        client.set_missing_host_key_policy(policy)

    def proxy(self) -> tuple[tuple[Hop, ...], str | None, str]:
        """(jump chain, proxy command, where it was set): the variables first, then ~/.ssh/config."""
        args = self.ssh_args
        if args.has_proxy or args.no_proxy:
            return args.proxy_jump, args.proxy_command, "ansible_ssh_common_args/ansible_ssh_extra_args"
        config = self._fabric.ssh_config
        jump = config.get("proxyjump")
        if jump and jump.strip().lower() != "none":
            try:
                hops = parse_jump_spec(jump)
            except SSHArgsError as exc:
                raise ConnectError(f"~/.ssh/config for {self.host.address}: {exc}") from None
            # A wildcard block (Host *) also matches the jump host itself: it is not its own jump host.
            if hops[0].host not in (self.host.address, self._fabric.host):
                return hops, None, "~/.ssh/config"
            return (), None, ""
        command = config.get("proxycommand")
        if command and command.strip().lower() != "none":
            return (), command, "~/.ssh/config"
        return (), None, ""

    def _jump_chain(self, hops: Sequence[Hop]) -> list[_JumpLogin]:
        """Each hop resolved through ~/.ssh/config; the first hop's own ProxyJump there comes first, as
        OpenSSH's ``ssh -W`` to it would honour it."""
        base = self._fabric.config.base_ssh_config
        chain: list[_JumpLogin] = []
        pending = list(hops)
        seen: set[str] = set()
        while pending:
            hop = pending.pop(0)
            config = base.lookup(hop.host)
            if not chain and hop.host not in seen:
                seen.add(hop.host)
                own = config.get("proxyjump")
                if own and own.strip().lower() != "none":
                    try:
                        before = [h for h in parse_jump_spec(own) if h.host != hop.host]
                    except SSHArgsError as exc:
                        raise ConnectError(f"~/.ssh/config for jump host {hop.host}: {exc}") from None
                    if before and len(seen) < 8:
                        pending = [*before, hop, *pending]
                        continue
                if config.get("proxycommand", "none").strip().lower() != "none":
                    raise ConnectError(
                        f"jump host {hop.host} has a ProxyCommand in ~/.ssh/config; a jump host reached "
                        "through a ProxyCommand is not supported (write the chain as ProxyJump=a,b)"
                    )
            key_files = [os.path.expanduser(k) for k in config.get("identityfile", [])]
            chain.append(
                _JumpLogin(
                    alias=hop.host,
                    address=config.get("hostname", hop.host),
                    port=hop.port or int(config.get("port", 22)),
                    user=hop.user or config.get("user") or getpass.getuser(),
                    key_files=tuple(dict.fromkeys([*key_files, *self.key_files])),
                    allow_agent=self.allow_agent,
                    known_hosts=tuple(self._known_hosts_files(config.get("userknownhostsfile"))),
                    accept_unknown=self.accept_unknown,
                    timeout=self.connect_timeout,
                )
            )
        return chain

    def _open_socket(self) -> None:
        """Give Fabric the socket a jump host or ProxyCommand provides, if the host has one."""
        hops, command, _where = self.proxy()
        if hops:
            chain = self._jump_chain(hops)
            channel, self._jump_keys = _JUMPS.channel(
                chain, (self._fabric.host, self.port), self.connect_timeout
            )
            self._fabric.connect_kwargs["sock"] = self._channel = channel
        elif command is not None:
            if self.ssh_args.proxy_command is not None:  # ~/.ssh/config's was expanded by paramiko
                command = expand_proxy_command(
                    command, self._fabric.host, self.port, self._fabric.user, self.host.address
                )
            try:
                self._proxy = _ProxyCommand("/bin/sh -c " + shlex.quote(command))
            except (OSError, paramiko.SSHException) as exc:
                raise ConnectError(f"ProxyCommand `{command}` could not start: {exc}") from exc
            self._fabric.connect_kwargs["sock"] = self._proxy

    def _proxy_failure(self) -> str | None:
        """Why the ProxyCommand failed, when it ended (its exit and last stderr line); None while it
        runs, where the SSH error itself says what went wrong."""
        proxy = self._proxy
        if proxy is None:
            return None
        try:
            proxy.process.wait(timeout=1)
        except subprocess.TimeoutExpired:
            return None
        said = proxy.said()
        ended = f"exit {proxy.process.returncode}" + (f": {said}" if said else "")
        return f"ProxyCommand `{' '.join(proxy.cmd[2:])}` failed ({ended})"

    def open(self) -> None:
        self._prepare_host_keys()
        try:
            self._open_socket()
            self._fabric.open()
        except ConnectError:
            self.close()
            raise
        except Exception as exc:
            reason = _describe_connect_error(
                exc, self._fabric.host, self.port, self.connect_timeout, self._fabric.user
            )
            reason = self._proxy_failure() or reason
            if self._jump_keys:
                hops = ", ".join(str(hop) for hop in self.proxy()[0])
                reason = f"{reason} (through jump host {hops})"
            self.close()
            raise ConnectError(reason) from exc
        transport = self._fabric.transport
        if transport is not None:
            transport.set_keepalive(int(self.ssh_args.server_alive_interval or 15))
            _tcp_keepalive(transport.sock)

    def _execute(
        self, script: str, stdin: bytes | None, out: Sink, err: Sink, deadline: Callable[[], float]
    ) -> _Exec:
        transport = self._fabric.transport
        if transport is None or not transport.is_active():
            return _Exec(error="connection lost: the SSH session is closed")
        try:
            wait = min(self.connect_timeout, deadline() - time.monotonic())
            channel = transport.open_session(timeout=max(0.5, wait))  # a frozen sshd never confirms
            channel.exec_command(script)
            if stdin:
                channel.sendall(stdin)
            channel.shutdown_write()
            channel.settimeout(0.05)
            while True:
                if time.monotonic() > deadline():
                    channel.close()
                    return _Exec(timed_out=True)
                got = False
                try:
                    data = channel.recv(65536)
                    if data:
                        out(data)
                        got = True
                except TimeoutError:
                    pass
                while channel.recv_stderr_ready():
                    err(channel.recv_stderr(65536))
                    got = True
                if got:
                    continue
                if channel.exit_status_ready() and (channel.eof_received or channel.closed):
                    break
                if not transport.is_active():
                    return _Exec(error="connection lost: the SSH session dropped")
                if channel.eof_received:  # output done, exit status on its way: recv no longer waits
                    time.sleep(0.01)
            while channel.recv_stderr_ready():
                err(channel.recv_stderr(65536))
            code = channel.recv_exit_status()
            channel.close()
        except (paramiko.SSHException, OSError, EOFError) as exc:
            return _Exec(error=f"connection lost: {exc}")
        if code == -1:  # the channel closed without an exit status
            if transport.is_active():
                return _Exec(error="the command was killed on the host (ended by a signal, no exit status)")
            return _Exec(error="connection lost: the command ended without an exit status")
        return _Exec(exit_code=code)

    def close(self) -> None:
        if self._stopping.acquire(timeout=STOP_TIMEOUT_S + 1):  # let a stop in flight finish first
            self._stopping.release()
        self._fabric.close()
        if self._proxy is not None:
            self._proxy.close()
            self._proxy.stderr_file.close()
            self._proxy = None
        if self._channel is not None:  # a failed handshake leaves it open on the shared login
            self._channel.close()
            self._channel = None
        keys, self._jump_keys = self._jump_keys, []
        _JUMPS.release(keys)


class _ProxyCommand(paramiko.ProxyCommand):
    """paramiko's ProxyCommand, closable when its process has already ended.

    paramiko's own close sends SIGTERM unconditionally: once the process is gone (a bastion that
    refused us) that raises in the transport's thread and prints a traceback on stderr. This one
    stops the process only while it runs, and reaps it so no zombie stays for the run.
    """

    def __init__(self, command_line: str) -> None:
        self.cmd = shlex.split(command_line)
        # A file, not a pipe: the transport's thread may close the proxy before we read why it died.
        self.stderr_file = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the proxy
        self.process = subprocess.Popen(
            self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr_file, bufsize=0
        )
        self.timeout = None

    def said(self) -> str:
        """The last line the command wrote on stderr."""
        with contextlib.suppress(OSError, ValueError):
            self.stderr_file.seek(0)
            lines = self.stderr_file.read().decode(errors="replace").strip().splitlines()
            return lines[-1].strip() if lines else ""
        return ""

    def close(self) -> None:
        process = self.process
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=2)
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


def _tcp_keepalive(sock: object) -> None:
    """Let the kernel notice a peer that vanished (power loss, cable pulled) within about a minute."""
    if not isinstance(sock, socket.socket):
        return  # a ProxyCommand pipe
    options = [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]
    for name, value in (("TCP_KEEPIDLE", 30), ("TCP_KEEPINTVL", 10), ("TCP_KEEPCNT", 3)):
        if hasattr(socket, name):
            options.append((socket.IPPROTO_TCP, getattr(socket, name), value))
    for level, option, value in options:
        try:
            sock.setsockopt(level, option, value)
        except OSError:
            return


def connect(host: Host, accept_unknown_host_keys: bool = False, known_hosts: str | None = None) -> Connection:
    """A connection of the kind the host's ``ansible_connection`` asks for (not yet opened)."""
    if host.connection == "local":
        return LocalConnection(host)
    if host.connection in ("ssh", "paramiko", "smart"):
        return SSHConnection(host, accept_unknown_host_keys=accept_unknown_host_keys, known_hosts=known_hosts)
    raise ConnectError(f"ansible_connection={host.connection!r} is not supported (use ssh or local)")
