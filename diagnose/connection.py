"""How diagnose talks to a host: one connection per host, reused for all of its commands.

``SSHConnection`` (Fabric/paramiko) and ``LocalConnection`` share one small base class, so the engine and
the benchmark launcher never know which transport they use. The per-host checks are sent as one batch
script: one SSH round trip and one remote shell per host instead of one per command, with each command
still under its own ``timeout`` on the host and its own stdout, stderr and exit code.
"""

from __future__ import annotations

import io
import logging
import os
import re
import secrets
import shlex
import socket
import subprocess
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path

import paramiko
from fabric import Config
from fabric import Connection as FabricConnection
from invoke.exceptions import CommandTimedOut
from paramiko.hostkeys import HostKeyEntry

from diagnose.check import Command
from diagnose.hosts import Host
from diagnose.model import CommandOutput

# paramiko logs every failed handshake with a traceback; the reason reaches the operator as a
# host.reachable result instead, and cron mail must not fill with tracebacks.
logging.getLogger("paramiko").setLevel(logging.CRITICAL)

DEFAULT_CONNECT_TIMEOUT_S = 10.0
# Extra seconds a whole batch may take beyond the sum of its commands' timeouts before the channel is
# abandoned: covers `timeout -k` grace periods and shell start-up.
_BATCH_SLACK_S = 10.0
_KILL_GRACE_S = 2
_PLAIN_COMMAND = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./=:,+-]*( [A-Za-z0-9_./=:,+-]+)*")


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
    lines = ["if command -v timeout >/dev/null 2>&1; then t=timeout; else t=; fi"]
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


def _sections(text: str, token: str) -> dict[str, tuple[str, str]]:
    """{key: (body, tail of the END marker)} for every complete OUT…END section of one stream."""
    sections: dict[str, tuple[str, str]] = {}
    current: str | None = None
    buffer: list[str] = []
    for line in text.splitlines(keepends=True):
        if line.startswith(token + " "):
            _, kind, rest = line.rstrip("\n").split(" ", 2)
            key, _, tail = rest.partition(" ")
            if kind == "OUT":
                current, buffer = key, []
            elif kind == "END" and key == current:
                body = "".join(buffer)
                sections[key] = (body[:-1] if body.endswith("\n") else body, tail)
                current = None
            continue
        if current is not None:
            buffer.append(line)
    return sections


def parse_batch_output(
    stdout: str, stderr: str, commands: Sequence[Command], token: str
) -> dict[str, CommandOutput]:
    """Split a batch script's two streams back into one CommandOutput per command key.

    A command whose markers are missing (the batch was cut short) gets ``error`` set, so the check that
    needed it reports an ERROR instead of judging half an output.
    """
    outs, errs = _sections(stdout, token), _sections(stderr, token)
    results: dict[str, CommandOutput] = {}
    for command in commands:
        if command.key not in outs:
            results[command.key] = CommandOutput(error="the batch ended before this command finished")
            continue
        body, tail = outs[command.key]
        code_text, _, wrapper = tail.partition(" ")
        code = _exit_code_of(code_text)
        results[command.key] = CommandOutput(
            stdout=body,
            stderr=errs.get(command.key, ("", ""))[0],
            exit_code=code,
            timed_out=bool(wrapper) and code in (124, 137),
        )
    return results


class Connection(ABC):
    """A host we can run commands on."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.name = host.name

    @abstractmethod
    def open(self) -> None:
        """Connect now; raise ConnectError with the reason if the host cannot be used."""

    @abstractmethod
    def run(
        self, script: str, timeout: float, env: dict[str, str] | None = None, stdin: str | None = None
    ) -> CommandOutput:
        """Run one shell script; a script still running after ``timeout`` seconds is abandoned."""

    @abstractmethod
    def put_text(self, remote_path: str, content: str, mode: int = 0o644) -> None:
        """Write a file on the host (the benchmark program, say)."""

    def close(self) -> None:
        """Release the connection; safe to call twice."""
        return None

    def run_batch(
        self, commands: Sequence[Command], timeout_cap: float | None = None
    ) -> dict[str, CommandOutput]:
        """Run every command in one round trip; see :func:`batch_script`."""
        if not commands:
            return {}
        token = "@@diagnose-" + secrets.token_hex(8)
        script = batch_script(commands, token, timeout_cap)
        budget = sum(min(c.timeout, timeout_cap or c.timeout) + _KILL_GRACE_S for c in commands)
        result = self.run(script, timeout=budget + _BATCH_SLACK_S)
        outputs = parse_batch_output(result.stdout, result.stderr, commands, token)
        if result.error or result.timed_out:
            reason = result.error or f"the command batch exceeded {budget + _BATCH_SLACK_S:.0f} s"
            for output in outputs.values():
                if output.error:
                    output.error = reason
        return outputs


class LocalConnection(Connection):
    """This machine, through a local shell (``ansible_connection: local``)."""

    def open(self) -> None:
        return None

    def run(
        self, script: str, timeout: float, env: dict[str, str] | None = None, stdin: str | None = None
    ) -> CommandOutput:
        started = time.monotonic()
        full_env = {**os.environ, **(env or {})}
        with subprocess.Popen(
            ["/bin/sh", "-c", script],
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=full_env,
            start_new_session=True,
        ) as proc:
            try:
                out, err = proc.communicate(stdin.encode() if stdin is not None else None, timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                out, err = proc.communicate()
                return CommandOutput(
                    stdout=out.decode(errors="replace"),
                    stderr=err.decode(errors="replace"),
                    timed_out=True,
                    duration_s=time.monotonic() - started,
                )
        return CommandOutput(
            stdout=out.decode(errors="replace"),
            stderr=err.decode(errors="replace"),
            exit_code=proc.returncode,
            duration_s=time.monotonic() - started,
        )

    def put_text(self, remote_path: str, content: str, mode: int = 0o644) -> None:
        path = Path(remote_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
        path.chmod(mode)


def _describe_connect_error(exc: BaseException, host: Host, port: int, timeout: float) -> str:
    """Turn paramiko/socket exceptions into the one line an operator acts on."""
    where = f"{host.address}:{port}"
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
    if isinstance(exc, paramiko.SSHException) and ("banner" in str(exc) or "No existing session" in str(exc)):
        return (
            f"connection to {where} timed out after {timeout:.0f} s waiting for the SSH banner "
            "(sshd hung, overloaded, or not an SSH server)"
        )
    if isinstance(exc, paramiko.AuthenticationException):
        return f"authentication failed for {host.vars.get('ansible_user') or 'the SSH user'}@{where}: {exc}"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return f"connection to {where} timed out after {timeout:.0f} s"
    if isinstance(exc, ConnectionRefusedError):
        return f"connection to {where} refused (no SSH server listening?)"
    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        return f"cannot connect to {where}: {exc.strerror or exc}"
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve {host.address}: {exc.strerror}"
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


class SSHConnection(Connection):
    """A remote host over SSH, honouring the ansible_* variables and ~/.ssh/config.

    Host keys are verified against known_hosts by default; ``accept_unknown_host_keys`` (Ansible's
    ``host_key_checking = False``) admits a host never seen before, but a key that differs from the one
    on record is refused either way.
    """

    def __init__(
        self, host: Host, accept_unknown_host_keys: bool = False, known_hosts: str | None = None
    ) -> None:
        super().__init__(host)
        v = host.vars
        self.connect_timeout = v.float("ansible_ssh_timeout", None) or v.float(
            "diagnose_connect_timeout", DEFAULT_CONNECT_TIMEOUT_S
        )
        checking = v.bool("ansible_host_key_checking", None)
        self.accept_unknown = accept_unknown_host_keys or checking is False
        self.known_hosts = known_hosts or v.str("diagnose_known_hosts_file")
        connect_kwargs: dict[str, object] = {
            "banner_timeout": self.connect_timeout,
            "auth_timeout": self.connect_timeout,
            "allow_agent": v.bool("diagnose_ssh_agent", True),
        }
        key_file = v.str("ansible_ssh_private_key_file") or v.str("ansible_private_key_file")
        if key_file:
            connect_kwargs["key_filename"] = [os.path.expanduser(key_file)]
            connect_kwargs["look_for_keys"] = False
        password = v.str("ansible_password") or v.str("ansible_ssh_pass")
        if password:
            connect_kwargs["password"] = password
        self._fabric = FabricConnection(
            host.address,
            user=v.str("ansible_user") or v.str("ansible_ssh_user"),
            port=v.int("ansible_port", None) or v.int("ansible_ssh_port", None),
            connect_timeout=self.connect_timeout,
            connect_kwargs=connect_kwargs,
            config=Config(overrides={"load_ssh_configs": True}),
        )
        self.port = self._fabric.port

    def _prepare_host_keys(self) -> None:
        client = self._fabric.client
        files = [os.path.expanduser("~/.ssh/known_hosts")]
        for path in [self._fabric.ssh_config.get("userknownhostsfile"), self.known_hosts]:
            files += [os.path.expanduser(one) for one in (path or "").split()]
        host = self._fabric.host  # after ~/.ssh/config HostName: the name paramiko checks
        name = host if self.port == 22 else f"[{host}]:{self.port}"
        for path in files:
            for key in _KNOWN_HOSTS.keys_for(path, name):
                client.get_host_keys().add(name, key.get_name(), key)
        policy = _AcceptUnknown() if self.accept_unknown else paramiko.RejectPolicy()
        client.set_missing_host_key_policy(policy)

    def open(self) -> None:
        self._prepare_host_keys()
        try:
            self._fabric.open()
        except Exception as exc:
            self.close()
            raise ConnectError(
                _describe_connect_error(exc, self.host, self.port, self.connect_timeout)
            ) from exc
        transport = self._fabric.transport
        if transport is not None:
            transport.set_keepalive(15)

    def run(
        self, script: str, timeout: float, env: dict[str, str] | None = None, stdin: str | None = None
    ) -> CommandOutput:
        started = time.monotonic()
        prefix = "".join(f"export {k}={shlex.quote(v)}; " for k, v in (env or {}).items())
        try:
            result = self._fabric.run(
                prefix + script,
                hide=True,
                warn=True,
                timeout=timeout,
                in_stream=io.StringIO(stdin) if stdin is not None else False,
            )
        except CommandTimedOut as exc:
            return CommandOutput(
                stdout=exc.result.stdout,
                stderr=exc.result.stderr,
                timed_out=True,
                duration_s=time.monotonic() - started,
            )
        except (paramiko.SSHException, OSError, EOFError) as exc:
            return CommandOutput(error=f"connection lost: {exc}", duration_s=time.monotonic() - started)
        return CommandOutput(
            stdout=result.stdout,
            stderr=result.stderr,
            exit_code=result.exited,
            duration_s=time.monotonic() - started,
        )

    def put_text(self, remote_path: str, content: str, mode: int = 0o644) -> None:
        parent = os.path.dirname(remote_path) or "."
        self.run(f"mkdir -p {shlex.quote(parent)}", timeout=30)
        sftp = self._fabric.sftp()
        with sftp.open(remote_path, "w") as handle:
            handle.write(content)
        sftp.chmod(remote_path, mode)

    def close(self) -> None:
        self._fabric.close()


def connect(host: Host, accept_unknown_host_keys: bool = False, known_hosts: str | None = None) -> Connection:
    """A connection of the kind the host's ``ansible_connection`` asks for (not yet opened)."""
    if host.connection == "local":
        return LocalConnection(host)
    if host.connection in ("ssh", "paramiko", "smart"):
        return SSHConnection(host, accept_unknown_host_keys=accept_unknown_host_keys, known_hosts=known_hosts)
    raise ConnectError(f"ansible_connection={host.connection!r} is not supported (use ssh or local)")
