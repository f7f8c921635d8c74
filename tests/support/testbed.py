"""Real SSH test hosts on loopback: each one a Debian ``/usr/sbin/sshd`` in private namespaces.

Integration and end-to-end tests need hosts that differ the way cluster nodes differ (a port
Down, no ``/dev/infiniband``, a narrow port range, an ``NCCL_P2P_DISABLE=1`` login environment, a
tool that hangs) while talking real SSH. A host here is one sshd on ``127.0.0.1:<port>`` started
under ``unshare --mount --pid --fork``; inside its namespaces (see ``tests/support/testbed_ns.sh``):

* a file is bound over ``/proc/sys/net/ipv4/ip_local_port_range``;
* ``/dev`` is a small private tmpfs, with ``/dev/infiniband`` holding the host's devices or absent;
* a tmpfs over ``/usr/local/sbin`` (first on sshd's PATH for root) holds the host's fake hardware
  tools, so they shadow the machine's real ones;
* extra files are bound at absolute paths; missing mount points are made inside the namespace
  (an overlay), so the machine and the other hosts never see them;
* a directory of the host's own is bound over ``/sys/class/infiniband`` (RDMA port state and
  counters), so a test can change a counter on the machine side while a run reads it;
* sshd starts under the host's ``ulimit -l`` (memlock), which every session inherits;
* the login environment comes from ``SetEnv`` in the host's own sshd_config, PATH included
  (``TestBed.login_path`` unless the spec sets one), and root's ~/.bashrc and ~/.profile are
  Debian's defaults from /etc/skel rather than the machine's own.

The pid namespace is what makes cleanup certain: when its first process exits, the kernel kills
everything left in it, sessions and hanging tools included. That process exits when the bed closes
a pipe, which also happens when the test process dies, so no sshd outlives its test.

Jump hosts (``HostSpec(jump=True)``) and the hosts behind them (``behind_jump=True``) live in one private
network namespace of the bed, with its own loopback. A host behind a jump host listens on 127.0.0.1
*of that namespace* only: from the machine (the test process, diagnose) its port refuses connections,
and only a jump host's sshd, whose direct-tcpip connections are made inside the namespace, reaches it.
A jump host is reachable from the machine on ``127.0.0.1:<its port>`` through a port map the bed
keeps (a listening socket on the machine whose connections the bed joins to the jump host's sshd
inside the namespace, as a container runtime publishes a port). Nothing of the machine's own
network is changed.

Hosts are root@127.0.0.1 with a throwaway client key; ``known_hosts`` holds every host's key as
``[127.0.0.1]:port`` lines, and ``write_inventory`` writes an Ansible inventory that points at all
of it. The bed needs root, ``unshare`` (util-linux) and openssh-server.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from tests.support.netns import NetworkError, PortMap, PrivateNetwork, host_address, listen
from tests.support.nshost import (
    check_target,
    hold_pid_namespace,
    infiniband_nodes,
    memlock_word,
    overlays,
    pids_in,
    shell_join,
    sysfs_relative,
    write_sysfs_tree,
)

#: A folder of the programs the bed runs (sshd, ssh, ssh-keygen, ip) where the machine has none: a tool
#: bundle (tests/support/toolbundle.py) brought to a GPU machine that ships without them. The bed looks
#: there first for every program it calls (:func:`bed_program`) and puts it first on the PATH of everything
#: it starts, never on the hosts' login PATH: the caller's own PATH need not hold any of them.
BUNDLE_BIN = os.environ.get("DIAGNOSE_TESTBED_BIN", "")
SSHD = os.path.join(BUNDLE_BIN, "sshd") if BUNDLE_BIN else "/usr/sbin/sshd"
LOOPBACK = "127.0.0.1"
USER = "root"
#: sshd's compiled-in PATH for root on Debian; the fake tools go over its first directory. (A login
#: shell's rc files may still put more in front, as pyenv does in root's ~/.bashrc on the dev box.)
ROOT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
TOOLS_DIR = ROOT_PATH.split(":")[0]
NS_SCRIPT = Path(__file__).with_name("testbed_ns.sh")
DEFAULT_PORT_RANGE = "32768\t60999\n"
#: A hanging tool sleeps this long; the namespace teardown kills it long before.
HANG_SECONDS = 3600
#: Exit status of a fake tool called with arguments it has no reply for (EX_USAGE).
NO_REPLY_RC = 64
#: Where RDMA port counters live; HostSpec.sysfs_infiniband replaces it inside a host.
SYSFS_INFINIBAND = "/sys/class/infiniband"

_NS_FLAGS = ["--mount", "--pid", "--fork", "--kill-child", "--propagation", "private"]
_SPAWN_ENV = {
    "PATH": ":".join(filter(None, [BUNDLE_BIN, "/usr/sbin:/usr/bin:/sbin:/bin"])),
    "LC_ALL": "C",
}
#: The port sshd listens on inside a host with its own network (the bed maps a machine port to it).
OWN_NETWORK_PORT = 22
_PORT_ATTEMPTS = 5


def bed_program(name: str) -> str:
    """The program ``name`` as the bed runs it: from the bundle where there is one, else from the system's
    folders (the caller's PATH plays no part); the bare name where neither has it, so that the call fails
    naming it."""
    return shutil.which(name, path=_SPAWN_ENV["PATH"]) or name


@dataclass(frozen=True)
class Reply:
    """What a fake tool prints for one argument string: a real captured output, usually."""

    stdout: str = ""
    stderr: str = ""
    rc: int = 0
    #: Print the output, then never exit (a tool stuck on a dead device).
    hang: bool = False

    @classmethod
    def from_file(cls, path: Path | str, *, rc: int = 0, stderr: str = "", hang: bool = False) -> Reply:
        """A reply whose stdout is a captured output kept as a fixture file."""
        return cls(stdout=Path(path).read_text(), stderr=stderr, rc=rc, hang=hang)


#: A fake tool: a full executable text (shebang script); one Reply for any arguments; Replies keyed by
#: the exact argument string (``"topo -m"``; ``"*"`` answers the rest, otherwise unknown arguments exit
#: NO_REPLY_RC); or None for a tool that is absent (exit 127, even where the machine has one).
Tool = str | Reply | Mapping[str, Reply] | None


@dataclass
class HostSpec:
    """One test host: how it differs from the others."""

    __test__ = False

    name: str
    #: program name -> Tool, placed first on root's login PATH.
    tools: Mapping[str, Tool] = field(default_factory=dict)
    #: content of /proc/sys/net/ipv4/ip_local_port_range, e.g. a narrow "60000\t60100\n".
    port_range: str = DEFAULT_PORT_RANGE
    #: device names in /dev/infiniband (uverbs0, umad0, issm0, rdma_cm, ...); None: no such directory.
    infiniband: list[str] | None = None
    #: absolute path -> content, visible only inside this host.
    files: Mapping[str, str] = field(default_factory=dict)
    #: login environment of SSH sessions (sshd SetEnv); PATH defaults to TestBed.login_path.
    env: Mapping[str, str] = field(default_factory=dict)
    #: False: authorized_keys holds another key, so the bed's client key is refused.
    authorized: bool = True
    #: What the port serves: "ssh" (sshd), "refused" (nothing listens: connection refused) or
    #: "silent" (TCP accepted, no SSH banner ever: a hung host).
    serve: Literal["ssh", "refused", "silent"] = "ssh"
    #: False: sshd has no ``Subsystem sftp`` line, as hardened sites configure it.
    sftp: bool = True
    #: RLIMIT_MEMLOCK (``ulimit -l``, KiB, soft and hard) that sshd and so every session inherits; None:
    #: unlimited, as RDMA nodes are configured, where the machine lets the bed raise it (see
    #: ``memlock_ceiling_kib``; elsewhere the machine's own limit stays). Set where sshd starts because
    #: ``ulimit`` is a shell builtin: no fake tool can answer for it. A value above the machine's ceiling
    #: makes the host fail to start.
    memlock_kib: int | None = None
    #: The host's /sys/class/infiniband: path relative to it (``mlx5_0/ports/1/counters/link_downed``)
    #: -> content. The tree lives in the host's directory on the machine and is bound over the path, so
    #: ``TestHost.set_ib_counter`` changes what the host reads while a run goes on. None: the machine's
    #: own (absent on a machine without RDMA devices); an empty mapping: an empty directory.
    sysfs_infiniband: Mapping[str, str] | None = None
    #: A jump host (bastion): its sshd runs in the bed's private network, so it reaches the hosts
    #: ``behind_jump``, and the bed maps its port on the machine's 127.0.0.1 to it.
    jump: bool = False
    #: The host's sshd listens only in the bed's private network: a direct connection from the machine
    #: is refused; a jump host of the bed reaches it at 127.0.0.1:<port>.
    behind_jump: bool = False
    #: Its own network and UTS namespaces: hostname ``name``, an ``eth0`` with an address on the bed's
    #: switch (tests/support/netns.py), sshd on port 22 there, every host of the bed in its /etc/hosts;
    #: the bed maps a port of the machine's 127.0.0.1 to it. Two such hosts are two nodes to NCCL and
    #: torch, talking over a network stack, not loopback. Its processes outlive its sshd, as a node's do.
    own_network: bool = False
    #: Nodes of the machine's /dev shown in the host's /dev (a GPU host's share: nvidia0, nvidiactl,
    #: nvidia-uvm, ...), as a container runtime passes GPUs into a container.
    devices: tuple[str, ...] = ()
    #: A /tmp of its own (tmpfs), as separate machines have.
    private_tmp: bool = False


class TestbedError(RuntimeError):
    """The bed could not start or stop a host; the message carries the host's log."""

    __test__ = False


class TestHost:
    """A started host. ``pid`` is the machine-side pid of the process holding its namespaces."""

    __test__ = False

    def __init__(self, bed: TestBed, spec: HostSpec, port: int, directory: Path) -> None:
        self.bed = bed
        self.spec = spec
        self.name = spec.name
        self.address = LOOPBACK
        #: The host's address on the bed's switch (HostSpec.own_network), where other hosts reach it.
        self.network_address: str | None = None
        self.user = USER
        self.port = port
        self.dir = directory
        #: The public host key line ("ssh-ed25519 AAAA..."); None for hosts that serve no SSH.
        self.host_key: str | None = None
        self.pid: int | None = None
        #: The host's pid namespace ("pid:[4026532...]"), to find processes left behind.
        self.pid_namespace: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._lifeline: int | None = None
        self._socket: socket.socket | None = None
        self._port_map: PortMap | None = None
        self._switch_index = 0

    def __repr__(self) -> str:
        return f"TestHost({self.name!r}, port={self.port}, serve={self.spec.serve!r}, alive={self.alive})"

    @property
    def alive(self) -> bool:
        """True while the host's sshd (or its placeholder socket) is up."""
        if self._socket is not None:
            return True
        return self._proc is not None and self._proc.poll() is None

    @property
    def log(self) -> Path:
        """sshd's own log (``-e``): connections, auth failures, config errors."""
        return self.dir / "sshd.log"

    def kill(self) -> None:
        """Kill the host at once: sshd and every session die, the port then refuses connections."""
        self.bed._kill(self)

    def freeze(self) -> None:
        """SIGSTOP sshd and everything it started (sessions, commands): a hung host whose TCP stack
        still answers. The namespace's own init keeps running, so stopping the bed still works."""
        self._signal_sshd_tree(signal.SIGSTOP)

    def thaw(self) -> None:
        self._signal_sshd_tree(signal.SIGCONT)

    def _signal_sshd_tree(self, signum: int) -> None:
        if self.pid_namespace is None:
            raise TestbedError(f"host {self.name!r} has no known pid namespace")
        parents: dict[int, int] = {}
        names: dict[int, str] = {}
        for pid in pids_in({self.pid_namespace}):
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{pid}/stat").read_text()
                names[pid] = stat[stat.index("(") + 1 : stat.rindex(")")]
                parents[pid] = int(stat[stat.rindex(")") + 2 :].split()[1])

        def under_sshd(pid: int) -> bool:
            while pid in names:
                if names[pid].startswith("sshd"):
                    return True
                pid = parents[pid]
            return False

        for pid in names:
            if under_sshd(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signum)

    @property
    def sysfs_infiniband(self) -> Path:
        """The machine-side directory bound over the host's /sys/class/infiniband."""
        return self.dir / "sysfs_infiniband"

    def set_sysfs_infiniband(self, relative: str, content: str) -> None:
        """Replace one file of the host's /sys/class/infiniband while the host runs.

        The new content is written beside the file and renamed over it, so a reader on the host sees
        the old value or the new one, never a half-written or empty file (the check's ``read`` would
        skip an empty one and miss the change).
        """
        if self.spec.sysfs_infiniband is None:
            raise TestbedError(f"host {self.name!r} shows the machine's /sys/class/infiniband, not its own")
        target = self.sysfs_infiniband / sysfs_relative(relative)
        if not target.is_file():
            raise TestbedError(f"host {self.name!r} has no /sys/class/infiniband/{relative}")
        temporary = target.with_name(f".{target.name}.new")
        temporary.write_text(content)
        temporary.replace(target)

    def set_ib_counter(self, device: str, port: int | str, counter: str, value: int) -> None:
        """Set one port counter as the HCA would count it (a flap: ``link_downed`` one higher)."""
        self.set_sysfs_infiniband(f"{device}/ports/{port}/counters/{counter}", f"{value}\n")

    def ib_counter(self, device: str, port: int | str, counter: str) -> int:
        """The value the host reads now for one port counter."""
        relative = sysfs_relative(f"{device}/ports/{port}/counters/{counter}")
        return int((self.sysfs_infiniband / relative).read_text())

    def restart(self) -> None:
        """Start the host again on the same port with the same host key."""
        self._require_sshd()
        self.bed._kill(self)
        self.bed._start(self)

    def change_host_key(self, *, update_known_hosts: bool = False) -> None:
        """Restart on the same port with a NEW host key; known_hosts keeps the old one unless told."""
        self._require_sshd()
        self.bed._kill(self)
        self.bed._make_host_key(self)
        if update_known_hosts:
            self.bed._trust(self)
        self.bed._start(self)

    def _require_sshd(self) -> None:
        if self.spec.serve != "ssh":
            raise TestbedError(f"host {self.name!r} serves {self.spec.serve!r}, not sshd")


class TestBed:
    """A set of test hosts under one work directory; a context manager that stops all it started."""

    __test__ = False

    def __init__(self, workdir: Path, *, start_timeout: float = 60.0) -> None:
        problem = prerequisite_problem()
        if problem:
            raise TestbedError(problem)
        self.workdir = Path(workdir).resolve()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.start_timeout = start_timeout
        self.hosts: dict[str, TestHost] = {}
        self._lock = threading.Lock()
        self._trusted: dict[str, str] = {}
        self._namespaces: set[str] = set()
        self._namespace_fds: list[int] = []
        # Held for the bed's whole life (see hold_pid_namespace), released when it is collected.
        weakref.finalize(self, _close_all, self._namespace_fds)
        self._ports: set[int] = set()
        self._stopped = False
        self._network: PrivateNetwork | None = None
        self._switch: PrivateNetwork | None = None
        #: One /etc/hosts for every host with its own network, rewritten in place (a bind follows the
        #: file, not the name) as hosts join, so each host resolves the others' names.
        self.etc_hosts = self.workdir / "etc_hosts"
        self.etc_hosts.write_text("127.0.0.1\tlocalhost\n")
        self._switched: dict[str, str] = {}
        self._passwd = _privsep_passwd(self.workdir)
        self.client_key = self.workdir / "client_key"
        self.other_key = self.workdir / "other_key"
        self.known_hosts = self.workdir / "known_hosts"
        _keygen(self.client_key, "diagnose-testbed-client")
        _keygen(self.other_key, "diagnose-testbed-other")
        self.known_hosts.write_text("")
        self._shadow = _unlocked_shadow(self.workdir)
        self._login_files = _login_files(self.workdir)
        #: PATH of SSH sessions unless a HostSpec's env sets one: the fake tools first, then the
        #: directory of the Python running the tests (so hosts have its torch, like cluster nodes
        #: have theirs), then sshd's default.
        self.login_path = ":".join(
            dict.fromkeys([TOOLS_DIR, os.path.dirname(sys.executable), *ROOT_PATH.split(":")])
        )
        self._penalties_off = "PerSourcePenalties no\n" if _openssh_version() >= (9, 8) else ""

    def __enter__(self) -> TestBed:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def add(self, spec: HostSpec) -> TestHost:
        """Start one host and return once it answers with an SSH banner."""
        with self._lock:
            if self._stopped:
                raise TestbedError("the test bed is stopped")
            if spec.name in self.hosts:
                raise ValueError(f"host {spec.name!r} already exists")
            if (spec.jump or spec.behind_jump) and (spec.serve != "ssh" or spec.jump == spec.behind_jump):
                raise ValueError(
                    f"host {spec.name!r}: a jump host or a host behind one serves sshd, not both"
                )
            if spec.own_network and (spec.jump or spec.behind_jump or spec.serve != "ssh"):
                raise ValueError(f"host {spec.name!r}: a host with its own network serves sshd, no jump host")
            directory = self.workdir / "hosts" / spec.name
            host = TestHost(self, spec, 0, directory)
            self.hosts[spec.name] = host
        try:
            directory.mkdir(parents=True)
            if spec.serve == "ssh":
                self._prepare(host)
                self._start(host)
            else:
                self._placeholder(host)
        except BaseException:
            self._kill(host)
            with self._lock:
                del self.hosts[spec.name]
                self._trusted.pop(spec.name, None)
                self._write_known_hosts()
            raise
        return host

    def add_many(self, specs: Iterable[HostSpec], *, workers: int = 16) -> list[TestHost]:
        """Start hosts in parallel; raises the first failure once all attempts are done."""
        specs = list(specs)
        if not specs:
            return []
        with ThreadPoolExecutor(max_workers=min(workers, len(specs))) as pool:
            futures = [pool.submit(self.add, spec) for spec in specs]
        return [future.result() for future in futures]

    def write_inventory(
        self,
        path: Path,
        hosts: Iterable[TestHost] | None = None,
        extra_vars: Mapping[str, object] | None = None,
        fmt: Literal["yaml", "ini"] = "yaml",
        *,
        host_vars: Mapping[str, Mapping[str, object]] | None = None,
        groups: Mapping[str, Iterable[str]] | None = None,
    ) -> Path:
        """Write an Ansible inventory of the hosts (default: all), YAML or INI, and return its path.

        ``all`` vars carry ansible_user, ansible_ssh_private_key_file, diagnose_known_hosts_file and
        ``extra_vars``; each host carries ansible_host, ansible_port and its ``host_vars``; ``groups``
        maps group names to host names.
        """
        chosen = list(self.hosts.values()) if hosts is None else list(hosts)
        common: dict[str, object] = {
            "ansible_user": USER,
            "ansible_ssh_private_key_file": str(self.client_key),
            "diagnose_known_hosts_file": str(self.known_hosts),
            **(extra_vars or {}),
        }
        per_host: dict[str, dict[str, object]] = {
            h.name: {"ansible_host": h.address, "ansible_port": h.port, **(host_vars or {}).get(h.name, {})}
            for h in chosen
        }
        group_hosts = {group: list(names) for group, names in (groups or {}).items()}
        path = Path(path)
        if fmt == "yaml":
            path.write_text(_inventory_yaml(common, per_host, group_hosts))
        elif fmt == "ini":
            path.write_text(_inventory_ini(common, per_host, group_hosts))
        else:
            raise ValueError(f"unknown inventory format {fmt!r}")
        return path

    def ssh_argv(
        self, host: TestHost, command: str, *, timeout: float = 10, jump: TestHost | None = None
    ) -> list[str]:
        """argv of the real OpenSSH client running ``command`` on ``host`` with the bed's key and
        known_hosts, ignoring the user's ~/.ssh/config; through ``jump`` (a ProxyCommand carrying the
        same options, since ``-J`` would not pass the key to the jump host's login) when given."""
        options = {
            "BatchMode": "yes",
            "IdentitiesOnly": "yes",
            "IdentityFile": str(self.client_key),
            "UserKnownHostsFile": str(self.known_hosts),
            "GlobalKnownHostsFile": "/dev/null",
            "StrictHostKeyChecking": "yes",
            "ConnectTimeout": str(int(timeout)),
            "LogLevel": "ERROR",
        }
        argv = [bed_program("ssh"), "-F", "/dev/null", "-p", str(host.port)]
        for key, value in options.items():
            argv += ["-o", f"{key}={value}"]
        if jump is not None:
            hop = self.ssh_argv(jump, "", timeout=timeout)[:-2]
            argv += [
                "-o",
                "ProxyCommand=" + shlex.join([*hop, "-W", "[%h]:%p", f"{jump.user}@{jump.address}"]),
            ]
        return [*argv, f"{host.user}@{host.address}", command]

    def ssh(
        self, host: TestHost, command: str, *, timeout: float = 30, jump: TestHost | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run ``command`` on ``host`` through the real ssh client; text output, never raises on rc."""
        return subprocess.run(
            self.ssh_argv(host, command, jump=jump),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def leftover_pids(self) -> list[int]:
        """Machine pids of live processes in any namespace of a host this bed started (killed ones too)."""
        with self._lock:
            namespaces = set(self._namespaces)
        return pids_in(namespaces)

    def stop(self) -> None:
        """Stop every host; raise if any process of the bed's namespaces is still alive afterwards."""
        with self._lock:
            self._stopped = True
            hosts = list(self.hosts.values())
        for host in hosts:
            self._kill(host)
        deadline = time.monotonic() + 10
        while (left := self.leftover_pids()) and time.monotonic() < deadline:
            time.sleep(0.05)
        for network in (self._network, self._switch):
            if network is not None:
                network.stop()
        if left:
            raise TestbedError(f"processes left behind after stop: {left}")

    # -- host lifecycle ------------------------------------------------------------------------------

    def _prepare(self, host: TestHost) -> None:
        """Write everything the host's namespace setup reads: keys, config, tools, files."""
        spec = host.spec
        directory = host.dir
        self._make_host_key(host)
        self._trust(host)
        key = self.client_key if spec.authorized else self.other_key
        shutil.copyfile(key.with_suffix(".pub"), directory / "authorized_keys")
        (directory / "port_range").write_text(spec.port_range)
        tools = directory / "tools"
        tools.mkdir()
        data = directory / "tooldata"
        data.mkdir()
        for name, tool in spec.tools.items():
            write_tool(tools, data, spec.name, name, tool)
        files = directory / "files"
        files.mkdir()
        binds: list[tuple[Path, str]] = []
        for index, (target, content) in enumerate(sorted(spec.files.items())):
            check_target(target, self.workdir)
            source = files / str(index)
            source.write_text(content)
            binds.append((source, target))
        if self._shadow is not None and "/etc/shadow" not in spec.files:
            binds.append((self._shadow, "/etc/shadow"))
        binds += [
            (source, target) for target, source in self._login_files.items() if target not in spec.files
        ]
        if self._passwd is not None and "/etc/passwd" not in spec.files:
            binds.append((self._passwd, "/etc/passwd"))
        if spec.own_network:
            self._join_switch(host)
            if "/etc/hosts" not in spec.files:
                binds.append((self.etc_hosts, "/etc/hosts"))
        if spec.sysfs_infiniband is not None:
            write_sysfs_tree(host.sysfs_infiniband, spec.sysfs_infiniband)
        (directory / "ns").mkdir()
        wanted = {target: "f" for _, target in binds}
        wanted["/run/sshd"] = "d"
        wanted[TOOLS_DIR] = "d"
        if spec.sysfs_infiniband is not None:
            wanted[SYSFS_INFINIBAND] = "d"
        lines = [
            f". {shlex.quote(str(NS_SCRIPT))}",
            f"ns_scratch {shlex.quote(str(directory / 'ns'))}",
            "ns_proc",
        ]
        if spec.own_network:
            lines.append(shell_join("ns_hostname", spec.name))
        if spec.private_tmp:
            # What the host must still see under /tmp: its own files, and the Python on its login PATH (a
            # checkout's virtual environment under /tmp on a CI machine).
            needed = {str(self.workdir), sys.prefix}
            kept = sorted(p for p in needed if Path(p).resolve().is_relative_to("/tmp"))
            lines.append(shell_join("ns_private_tmp", *kept))
        if spec.devices:
            for device in spec.devices:
                if not re.fullmatch(r"[\w.-]+", device):
                    raise ValueError(f"bad /dev name {device!r}")
            lines.append(shell_join("ns_devices", *spec.devices))
        lines.append(shell_join("ns_dev", *infiniband_nodes(spec.infiniband)))
        for parent, entries in overlays(wanted, self.workdir):
            lines.append(shell_join("ns_overlay", parent, *entries))
        lines.append(
            shell_join("ns_bind", str(directory / "port_range"), "/proc/sys/net/ipv4/ip_local_port_range")
        )
        lines.append(shell_join("ns_tools", str(tools), TOOLS_DIR))
        lines += [shell_join("ns_bind", str(source), target) for source, target in binds]
        if spec.sysfs_infiniband is not None:
            lines.append(shell_join("ns_bind", str(host.sysfs_infiniband), SYSFS_INFINIBAND))
        lines.append(shell_join("ns_memlock", memlock_word(spec.memlock_kib)))
        outlive = ["outlive"] if spec.own_network else []
        lines.append(shell_join("ns_sshd", SSHD, str(directory / "sshd_config"), *outlive))
        (directory / "init.sh").write_text("\n".join(lines) + "\n")

    def _make_host_key(self, host: TestHost) -> None:
        key = host.dir / "ssh_host_ed25519_key"
        for old in (key, key.with_suffix(".pub")):
            old.unlink(missing_ok=True)
        _keygen(key, f"diagnose-testbed-host-{host.name}")
        host.host_key = " ".join(key.with_suffix(".pub").read_text().split()[:2])

    def _trust(self, host: TestHost) -> None:
        """Record the host's current key as the one known_hosts vouches for, and rewrite the file."""
        with self._lock:
            if host.host_key is not None:
                self._trusted[host.name] = host.host_key
            self._write_known_hosts()

    def _write_known_hosts(self) -> None:
        lines = [
            f"[{self.hosts[name].address}]:{self.hosts[name].port} {key}\n"
            for name, key in sorted(self._trusted.items())
            if self.hosts[name].port
        ]
        temporary = self.known_hosts.with_suffix(".tmp")
        temporary.write_text("".join(lines))
        temporary.replace(self.known_hosts)

    def _sshd_config(self, host: TestHost) -> str:
        directory = host.dir
        # One line: sshd keeps only the first SetEnv it reads.
        env = {"PATH": self.login_path, **host.spec.env}
        words = [_setenv_word(key, value) for key, value in env.items()]
        setenv = f"SetEnv {' '.join(words)}\n"
        port, listen_on = (OWN_NETWORK_PORT, "0.0.0.0") if host.spec.own_network else (host.port, LOOPBACK)
        return (
            f"Port {port}\n"
            f"ListenAddress {listen_on}\n"
            f"HostKey {directory / 'ssh_host_ed25519_key'}\n"
            f"PidFile {directory / 'sshd.pid'}\n"
            f"AuthorizedKeysFile {directory / 'authorized_keys'}\n"
            "PermitRootLogin prohibit-password\n"
            "AuthenticationMethods publickey\n"
            "PubkeyAuthentication yes\n"
            "PasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\n"
            "UsePAM no\n"
            "StrictModes no\n"
            "UseDNS no\n"
            "PrintMotd no\n"
            "PrintLastLog no\n"
            "X11Forwarding no\n"
            "AcceptEnv LANG LC_*\n"
            "MaxSessions 256\n"
            "MaxStartups 512\n"
            "LoginGraceTime 30\n"
            f"{self._penalties_off}"
            f"{'Subsystem sftp internal-sftp' if host.spec.sftp else ''}\n"
            f"{setenv}"
        )

    def _start(self, host: TestHost) -> None:
        """Start the host's namespaces and sshd, picking a free port unless it has one; wait for the banner."""
        fixed_port = host.port != 0
        private = host.spec.jump or host.spec.behind_jump
        enter = self._private_network().enter_argv() if private else []
        flags = [*_NS_FLAGS, "--net", "--uts"] if host.spec.own_network else _NS_FLAGS
        for _attempt in range(_PORT_ATTEMPTS):
            if host.spec.jump or host.spec.own_network:
                # The machine-side socket first: the port is then ours, and the sshd inside the private
                # network listens on the same number there (a switched host: on port 22 of its address).
                listener = listen(host.port if fixed_port else 0)
                host.port = listener.getsockname()[1]
                with self._lock:
                    self._ports.add(host.port)  # never given to a host behind it in the private network
                if host.spec.own_network:
                    assert host.network_address is not None
                    target = (host.network_address, OWN_NETWORK_PORT)
                    host._port_map = PortMap(listener, self._switch_network().connect, target)
                else:
                    host._port_map = PortMap(listener, self._private_network().connect, (LOOPBACK, host.port))
            elif not fixed_port:
                host.port = self._free_port()
            (host.dir / "sshd_config").write_text(self._sshd_config(host))
            read_end, write_end = os.pipe()
            with open(host.log, "ab") as log:
                try:
                    proc = subprocess.Popen(
                        [*enter, "unshare", *flags, "/bin/sh", str(host.dir / "init.sh")],
                        stdin=read_end,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        cwd=host.dir,
                        env=_SPAWN_ENV,
                        start_new_session=True,
                    )
                finally:
                    os.close(read_end)
            host._proc, host._lifeline, host.pid = proc, write_end, proc.pid
            if host.spec.own_network:
                try:
                    self._switch_network().attach(proc.pid, host._switch_index)
                except NetworkError as exc:
                    self._kill(host)
                    raise TestbedError(f"test host {host.name!r}: {exc}; log {host.log}") from exc
            if self._wait_ready(host):
                if host._port_map is not None:
                    host._port_map.start()
                held = hold_pid_namespace(proc.pid)
                if not held:
                    # Without it leftover_pids() would find nothing in this host, and every "nothing left
                    # running" check would pass without looking.
                    self._kill(host)
                    raise TestbedError(f"host {host.name!r}: its pid namespace could not be captured")
                with self._lock:
                    host.pid_namespace = held[0]
                    self._namespaces.add(held[0])
                    self._namespace_fds.append(held[1])
                    self._write_known_hosts()
                return
            busy = "Address already in use" in host.log.read_text(errors="replace")
            self._kill(host)
            if not busy or fixed_port:
                break
        tail = "".join(host.log.read_text(errors="replace").splitlines(keepends=True)[-30:])
        raise TestbedError(
            f"test host {host.name!r} did not start on port {host.port}; log {host.log}:\n{tail}"
        )

    def _wait_ready(self, host: TestHost) -> bool:
        """Wait until the port answers with an SSH banner; False if sshd exited or time ran out."""
        deadline = time.monotonic() + self.start_timeout
        assert host._proc is not None
        private = host.spec.jump or host.spec.behind_jump
        connect = self._private_network().connect if private else socket.create_connection
        address = (LOOPBACK, host.port)
        if host.spec.own_network:
            assert host.network_address is not None
            connect, address = self._switch_network().connect, (host.network_address, OWN_NETWORK_PORT)
        while time.monotonic() < deadline:
            if host._proc.poll() is not None:
                return False
            with (
                contextlib.suppress(OSError),
                connect(address, timeout=2) as s,
            ):
                s.settimeout(max(0.1, deadline - time.monotonic()))
                if s.recv(64).startswith(b"SSH-"):
                    return True
            time.sleep(0.01)
        return False

    def _placeholder(self, host: TestHost) -> None:
        """A port that refuses connections (bound, not listening) or accepts them and stays silent."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind((LOOPBACK, 0))
        if host.spec.serve == "silent":
            sock.listen(64)
        elif host.spec.serve != "refused":
            sock.close()
            raise ValueError(f"unknown serve mode {host.spec.serve!r}")
        host._socket = sock
        host.port = sock.getsockname()[1]

    def _kill(self, host: TestHost) -> None:
        """Close the host's lifeline (its init then exits and the kernel kills the rest); SIGKILL
        the holder of its namespaces if that takes too long."""
        if host._socket is not None:
            host._socket.close()
            host._socket = None
        if host._port_map is not None:
            host._port_map.close()
            host._port_map = None
        if host._lifeline is not None:
            os.close(host._lifeline)
            host._lifeline = None
        proc = host._proc
        if proc is None:
            return
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        host._proc = None

    def _private_network(self) -> PrivateNetwork:
        """The bed's private network of jump hosts and the hosts behind them, started on first use."""
        with self._lock:
            if self._network is None:
                self._network = PrivateNetwork(self.workdir / "private-network.log", _SPAWN_ENV)
            return self._network

    def _switch_network(self) -> PrivateNetwork:
        """The switch of the hosts with a network of their own, started on first use."""
        with self._lock:
            if self._switch is None:
                try:
                    self._switch = PrivateNetwork(self.workdir / "switch.log", _SPAWN_ENV, switch=True)
                except NetworkError as exc:
                    raise TestbedError(str(exc)) from exc
            return self._switch

    def _join_switch(self, host: TestHost) -> None:
        """Give a host with its own network its number and address, and list it in the shared /etc/hosts."""
        self._switch_network()
        with self._lock:
            host._switch_index = len(self._switched)
            host.network_address = host_address(host._switch_index)
            self._switched[host.name] = host.network_address
            lines = ["127.0.0.1\tlocalhost\n"]
            lines += [f"{address}\t{name}\n" for name, address in self._switched.items()]
            with open(self.etc_hosts, "r+") as hosts:
                hosts.write("".join(lines))
                hosts.truncate()

    def _free_port(self) -> int:
        """A port nothing listens on now and this bed has not used (the kernel picks; sshd retries
        on the rare race)."""
        while True:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind((LOOPBACK, 0))
                port = sock.getsockname()[1]
            with self._lock:
                if port not in self._ports:
                    self._ports.add(port)
                    return port


_prerequisite_cache: list[str | None] = []


def prerequisite_problem() -> str | None:
    """Why the bed cannot run on this machine (not root, no sshd, unshare refused), or None."""
    if not _prerequisite_cache:
        _prerequisite_cache.append(_find_prerequisite_problem())
    return _prerequisite_cache[0]


def _find_prerequisite_problem() -> str | None:
    if os.geteuid() != 0:
        return "the sshd test bed needs root (mount namespaces, sshd as root)"
    for program in (SSHD, "/bin/sh"):
        if not os.access(program, os.X_OK):
            return f"{program} is missing (install openssh-server)"
    for program in ("unshare", "ssh-keygen", "ssh", "mount"):
        if shutil.which(program, path=_SPAWN_ENV["PATH"]) is None:
            return f"{program} is not on {_SPAWN_ENV['PATH']} (DIAGNOSE_TESTBED_BIN: a tool bundle)"
    probe = subprocess.run(
        [bed_program("unshare"), *_NS_FLAGS, "/bin/sh", "-c", "mount -t tmpfs testbed-probe /mnt"],
        capture_output=True,
        text=True,
        env=_SPAWN_ENV,
        check=False,
    )
    if probe.returncode != 0:
        return f"unshare --mount --pid is not permitted here: {probe.stderr.strip()}"
    return None


def _keygen(path: Path, comment: str) -> None:
    subprocess.run(
        [bed_program("ssh-keygen"), "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
        stdin=subprocess.DEVNULL,
        capture_output=True,
    )


def _openssh_version() -> tuple[int, int]:
    banner = subprocess.run([SSHD, "-V"], capture_output=True, text=True, check=False).stderr
    found = re.search(r"OpenSSH_(\d+)\.(\d+)", banner)
    return (int(found.group(1)), int(found.group(2))) if found else (0, 0)


def _unlocked_shadow(workdir: Path) -> Path | None:
    """With UsePAM off, sshd refuses a locked account ("!" password) even by key. Where root is
    locked, give the hosts a copy of /etc/shadow with root unlocked (no password: "*")."""
    try:
        lines = Path("/etc/shadow").read_text().splitlines(keepends=True)
    except OSError:
        return None
    for index, line in enumerate(lines):
        fields = line.split(":")
        if fields[0] == USER and len(fields) > 1 and fields[1].startswith("!"):
            fields[1] = "*"
            lines[index] = ":".join(fields)
            copy = workdir / "shadow"
            copy.write_text("".join(lines))
            copy.chmod(0o600)
            return copy
    return None


def _privsep_passwd(workdir: Path) -> Path | None:
    """sshd needs its privilege separation user ``sshd``; a machine that ships without openssh-server
    (the lent GPU machines) has none. There the hosts get a copy of /etc/passwd with one added."""
    try:
        pwd.getpwnam("sshd")
        return None
    except KeyError:
        pass
    taken = {entry.pw_uid for entry in pwd.getpwall()}
    uid = next(uid for uid in range(990, 100, -1) if uid not in taken)
    copy = workdir / "passwd"
    text = Path("/etc/passwd").read_text()
    copy.write_text(
        text + ("" if text.endswith("\n") else "\n") + f"sshd:x:{uid}:65534::/run/sshd:/usr/sbin/nologin\n"
    )
    return copy


def _login_files(workdir: Path) -> dict[str, Path]:
    """root's shell rc files for the hosts: Debian's defaults for a new account (/etc/skel), as on a
    fresh node. The machine's own ones stay out: on the dev box root's ~/.bashrc runs `pyenv init`,
    which costs every SSH command ~0.3 s and makes concurrent sessions wait up to 60 s on
    pyenv's rehash lock."""
    home = pwd.getpwnam(USER).pw_dir
    files = {}
    for name in (".bashrc", ".profile"):
        copy = workdir / f"login{name}"
        skeleton = Path("/etc/skel", name)
        copy.write_text(skeleton.read_text() if skeleton.is_file() else "")
        files[os.path.join(home, name)] = copy
    return files


def write_tool(tools: Path, data: Path, host: str, name: str, tool: Tool) -> None:
    """Write one fake tool into the host's tools dir; its outputs go to files the script cats."""
    if "/" in name or not name:
        raise ValueError(f"bad tool name {name!r}")
    if isinstance(tool, str):
        text = tool
    elif tool is None:
        if shutil.which(name, path=ROOT_PATH.partition(":")[2]) is None:
            return
        text = (
            f"#!/bin/sh\nprintf 'bash: line 1: %s: command not found\\n' {shlex.quote(name)} >&2\nexit 127\n"
        )
    else:
        replies = {"*": tool} if isinstance(tool, Reply) else dict(tool)
        cases = []
        for index, (args, reply) in enumerate(replies.items()):
            out, err = data / f"{name}.{index}.out", data / f"{name}.{index}.err"
            body = []
            if reply.stdout:
                out.write_text(reply.stdout)
                body.append(f"cat {shlex.quote(str(out))}")
            if reply.stderr:
                err.write_text(reply.stderr)
                body.append(f"cat {shlex.quote(str(err))} >&2")
            body.append(f"exec sleep {HANG_SECONDS}" if reply.hang else f"exit {reply.rc}")
            pattern = "*" if args == "*" else shlex.quote(args)
            cases.append((args == "*", f"{pattern})\n    " + "\n    ".join(body) + "\n    ;;"))
        if "*" not in replies:
            cases.append(
                (
                    True,
                    f"*)\n    printf 'testbed: fake %s on %s has no reply for arguments: %s\\n' "
                    f'{shlex.quote(name)} {shlex.quote(host)} "$*" >&2\n    exit {NO_REPLY_RC}\n    ;;',
                )
            )
        # case takes the first match: the catch-all goes last.
        branches = [text for _, text in sorted(cases, key=lambda case: case[0])]
        text = (
            f'#!/bin/sh\n# fake {name} of test host {host}\ncase "$*" in\n' + "\n".join(branches) + "\nesac\n"
        )
    path = tools / name
    path.write_text(text)
    path.chmod(0o755)


def _setenv_word(key: str, value: str) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
        raise ValueError(f"bad environment variable name {key!r}")
    if any(c in value for c in '"\n\\'):
        raise ValueError(f"{key}: SetEnv values cannot hold quotes, backslashes or newlines")
    return f'"{key}={value}"'


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)


def _inventory_yaml(
    common: Mapping[str, object],
    per_host: Mapping[str, Mapping[str, object]],
    groups: Mapping[str, list[str]],
) -> str:
    import yaml

    tree: dict[str, object] = {"vars": dict(common), "hosts": {name: dict(v) for name, v in per_host.items()}}
    if groups:
        tree["children"] = {
            group: {"hosts": {name: None for name in names}} for group, names in groups.items()
        }
    return yaml.safe_dump({"all": tree}, sort_keys=False)


def _inventory_ini(
    common: Mapping[str, object],
    per_host: Mapping[str, Mapping[str, object]],
    groups: Mapping[str, list[str]],
) -> str:
    def pair(key: str, value: object) -> str:
        text = str(value).lower() if isinstance(value, bool) else str(value)
        return f"{key}={shlex.quote(text)}"

    lines = [" ".join([name, *(pair(k, v) for k, v in host.items())]) for name, host in per_host.items()]
    lines += ["", "[all:vars]", *(pair(k, v) for k, v in common.items())]
    for group, names in groups.items():
        lines += ["", f"[{group}]", *names]
    return "\n".join(lines) + "\n"
