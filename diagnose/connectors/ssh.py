"""The ``ssh`` connector (also ``paramiko`` and ``smart``): a remote host over Fabric/paramiko.

It honours the ``ansible_*`` connection variables and ~/.ssh/config, verifies host keys against
known_hosts, reaches hosts behind bastions through :mod:`diagnose.connectors.jump`, and runs scripts over
paramiko exec channels read as they arrive (see :mod:`diagnose.connectors.base`).
"""

from __future__ import annotations

import getpass
import os
import select
import shlex
import subprocess
import time
from collections.abc import Callable, Sequence

import paramiko
from fabric import Config
from fabric import Connection as FabricConnection

from diagnose.connectors.base import (
    DEFAULT_CONNECT_TIMEOUT_S,
    STOP_TIMEOUT_S,
    ConnectError,
    Connection,
    Exec,
    Sink,
)
from diagnose.connectors.jump import JUMPS, JumpLogin, ProxyCommandSock
from diagnose.connectors.ssh_args import Hop, SSHArgs, SSHArgsError, expand_proxy_command, parse_jump_spec
from diagnose.connectors.ssh_common import (
    PRIVATE_KEYS,
    AcceptUnknown,
    describe_connect_error,
    load_host_keys,
    tcp_keepalive,
)
from diagnose.connectors.ssh_login import Proxy, choose_proxy, ssh_login
from diagnose.core.hosts import Host

# The longest a command's thread sleeps when nothing arrives before it looks at the session and the
# deadline again; output, EOF and a dropped session (paramiko closes its channels) wake it sooner.
WAKE_S = 1.0
# After handing output on, the reader lets more gather before it looks again: a batch's output comes as
# hundreds of small packets (each printf of the shell is one), and a wake-up per packet costs the
# controller a GIL and lock hand-off with the transport thread each time. Progress is judged in seconds,
# so this delay changes no verdict; it adds at most this much to a batch's end.
GATHER_S = 0.02
# Offered first: an AES-GCM packet is checked by the cipher itself, in C, where paramiko checks the
# HMAC of a CTR packet with a constant-time comparison written in Python, byte by byte, on every packet.
# A server without them gets the rest of paramiko's list, in paramiko's order.
FIRST_CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")


def gcm_first_transport(sock: object, **kwargs: object) -> paramiko.Transport:
    """A paramiko Transport that offers :data:`FIRST_CIPHERS` before the others (SSHClient's
    ``transport_factory``)."""
    transport = paramiko.Transport(sock, **kwargs)
    options = transport.get_security_options()
    offered = tuple(options.ciphers)
    first = tuple(c for c in FIRST_CIPHERS if c in offered)
    options.ciphers = first + tuple(c for c in offered if c not in first)
    return transport


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
            self.login = ssh_login(v, known_hosts)
        except SSHArgsError as exc:  # inventory validation refuses these first; a Host built elsewhere
            raise ConnectError(str(exc)) from None
        self.ssh_args: SSHArgs = self.login.args
        args = self.ssh_args
        self.connect_timeout = self.login.connect_timeout or DEFAULT_CONNECT_TIMEOUT_S
        self.accept_unknown = accept_unknown_host_keys or self.login.host_key_checking is False
        self.allow_agent = bool(v.bool("diagnose_ssh_agent", True))
        connect_kwargs: dict[str, object] = {
            "banner_timeout": self.connect_timeout,
            "auth_timeout": self.connect_timeout,
            "allow_agent": self.allow_agent,
            "transport_factory": gcm_first_transport,
        }
        self.key_files = list(self.login.key_files)
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
            user=self.login.user,
            port=self.login.port,
            connect_timeout=self.connect_timeout,
            connect_kwargs=connect_kwargs,
            config=Config(overrides={"load_ssh_configs": True}),
            gateway=False,  # jump hosts are ours: see the module docstring
        )
        self.port = self._fabric.port
        self._jump_keys: list[tuple[tuple[str, str, int], ...]] = []
        self._channel: paramiko.Channel | None = None  # the direct-tcpip channel through a jump host
        self._proxy: ProxyCommandSock | None = None

    def _known_hosts_files(self, config_files: str | list[str] | None = None) -> list[str]:
        files = [os.path.expanduser("~/.ssh/known_hosts")]
        if isinstance(config_files, list):
            config_files = " ".join(config_files)
        for path in [config_files, *self.login.known_hosts_files]:
            files += [os.path.expanduser(one) for one in (path or "").split()]
        return files

    def _prepare_host_keys(self) -> None:
        client = self._fabric.client
        files = self._known_hosts_files(self._fabric.ssh_config.get("userknownhostsfile"))
        # after ~/.ssh/config HostName: the name paramiko checks
        load_host_keys(client, files, self._fabric.host, self.port)
        policy = AcceptUnknown() if self.accept_unknown else paramiko.RejectPolicy()
        client.set_missing_host_key_policy(policy)

    def proxy(self) -> Proxy:
        """The jump chain or proxy command: the variables first, then ~/.ssh/config (paramiko's lookup)."""
        names = (self.host.address, self._fabric.host)
        try:
            return choose_proxy(self.ssh_args, self._fabric.ssh_config, names)
        except SSHArgsError as exc:
            raise ConnectError(f"~/.ssh/config for {self.host.address}: {exc}") from None

    def _jump_chain(self, hops: Sequence[Hop]) -> list[JumpLogin]:
        """Each hop resolved through ~/.ssh/config; the first hop's own ProxyJump there comes first, as
        OpenSSH's ``ssh -W`` to it would honour it."""
        base = self._fabric.config.base_ssh_config
        chain: list[JumpLogin] = []
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
                JumpLogin(
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
        proxy = self.proxy()
        hops, command = proxy.jump, proxy.command
        if hops:
            chain = self._jump_chain(hops)
            channel, self._jump_keys = JUMPS.channel(
                chain, (self._fabric.host, self.port), self.connect_timeout
            )
            self._fabric.connect_kwargs["sock"] = self._channel = channel
        elif command is not None:
            if self.ssh_args.proxy_command is not None:  # ~/.ssh/config's was expanded by paramiko
                command = expand_proxy_command(
                    command, self._fabric.host, self.port, self._fabric.user, self.host.address
                )
            try:
                self._proxy = ProxyCommandSock("/bin/sh -c " + shlex.quote(command))
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

    def _offer_loaded_key(self) -> None:
        """Offer the first key file (after Fabric added ~/.ssh/config's) as the key loaded once for the
        run, tried first as paramiko would try that file; the other files stay for paramiko to read."""
        kwargs = self._fabric.connect_kwargs
        files = kwargs.get("key_filename") or []
        files = [files] if isinstance(files, str) else list(files)
        if not files or kwargs.get("pkey") is not None:
            return
        key = PRIVATE_KEYS.load(files[0])
        if key is not None:
            kwargs["pkey"] = key
            kwargs["key_filename"] = files[1:]

    def open(self) -> None:
        self._prepare_host_keys()
        self._offer_loaded_key()
        try:
            self._open_socket()
            self._fabric.open()
        except ConnectError:
            self.close()
            raise
        except Exception as exc:
            reason = describe_connect_error(
                exc, self._fabric.host, self.port, self.connect_timeout, self._fabric.user
            )
            reason = self._proxy_failure() or reason
            if self._jump_keys:
                hops = ", ".join(str(hop) for hop in self.proxy().jump)
                reason = f"{reason} (through jump host {hops})"
            self.close()
            raise ConnectError(reason) from exc
        transport = self._fabric.transport
        if transport is not None:
            transport.set_keepalive(int(self.ssh_args.server_alive_interval or 15))
            tcp_keepalive(transport.sock)

    def _execute(
        self, script: str, stdin: bytes | None, out: Sink, err: Sink, deadline: Callable[[], float]
    ) -> Exec:
        transport = self._fabric.transport
        if transport is None or not transport.is_active():
            return Exec(error="connection lost: the SSH session is closed")
        try:
            wait = min(self.connect_timeout, deadline() - time.monotonic())
            channel = transport.open_session(timeout=max(0.5, wait))  # a frozen sshd never confirms
            channel.exec_command(script)
            if stdin:
                channel.sendall(stdin)
            channel.shutdown_write()
            ended = _pump(channel, transport, out, err, deadline)
            if ended is not None:
                return ended
            code = channel.recv_exit_status()
            channel.close()
        except (paramiko.SSHException, OSError, EOFError) as exc:
            return Exec(error=f"connection lost: {exc}")
        if code == -1:  # the channel closed without an exit status
            if transport.is_active():
                return Exec(error="the command was killed on the host (ended by a signal, no exit status)")
            return Exec(error="connection lost: the command ended without an exit status")
        return Exec(exit_code=code)

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
        JUMPS.release(keys)


def _pump(
    channel: paramiko.Channel,
    transport: paramiko.Transport,
    out: Sink,
    err: Sink,
    deadline: Callable[[], float],
) -> Exec | None:
    """Hand a running command's two outputs to their sinks until its exit status is in (None), the
    deadline passes or the session drops (how it ended).

    The thread sleeps in ``poll`` on the channel's event pipe, which paramiko sets when either output
    has data and for good once EOF or the close arrives, so a host fanned out among hundreds costs the
    controller a wake-up per chunk of output rather than one per polling tick. (``poll``, not
    ``select``: a run of a thousand hosts holds descriptors past select's limit of 1024.)
    """
    ready = select.poll()
    ready.register(channel.fileno(), select.POLLIN)
    channel.settimeout(0.0)  # only drained when ready: a read never waits
    while True:
        now, limit = time.monotonic(), deadline()
        if now > limit:
            channel.close()
            return Exec(timed_out=True)
        if _drain(channel, out, err):
            time.sleep(min(GATHER_S, max(0.0, limit - now)))
            continue
        wait = min(WAKE_S, limit - now)
        if channel.eof_received or channel.closed:  # output done, the exit status on its way
            if channel.exit_status_ready():
                _drain(channel, out, err)  # what arrived since the last look, with the EOF
                return None
            if not transport.is_active():
                return Exec(error="connection lost: the SSH session dropped")
            channel.status_event.wait(wait)
            continue
        if not transport.is_active():
            return Exec(error="connection lost: the SSH session dropped")
        ready.poll(max(0, wait) * 1000)


def _drain(channel: paramiko.Channel, out: Sink, err: Sink) -> bool:
    """Hand on whatever output the channel holds now; whether there was any."""
    got = False
    while channel.recv_ready():
        out(channel.recv(65536))
        got = True
    while channel.recv_stderr_ready():
        err(channel.recv_stderr(65536))
        got = True
    return got
