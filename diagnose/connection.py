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
import secrets
import shlex
import socket
import subprocess
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path

import paramiko
from fabric import Config
from fabric import Connection as FabricConnection
from invoke.exceptions import CommandTimedOut

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


class ConnectError(Exception):
    """The host could not be reached or refused us; the message is what the operator needs to read."""


def _exit_code_of(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def batch_script(commands: Sequence[Command], token: str, timeout_cap: float | None = None) -> str:
    """One POSIX shell script running every command with its own timeout and framed output.

    Each command's stdout, then its exit code and stderr, are written between marker lines carrying a
    random token, so no command output can forge a boundary. ``timeout`` (coreutils/busybox) bounds each
    command on the host; where it is missing the command runs unbounded and the channel timeout is the
    backstop.
    """
    lines = [
        'd=$(mktemp -d 2>/dev/null || { mkdir -p "/tmp/diagnose.$$" && echo "/tmp/diagnose.$$"; })',
        "if command -v timeout >/dev/null 2>&1; then t=timeout; else t=; fi",
    ]
    for command in commands:
        seconds = command.timeout if timeout_cap is None else min(command.timeout, timeout_cap)
        limit = f"{max(1, round(seconds))}"
        quoted = shlex.quote(command.script)
        lines += [
            f"printf '%s\\n' '{token} OUT {command.key}'",
            f'if [ -n "$t" ]; then timeout -k {_KILL_GRACE_S} {limit} sh -c {quoted} </dev/null 2>"$d/err"; '
            f'else sh -c {quoted} </dev/null 2>"$d/err"; fi',
            "rc=$?",
            f"printf '\\n%s %s\\n' '{token} ERR {command.key}' \"$rc $t\"",
            'cat "$d/err"',
            f"printf '\\n%s\\n' '{token} END {command.key}'",
        ]
    lines.append('rm -rf "$d"')
    return "\n".join(lines) + "\n"


def parse_batch_output(text: str, commands: Sequence[Command], token: str) -> dict[str, CommandOutput]:
    """Split a batch script's stdout back into one CommandOutput per command key.

    A command whose markers are missing (the batch was cut short) gets ``error`` set, so the check that
    needed it reports an ERROR instead of judging half an output.
    """
    results: dict[str, CommandOutput] = {}
    current: str | None = None
    section = ""
    buffer: list[str] = []
    pending: CommandOutput | None = None
    for line in text.splitlines(keepends=True):
        if line.startswith(token + " "):
            _, kind, rest = line.rstrip("\n").split(" ", 2)
            key, _, tail = rest.partition(" ")
            body = "".join(buffer)
            if kind == "OUT":
                current, section, buffer = key, "out", []
                pending = CommandOutput()
                continue
            if current != key or pending is None:
                continue
            if kind == "ERR":
                pending.stdout = body[:-1] if body.endswith("\n") else body
                code_text, _, wrapper = tail.partition(" ")
                code = _exit_code_of(code_text)
                pending.exit_code = code
                pending.timed_out = bool(wrapper) and code in (124, 137)
                section, buffer = "err", []
            elif kind == "END" and section == "err":
                pending.stderr = body[:-1] if body.endswith("\n") else body
                results[key] = pending
                current, pending, buffer = None, None, []
            continue
        buffer.append(line)
    for command in commands:
        if command.key not in results:
            results[command.key] = CommandOutput(error="the batch ended before this command finished")
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
        outputs = parse_batch_output(result.stdout, commands, token)
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
        client.load_system_host_keys()
        configured = self._fabric.ssh_config.get("userknownhostsfile")
        for path in [configured, self.known_hosts]:
            for one in (path or "").split():
                expanded = os.path.expanduser(one)
                if os.path.exists(expanded):
                    client.load_host_keys(expanded)
        policy = paramiko.WarningPolicy() if self.accept_unknown else paramiko.RejectPolicy()
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
