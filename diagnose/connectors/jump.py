"""Jump hosts: one login per bastion path per run, shared by every target behind it.

``ProxyJump`` / ``ProxyCommand`` come from ``ansible_ssh_common_args`` / ``ansible_ssh_extra_args``
(parsed by :mod:`diagnose.connectors.ssh_args`) or from ~/.ssh/config. They are handled here rather than by Fabric's
``gateway``: Fabric would open one bastion login per target, admit the bastion's host key unchecked (its
default AutoAddPolicy) and expand ``%p`` of an inline ProxyCommand as 22. A jump host's key is checked
against the same known_hosts files and policy as the targets; each target behind it gets a
``direct-tcpip`` channel of the shared transport as its socket. The shared login closes when the last
target using it closes, and :func:`close_jump_hosts` closes whatever is left at the end of a run.
"""

from __future__ import annotations

import contextlib
import shlex
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

import paramiko

from diagnose.connectors.base import ConnectError
from diagnose.connectors.ssh_common import (
    AcceptUnknown,
    describe_connect_error,
    load_host_keys,
    tcp_keepalive,
)


@dataclass(frozen=True)
class JumpLogin:
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


class JumpHosts:
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
        self, chain: Sequence[JumpLogin], destination: tuple[str, int], timeout: float
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
        hop: JumpLogin,
        via: paramiko.Transport | None,
        via_hop: JumpLogin | None,
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
        hop: JumpLogin, via: paramiko.Transport | None, via_hop: JumpLogin | None
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
        load_host_keys(client, hop.known_hosts, hop.address, hop.port)
        client.set_missing_host_key_policy(AcceptUnknown() if hop.accept_unknown else paramiko.RejectPolicy())
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
            reason = describe_connect_error(exc, hop.address, hop.port, hop.timeout, hop.user)
            named = f"{hop} ({hop.alias})" if hop.alias != hop.address else f"{hop}"
            raise ConnectError(f"jump host {named} failed: {reason}") from exc
        transport = client.get_transport()
        if transport is not None:
            transport.set_keepalive(15)
            tcp_keepalive(transport.sock)
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


JUMPS = JumpHosts()


def close_jump_hosts() -> None:
    """Close every shared jump-host login; the engine calls this when a run ends (idempotent).

    Each login also closes by itself when the last target connection through it is closed; this is the
    backstop for a run that ends without closing every connection (interrupt, time budget).
    """
    JUMPS.close_all()


def open_jump_hosts() -> int:
    """How many shared jump-host logins are open now."""
    return JUMPS.open_count()


class ProxyCommandSock(paramiko.ProxyCommand):
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
