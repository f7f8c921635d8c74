"""What a target's SSH login and a jump host's login share: host-key checking against known_hosts (parsed
once per run), the one-line reasons an operator reads when a login fails, and TCP keepalives."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Sequence

import paramiko
from paramiko.hostkeys import HostKeyEntry


def closed_early(exc: BaseException) -> bool:
    """paramiko reads the banner from a socket the peer already closed: EOF or a reset, not a timeout."""
    cause = exc.__cause__ or exc.__context__
    return isinstance(cause, (EOFError, ConnectionResetError, BrokenPipeError))


def key_fingerprint(key: paramiko.PKey) -> str:
    """A host key as ``ssh-keygen -l`` and ssh's own warnings show it: ``ED25519 SHA256:<base64>``, the
    digest unpadded. Operators compare this with what the host prints; a hex MD5 matches nothing they see."""
    return f"{key.algorithm_name} {key.fingerprint}"


def describe_connect_error(
    exc: BaseException, address: str, port: int, timeout: float, user: str | None
) -> str:
    """Turn paramiko/socket exceptions into the one line an operator acts on."""
    where = f"{address}:{port}"
    if isinstance(exc, paramiko.BadHostKeyException):
        return (
            f"host key for {where} has CHANGED (the host sent {key_fingerprint(exc.key)}, known_hosts has "
            f"{key_fingerprint(exc.expected_key)}); refusing to connect — check the host was reinstalled "
            f"(`ssh-keygen -lf /etc/ssh/ssh_host_{exc.key.algorithm_name.lower()}_key.pub` on it prints its "
            "fingerprint), then update known_hosts"
        )
    if isinstance(exc, paramiko.SSHException) and "not found in known_hosts" in str(exc):
        return (
            f"host key for {where} is not in known_hosts; add it (ssh-keyscan) or set "
            "ansible_host_key_checking=false / --accept-unknown-host-keys"
        )
    if isinstance(exc, paramiko.SSHException) and "banner" in str(exc) and closed_early(exc):
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


class KnownHostsCache:
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


KNOWN_HOSTS = KnownHostsCache()


class PrivateKeyCache:
    """Private key files read once per run and shared by every connection that offers them.

    Loading an RSA key is not cheap: the cryptography library checks the key's numbers, about a tenth of
    a CPU-second for 3072 bits, which paramiko would pay again for each of N hosts given the same
    ``ansible_ssh_private_key_file``. A file that cannot be read here without help (encrypted, a
    certificate beside it, not a key) is left to paramiko, which knows the passphrase and the rest.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._keys: dict[str, tuple[tuple[int, int], paramiko.PKey | None]] = {}

    def load(self, path: str) -> paramiko.PKey | None:
        if path.endswith("-cert.pub") or os.path.isfile(path + "-cert.pub"):
            return None
        try:
            stat = os.stat(path)
        except OSError:
            return None
        version = (stat.st_mtime_ns, stat.st_size)
        with self._lock:  # the others wait for the first load instead of each repeating it
            cached = self._keys.get(path)
            if cached is not None and cached[0] == version:
                return cached[1]
            key = None
            for kind in (paramiko.RSAKey, paramiko.ECDSAKey, paramiko.Ed25519Key):  # paramiko's order
                try:
                    key = kind.from_private_key_file(path)
                    break
                except (paramiko.SSHException, OSError, ValueError):
                    continue
            self._keys[path] = (version, key)
            return key


PRIVATE_KEYS = PrivateKeyCache()


class AcceptUnknown(paramiko.MissingHostKeyPolicy):
    """Admit a host that known_hosts does not list, for this connection only and without a warning on
    stderr (cron mails stderr); a listed host whose key differs never reaches a policy: paramiko refuses
    it as a changed key."""

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        client.get_host_keys().add(hostname, key.get_name(), key)


def tcp_keepalive(sock: object) -> None:
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


def host_key_name(address: str, port: int) -> str:
    return address if port == 22 else f"[{address}]:{port}"


def load_host_keys(client: paramiko.SSHClient, files: Sequence[str], address: str, port: int) -> None:
    name = host_key_name(address, port)
    for path in files:
        for key in KNOWN_HOSTS.keys_for(path, name):
            client.get_host_keys().add(name, key.get_name(), key)
