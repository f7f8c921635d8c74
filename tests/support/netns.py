"""Network namespaces of the sshd test bed (tests/support/testbed.py): the bed's private network, the switch
that joins hosts with a network of their own, and the port maps that publish a host's sshd on the machine.

A host with its own network (``HostSpec.own_network``) is what makes two hosts of one machine two nodes to
NCCL and torch: its own hostname (UTS namespace) and its own interface ``eth0`` with an address on a bridge,
so collectives between hosts cross a real network stack (veth) rather than loopback. The bridge lives in the
bed's private network namespace, not on the machine: nothing of the machine's own network changes, and
every interface vanishes with the namespaces that hold it. Addresses come from 198.18.0.0/15, the range
RFC 2544 sets aside for benchmarking, so they clash with no real network of a cluster.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import selectors
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

LOOPBACK = "127.0.0.1"
#: The switch: a bridge in the bed's private network, its own address first in the subnet.
BRIDGE = "dgbr0"
SUBNET_PREFIX = "198.18.0."
SUBNET_BITS = 24
#: Hosts are numbered from 0; host i gets SUBNET_PREFIX + (i + FIRST_HOST_OCTET).
FIRST_HOST_OCTET = 2
MAX_HOSTS = 250
#: The interface name inside every host with its own network.
HOST_INTERFACE = "eth0"

_CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


class NetworkError(RuntimeError):
    """A namespace or interface could not be made; the message carries the command's output."""


def host_address(index: int) -> str:
    """The switch address of the bed's host number ``index`` (0-based)."""
    if not 0 <= index < MAX_HOSTS:
        raise ValueError(f"a switch holds at most {MAX_HOSTS} hosts, not host #{index}")
    return f"{SUBNET_PREFIX}{index + FIRST_HOST_OCTET}"


class PrivateNetwork:
    """A network namespace held open by one small process: only its own loopback, plus the switch's
    bridge when ``switch`` is set.

    The process is ``unshare --net`` running ``cat`` on a pipe the bed holds: when the bed closes the
    pipe (or the test process dies) it exits, and the namespace goes with the last host in it.
    """

    def __init__(self, log: Path, env: Mapping[str, str], *, switch: bool = False) -> None:
        self._env = dict(env)
        # The loopback comes up last: the wait below reads it as the sign that the whole setup is done (a
        # host attached before the bridge existed failed with "dgbr0 ... Device does not exist").
        setup = "ip link set lo up"
        if switch:
            setup = (
                f"ip link add {BRIDGE} type bridge"
                f" && ip addr add {SUBNET_PREFIX}1/{SUBNET_BITS} dev {BRIDGE}"
                f" && ip link set {BRIDGE} up && {setup}"
            )
        read_end, self._lifeline = os.pipe()
        with open(log, "ab") as out:
            try:
                self._proc = subprocess.Popen(
                    ["unshare", "--net", "/bin/sh", "-c", f"{setup} && exec cat >/dev/null"],
                    stdin=read_end,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=self._env,
                    start_new_session=True,
                )
            finally:
                os.close(read_end)
        self.path = f"/proc/{self._proc.pid}/ns/net"
        self._fd: int | None = None
        deadline = time.monotonic() + 10
        mine = os.readlink("/proc/self/ns/net")
        while time.monotonic() < deadline and self._proc.poll() is None:
            with contextlib.suppress(OSError):
                if os.readlink(self.path) != mine and self._loopback_up():
                    self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
                    return
            time.sleep(0.02)
        self.stop()
        raise NetworkError(
            f"the private network did not start; log {log}:\n{log.read_text(errors='replace')}"
        )

    def _loopback_up(self) -> bool:
        try:
            self.connect((LOOPBACK, 1), timeout=1).close()
        except ConnectionRefusedError:
            return True  # lo answers (with a refusal): it is up
        except OSError:
            return False
        return True

    def enter_argv(self) -> list[str]:
        """Prefix of a command line that runs the command inside the network."""
        return ["nsenter", f"--net={self.path}"]

    def attach(self, holder: int, index: int, *, timeout: float = 10) -> str:
        """Join the network namespace of process ``holder`` (a host's ``unshare``) to the switch: a veth
        pair, ``eth0`` inside the host with its address, the other end on the bridge. Returns the address.

        Waits until ``holder`` has left the machine's network namespace: before that, ``netns PID`` would
        put the interface on the machine."""
        mine = os.readlink("/proc/self/ns/net")
        deadline = time.monotonic() + timeout
        while True:
            try:
                theirs = os.readlink(f"/proc/{holder}/ns/net")
            except OSError as exc:
                raise NetworkError(f"host process {holder} is gone before its network was made") from exc
            if theirs != mine:
                break
            if time.monotonic() > deadline:
                raise NetworkError(f"host process {holder} never entered a network namespace of its own")
            time.sleep(0.01)
        address = host_address(index)
        outside = f"dg{index}"
        inside = ["nsenter", f"--net=/proc/{holder}/ns/net", "ip"]
        for argv in (
            [
                *self.enter_argv(),
                "ip",
                "link",
                "add",
                outside,
                "type",
                "veth",
                "peer",
                "name",
                HOST_INTERFACE,
                "netns",
                str(holder),
            ],
            [*self.enter_argv(), "ip", "link", "set", outside, "master", BRIDGE, "up"],
            [*inside, "link", "set", "lo", "up"],
            [*inside, "addr", "add", f"{address}/{SUBNET_BITS}", "dev", HOST_INTERFACE],
            [*inside, "link", "set", HOST_INTERFACE, "up"],
        ):
            done = subprocess.run(argv, capture_output=True, text=True, env=self._env, check=False)
            if done.returncode != 0:
                raise NetworkError(f"{' '.join(argv)}: {(done.stderr or done.stdout).strip()}")
        return address

    def connect(self, address: tuple[str, int], timeout: float | None = None) -> socket.socket:
        """A TCP connection made inside the network (from a short-lived thread that enters it: a
        socket keeps the namespace it was made in, the rest of the process stays where it is)."""
        got: list[socket.socket | BaseException] = []

        def inside() -> None:
            try:
                fd = self._fd if self._fd is not None else os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
                if _libc.setns(fd, _CLONE_NEWNET) != 0:
                    errno = ctypes.get_errno()
                    raise OSError(errno, f"setns into {self.path}: {os.strerror(errno)}")
                got.append(socket.create_connection(address, timeout=timeout))
            except BaseException as exc:
                got.append(exc)

        thread = threading.Thread(target=inside, name="testbed-netns-connect")
        thread.start()
        thread.join()
        if isinstance(got[0], BaseException):
            raise got[0]
        return got[0]

    def stop(self) -> None:
        if self._lifeline is not None:
            os.close(self._lifeline)
            self._lifeline = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(timeout=5)


def listen(port: int) -> socket.socket:
    """A listening socket on the machine's 127.0.0.1 (``port`` 0: the kernel picks)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((LOOPBACK, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


class PortMap:
    """The machine's 127.0.0.1:<port> joined to an sshd inside a private network (a jump host's at
    127.0.0.1:<port>, a switched host's at <its address>:22): one thread accepts, one thread per connection
    copies bytes both ways, as a container runtime publishes a port. Closing it
    refuses new connections and cuts the open ones, as a dead bastion does."""

    def __init__(
        self, listener: socket.socket, connect: Callable[..., socket.socket], target: tuple[str, int]
    ) -> None:
        self._listener = listener
        self._connect = connect
        self._target = target
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        self._listener.settimeout(0.2)
        self._spawn(self._accept_loop)

    def _spawn(self, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, name="testbed-port-map", daemon=True)
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
        thread.start()

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            try:
                upstream = self._connect(self._target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._closed.is_set():
                    client.close()
                    upstream.close()
                    return
                self._open.update((client, upstream))
            self._spawn(self._pump, client, upstream)

    def _pump(self, one: socket.socket, other: socket.socket) -> None:
        peer = {one: other, other: one}
        with selectors.DefaultSelector() as selector:
            for sock in peer:
                selector.register(sock, selectors.EVENT_READ)
            try:
                while not self._closed.is_set():
                    for key, _ in selector.select(timeout=0.2):
                        data = key.fileobj.recv(65536)  # type: ignore[union-attr]
                        if not data:
                            return
                        peer[key.fileobj].sendall(data)  # type: ignore[index]
            except OSError:
                return
            finally:
                with self._lock:
                    for sock in peer:
                        self._open.discard(sock)
                        sock.close()

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        with self._lock:
            for sock in self._open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            threads = list(self._threads)
        for thread in threads:
            thread.join(timeout=5)
