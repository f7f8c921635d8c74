"""A real Slurm cluster on loopback for tests: one slurmctld and a few slurmd "nodes" on this machine.

Tests of the Slurm paths (inventory from Slurm, srun launches, ``--slurm-submit``, ``node-check
--drain``) talk to Debian's own slurmctld, slurmd and munged (slurm-wlm 22.05, munge 0.5) through the
real client commands (scontrol, sinfo, srun, sbatch, scancel). How the bed is made, and why:

* **Namespaces.** Each daemon runs under ``unshare --uts --mount --pid --fork``; the namespace's first
  process is a small shell (``tests/support/slurmbed_ns.sh`` with the sshd bed's ``tests/support/testbed_ns.sh``) that
  sets the hostname, makes the mounts and runs the daemon in the foreground. The hostname is the node
  name, so jobs, ``hostname -s`` and HealthCheckProgram see ``n1``/``n2``; every slurmstepd, job step
  and leftover task dies with the namespace, so nothing outlives the bed.
* **One machine, several slurmd.** Debian builds slurmd with multiple-slurmd support: ``slurmd -N n2``
  runs node n2. Every node has ``NodeAddr=127.0.0.1`` and a ``Port=`` of its own (separate addresses
  break srun's I/O callbacks), spool and pid files are per node (``%n``), and
  ``CommunicationParameters=NoCtldInAddrAny,NoInAddrAny`` keeps every listener on loopback. Each
  namespace has a private /etc/hosts mapping the controller and every node name to 127.0.0.1.
* **Authentication.** A private munged (in the controller's namespace) with its own key (mode 0600)
  and socket; slurm.conf names the socket with ``AuthInfo=socket=...`` so daemons and clients use it.
  munged insists that every folder above its socket is searchable by all, which the 0700 pytest tmp
  folders are not, so the socket lives in a 0755 folder made under the system temp folder (removed on
  stop).
* **No cgroups.** ``ProctrackType=proctrack/linuxproc`` and ``TaskPlugin=task/none``: containers have
  no writable cgroup tree, and the pid namespace already keeps track of every process.
  ``PropagateResourceLimits=NONE``: jobs get the node's limits (memlock), not the submitter's.
* **Nodes as the check catalog sees them.** A node is a ``tests.support.testbed.HostSpec`` (e.g. the healthy
  8x H100 node of ``tests.support.hostkit`` or one of its faults): its fake tools (``ibstat``, ``nvidia-smi``,
  ... printing real captured outputs) are copied onto a tmpfs over ``/usr/local/sbin`` inside the node,
  and it gets its ``/dev/infiniband``, ``/sys/class/infiniband``, port range, files and memlock limit as
  on an sshd test host. ``SlurmBed.env`` puts ``/usr/local/sbin`` first on PATH and srun/sbatch export
  the caller's environment, so a job on n2 runs n2's tools. ``SlurmBed.plant`` swaps a node's tools and
  files while it runs (plant a fault, or remove it).
* **Ports** are picked free by the kernel; state, spool and logs live under the bed's folder.

Use it as a context manager (or ``slurm_bed`` in a fixture): everything is stopped on exit, also when
a test fails, and a process left in any of the bed's namespaces fails the stop. ``require_slurm``
fails the test under CI (``CI=true``) when the bed cannot run here, with the reason, and skips it
elsewhere. The bed needs root, util-linux (unshare, nsenter), hostname, and the packages slurmctld,
slurmd, slurm-client and munge (``.ci/install-test-deps`` installs them).

Helpers for tests: ``env`` and ``run``/``scontrol``/``srun`` (client commands with the bed's
``SLURM_CONF`` and PATH), ``node_names``, ``node`` (one node's ``scontrol show node`` fields, Reason
without its stamp), ``drain`` (as an admin would), ``resume``, ``wait_for_node`` (a predicate on the
fields, with a deadline), ``plant`` (a fault, or its repair), ``leftover_pids``, ``launched_steps`` (the
steps of a job each slurmd launched, from their logs), ``processes``/``step_processes`` (what runs on a
node), ``freeze`` (SIGSTOP a node's step processes: a hung node) and ``crash`` (a node's slurmd and
namespace gone: a dead node); options ``health_check``
(a ``HealthCheck``: HealthCheckProgram through a wrapper, its output in ``health_check_log(node)``) and
``extra_conf`` (more slurm.conf lines: Prolog=, Epilog=, ...).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from diagnose.parsers.scontrol_node import parse_scontrol_node
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
from tests.support.prerequisites import require
from tests.support.testbed import (
    LOOPBACK,
    NS_SCRIPT,
    ROOT_PATH,
    SYSFS_INFINIBAND,
    TOOLS_DIR,
    HostSpec,
    write_tool,
)

SLURM_NS_SCRIPT = Path(__file__).with_name("slurmbed_ns.sh")
SLURMCTLD = "/usr/sbin/slurmctld"
SLURMD = "/usr/sbin/slurmd"
MUNGED = "/usr/sbin/munged"
CLIENTS = ("scontrol", "sinfo", "squeue", "srun", "sbatch", "scancel")
#: The controller's hostname (SlurmctldHost); slurmctld only serves where its hostname matches.
CONTROLLER = "ctl"
CLUSTER = "bed"
PARTITION = "bed"
_NS_FLAGS = ["--uts", "--mount", "--pid", "--fork", "--kill-child", "--propagation", "private"]
_SPAWN_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}
_NODE_NAME = re.compile(r"[a-z][a-z0-9-]{0,30}")


class SlurmBedError(RuntimeError):
    """The bed could not start, answer or stop; the message carries the daemon's log."""


@dataclass(frozen=True)
class HealthCheck:
    """slurm.conf's HealthCheckProgram: slurmd runs ``argv`` on every node when it starts and every
    ``interval`` seconds. slurmd gives the program only SLURMD_NODENAME, so the bed runs ``argv`` from a
    wrapper that sets the bed's PATH and SLURM_CONF, as a site's wrapper sets its own, and appends its
    output to ``SlurmBed.health_check_log(node)``."""

    argv: Sequence[str]
    interval: int = 5
    node_state: str = "ANY"


class SlurmNode:
    """One slurmd of the bed. ``pid`` is the machine pid of the namespace's first process (its init)."""

    def __init__(self, spec: HostSpec, port: int, directory: Path) -> None:
        self.spec = spec
        self.name = spec.name
        self.port = port
        self.dir = directory
        self.pid: int | None = None
        self.pid_namespace: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._lifeline: int | None = None

    def __repr__(self) -> str:
        return f"SlurmNode({self.name!r}, port={self.port})"

    @property
    def log(self) -> Path:
        """slurmd's own log (it runs in the foreground: everything it says on stderr)."""
        return self.dir / "slurmd.log"

    @property
    def tools(self) -> Path:
        """The machine-side folder the node's tools are copied from."""
        return self.dir / "tools"


class SlurmBed:
    """slurmctld + munged + one slurmd per node spec, under one work folder; stop() ends them all."""

    def __init__(
        self,
        workdir: Path,
        nodes: Sequence[HostSpec | str],
        *,
        cpus: int = 2,
        health_check: HealthCheck | None = None,
        extra_conf: Sequence[str] = (),
        start_timeout: float = 30.0,
    ) -> None:
        problem = prerequisite_problem()
        if problem:
            raise SlurmBedError(problem)
        specs = [HostSpec(name=n) if isinstance(n, str) else n for n in nodes]
        names = [spec.name for spec in specs]
        for spec in specs:
            _check_spec(spec)
        if len(set(names)) != len(names) or CONTROLLER in names:
            raise ValueError(f"node names must be distinct and not {CONTROLLER!r}: {names}")
        self.workdir = Path(workdir).resolve()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.cpus = cpus
        self.health_check = health_check
        #: More slurm.conf lines (Prolog=, Epilog=, PrologFlags=, ...), before the node lines.
        self.extra_conf = list(extra_conf)
        self.start_timeout = start_timeout
        self.conf = self.workdir / "slurm.conf"
        self.hosts_file = self.workdir / "hosts"
        self.ctld_log = self.workdir / "slurmctld.log"
        self.munge_socket_dir = Path(tempfile.mkdtemp(prefix="slurmbed-munge-"))
        self.munge_socket_dir.chmod(0o755)
        self.munge_socket = self.munge_socket_dir / "munge.sock"
        ports = _free_ports(len(specs) + 2)
        self.ctld_port = ports.pop()
        #: slurm.conf's SlurmdPort; unused (every node has a Port of its own), but never a node's.
        self.slurmd_port = ports.pop()
        self.nodes: dict[str, SlurmNode] = {
            spec.name: SlurmNode(spec, port, self.workdir / "nodes" / spec.name)
            for spec, port in zip(specs, ports, strict=True)
        }
        #: PATH of the bed's clients, and so of every job (srun/sbatch export it): the nodes' tools
        #: first, then the Python running the tests (its ``diagnose`` and torch), then the usual dirs.
        self.path = ":".join(
            dict.fromkeys([TOOLS_DIR, os.path.dirname(sys.executable), *ROOT_PATH.split(":")])
        )
        #: Environment of client commands: the caller's, with the bed's slurm.conf and PATH.
        self.env = {**os.environ, "SLURM_CONF": str(self.conf), "PATH": self.path}
        self._ctld_proc: subprocess.Popen[bytes] | None = None
        self._ctld_lifeline: int | None = None
        self._namespaces: set[str] = set()
        self._namespace_fds: list[int] = []
        self._started = False

    def __enter__(self) -> SlurmBed:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def node_names(self) -> list[str]:
        return list(self.nodes)

    @property
    def health_check_program(self) -> Path:
        return self.workdir / "health_check.sh"

    def health_check_log(self, node: str) -> Path:
        """What the HealthCheckProgram printed on ``node``, every run appended."""
        return self.workdir / f"health_check.{node}.log"

    # -- life cycle --------------------------------------------------------------------------------

    def start(self) -> None:
        """Start munged and slurmctld, then every slurmd; return once all nodes are idle."""
        if self._started:
            raise SlurmBedError("the Slurm bed is already started")
        self._started = True
        try:
            self._write_common()
            self._start_controller()
            for node in self.nodes.values():
                self._prepare(node)
                self._start_node(node)
            self.wait_for_node(self.node_names, self._idle, timeout=self.start_timeout, what="idle")
        except BaseException:
            with contextlib.suppress(SlurmBedError):
                self.stop()
            raise

    def _idle(self, fields: dict[str, str]) -> bool:
        """A started node is idle; one whose slurmd died (a port taken meanwhile, a bad config) fails the
        start at once with its log rather than after the whole timeout."""
        node = self.nodes[fields["NodeName"]]
        if node._proc is not None and node._proc.poll() is not None:
            raise SlurmBedError(f"slurmd of node {node.name} exited; log {node.log}:\n{_tail(node.log)}")
        return fields.get("State") == "IDLE"

    def stop(self) -> None:
        """Stop every daemon (their namespaces die with them); raise if a process of the bed is left."""
        for node in self.nodes.values():
            node._proc, node._lifeline = _end(node._proc, node._lifeline)
        self._ctld_proc, self._ctld_lifeline = _end(self._ctld_proc, self._ctld_lifeline)
        deadline = time.monotonic() + 10
        while (left := self.leftover_pids()) and time.monotonic() < deadline:
            time.sleep(0.05)
        for fd in self._namespace_fds:
            os.close(fd)
        self._namespace_fds.clear()
        shutil.rmtree(self.munge_socket_dir, ignore_errors=True)
        if left:
            raise SlurmBedError(f"processes left behind after stop: {left}")

    def leftover_pids(self) -> list[int]:
        """Machine pids of live processes in any namespace of the bed (daemons, job steps, tasks)."""
        return pids_in(self._namespaces)

    def _write_common(self) -> None:
        names = " ".join([CONTROLLER, *self.nodes])
        self.hosts_file.write_text(
            f"127.0.0.1\tlocalhost {names}\n::1\tlocalhost ip6-localhost ip6-loopback\n"
        )
        for sub in ("state", "spool", "munge"):
            (self.workdir / sub).mkdir(exist_ok=True)
        munge = self.workdir / "munge"
        munge.chmod(0o700)
        key = munge / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        self.conf.write_text(self._slurm_conf())
        if self.health_check is not None:
            self.health_check_program.write_text(
                "#!/bin/sh\n# The Slurm test bed's HealthCheckProgram (tests/support/slurmbed.py: HealthCheck).\n"
                f"export PATH={shlex.quote(self.path)} SLURM_CONF={shlex.quote(str(self.conf))}\n"
                f'exec >>{shlex.quote(str(self.workdir))}/health_check."$SLURMD_NODENAME".log 2>&1\n'
                f"exec {shlex.join(self.health_check.argv)}\n"
            )
            self.health_check_program.chmod(0o755)

    def _slurm_conf(self) -> str:
        work = self.workdir
        lines = [
            f"ClusterName={CLUSTER}",
            f"SlurmctldHost={CONTROLLER}({LOOPBACK})",
            f"SlurmctldPort={self.ctld_port}",
            f"SlurmdPort={self.slurmd_port}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.munge_socket}",
            "CommunicationParameters=NoCtldInAddrAny,NoInAddrAny",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "SchedulerType=sched/backfill",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "SlurmdParameters=config_overrides",
            "PropagateResourceLimits=NONE",
            "MpiDefault=none",
            "MailProg=/bin/true",
            "ReturnToService=2",
            "KillWait=2",
            f"StateSaveLocation={work / 'state'}",
            f"SlurmdSpoolDir={work / 'spool'}/%n",
            f"SlurmctldPidFile={work / 'slurmctld.pid'}",
            f"SlurmdPidFile={work / 'spool'}/%n.pid",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
        ]
        if self.health_check is not None:
            lines += [
                f"HealthCheckProgram={self.health_check_program}",
                f"HealthCheckInterval={self.health_check.interval}",
                f"HealthCheckNodeState={self.health_check.node_state}",
            ]
        lines += self.extra_conf
        for node in self.nodes.values():
            lines.append(
                f"NodeName={node.name} NodeAddr={LOOPBACK} Port={node.port} CPUs={self.cpus} State=UNKNOWN"
            )
        lines.append(
            f"PartitionName={PARTITION} Nodes={','.join(self.nodes)} Default=YES MaxTime=INFINITE State=UP"
        )
        return "\n".join(lines) + "\n"

    def _start_controller(self) -> None:
        munge = self.workdir / "munge"
        init = self.workdir / "ctld-init.sh"
        init.write_text(
            "\n".join(
                [
                    f". {shlex.quote(str(NS_SCRIPT))}",
                    f". {shlex.quote(str(SLURM_NS_SCRIPT))}",
                    shell_join("ns_hostname", CONTROLLER),
                    shell_join("mount", "--bind", str(self.hosts_file), "/etc/hosts"),
                    shell_join(
                        MUNGED,
                        "--foreground",
                        f"--socket={self.munge_socket}",
                        f"--key-file={munge / 'munge.key'}",
                        f"--log-file={munge / 'munged.log'}",
                        f"--pid-file={munge / 'munged.pid'}",
                        f"--seed-file={munge / 'munged.seed'}",
                    )
                    + " &",
                    shell_join("ns_wait_socket", str(self.munge_socket)),
                    shell_join("ns_serve", SLURMCTLD, "-D", "-f", str(self.conf)),
                ]
            )
            + "\n"
        )
        self._ctld_proc, self._ctld_lifeline = self._spawn(init, self.ctld_log)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self._ctld_proc.poll() is not None:
                break
            ping = self.run(["scontrol", "ping"], timeout=10)
            if ping.returncode == 0 and "is UP" in ping.stdout:
                return
            time.sleep(0.05)
        raise SlurmBedError(f"slurmctld did not start; log {self.ctld_log}:\n{_tail(self.ctld_log)}")

    def _prepare(self, node: SlurmNode) -> None:
        """Write what the node's init reads: its tools, files, sysfs tree, and the init script."""
        spec, directory = node.spec, node.dir
        directory.mkdir(parents=True)
        (directory / "ns").mkdir()
        (directory / "port_range").write_text(spec.port_range)
        self._write_tools(node, spec)
        binds: list[tuple[Path, str]] = [(self.hosts_file, "/etc/hosts")]
        files = directory / "files"
        files.mkdir()
        for index, (target, content) in enumerate(sorted(spec.files.items())):
            check_target(target, self.workdir)
            source = files / str(index)
            source.write_text(content)
            binds.append((source, target))
        sysfs = directory / "sysfs_infiniband"
        if spec.sysfs_infiniband is not None:
            write_sysfs_tree(sysfs, spec.sysfs_infiniband)
        wanted = {target: "f" for _, target in binds}
        wanted[TOOLS_DIR] = "d"
        if spec.sysfs_infiniband is not None:
            wanted[SYSFS_INFINIBAND] = "d"
        lines = [
            f". {shlex.quote(str(NS_SCRIPT))}",
            f". {shlex.quote(str(SLURM_NS_SCRIPT))}",
            shell_join("ns_hostname", node.name),
            shell_join("ns_scratch", str(directory / "ns")),
            "ns_proc",
            shell_join("ns_dev", *infiniband_nodes(spec.infiniband)),
        ]
        lines += [
            shell_join("ns_overlay", parent, *entries) for parent, entries in overlays(wanted, self.workdir)
        ]
        lines.append(
            shell_join("ns_bind", str(directory / "port_range"), "/proc/sys/net/ipv4/ip_local_port_range")
        )
        lines.append(shell_join("ns_tools", str(node.tools), TOOLS_DIR))
        lines += [shell_join("ns_bind", str(source), target) for source, target in binds]
        if spec.sysfs_infiniband is not None:
            lines.append(shell_join("ns_bind", str(sysfs), SYSFS_INFINIBAND))
        lines.append(shell_join("ns_memlock", memlock_word(spec.memlock_kib)))
        lines.append(shell_join("ns_serve", SLURMD, "-D", "-N", node.name, "-f", str(self.conf)))
        (directory / "init.sh").write_text("\n".join(lines) + "\n")

    def _write_tools(self, node: SlurmNode, spec: HostSpec) -> None:
        for old in (node.tools, node.dir / "tooldata"):
            shutil.rmtree(old, ignore_errors=True)
            old.mkdir()
        for name, tool in spec.tools.items():
            write_tool(node.tools, node.dir / "tooldata", node.name, name, tool)

    def _start_node(self, node: SlurmNode) -> None:
        (self.workdir / "spool" / node.name).mkdir(exist_ok=True)
        before = set(self._namespaces)
        node._proc, node._lifeline = self._spawn(node.dir / "init.sh", node.log)
        node.pid = node._proc.pid
        node.pid_namespace = next(iter(self._namespaces - before), None)

    def _spawn(self, init: Path, log: Path) -> tuple[subprocess.Popen[bytes], int]:
        """Start ``init`` as the first process of new namespaces, its stdin the lifeline pipe."""
        read_end, write_end = os.pipe()
        with open(log, "ab") as out:
            try:
                proc = subprocess.Popen(
                    ["unshare", *_NS_FLAGS, "/bin/sh", str(init)],
                    stdin=read_end,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    cwd=init.parent,
                    env=_SPAWN_ENV,
                    start_new_session=True,
                )
            finally:
                os.close(read_end)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and proc.poll() is None:
            held = hold_pid_namespace(proc.pid)
            if held:
                self._namespaces.add(held[0])
                self._namespace_fds.append(held[1])
                return proc, write_end
            time.sleep(0.005)
        # Without its namespace nothing could be said of what runs there: no node rather than one whose
        # "nothing left running" checks pass unseen.
        _end(proc, write_end)
        raise SlurmBedError(f"{init}: the pid namespace of its processes could not be captured (see {log})")

    # -- client commands -----------------------------------------------------------------------------

    def run(
        self, argv: Sequence[str], *, timeout: float = 60, check: bool = False
    ) -> subprocess.CompletedProcess[str]:
        """A Slurm client command (or any command) with the bed's environment; text output."""
        result = subprocess.run(
            list(argv), env=self.env, capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and result.returncode != 0:
            raise SlurmBedError(
                f"{shlex.join(argv)} exited {result.returncode}:\n{result.stdout}{result.stderr}"
            )
        return result

    def scontrol(self, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        """``scontrol ARGS`` as the admin (root); raises when it fails."""
        return self.run(["scontrol", *args], timeout=timeout, check=True)

    def srun(
        self, node: str, argv: Sequence[str], *, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` as a one-task job step on ``node``; never raises on its exit status."""
        return self.run(["srun", "-N1", "-n1", "-w", node, "-t", "5", *argv], timeout=timeout)

    def node(self, name: str) -> dict[str, str]:
        """One node's ``scontrol show node -o`` fields (State, Reason without its [user@time] tail, ...)."""
        node = parse_scontrol_node(self.scontrol("show", "node", "-o", name).stdout)
        fields = dict(node["fields"])
        if node["reason"] is not None:
            fields["Reason"] = node["reason"]
        return fields

    def drain(self, name: str, reason: str) -> None:
        """Drain ``name`` as an admin would, with ``reason``."""
        self.scontrol("update", f"NodeName={name}", "State=DRAIN", f"Reason={reason}")

    def resume(self, name: str) -> None:
        self.scontrol("update", f"NodeName={name}", "State=RESUME")

    def wait_for_node(
        self,
        names: str | Sequence[str],
        predicate: Callable[[dict[str, str]], bool],
        *,
        timeout: float = 30,
        what: str = "the expected state",
    ) -> dict[str, dict[str, str]]:
        """Poll ``scontrol show node`` until ``predicate`` holds for every named node; their fields."""
        wanted = [names] if isinstance(names, str) else list(names)
        deadline = time.monotonic() + timeout
        while True:
            fields = {name: self.node(name) for name in wanted}
            if all(predicate(fields[name]) for name in wanted):
                return fields
            if time.monotonic() > deadline:
                logs = "\n".join(
                    f"--- {n.log}\n{_tail(n.log)}" for n in self.nodes.values() if n.name in wanted
                )
                seen = {n: (f.get("State"), f.get("Reason")) for n, f in fields.items()}
                raise SlurmBedError(f"nodes did not reach {what} within {timeout} s: {seen}\n{logs}")
            time.sleep(0.1)

    def launched_steps(self, job: str) -> dict[str, list[str]]:
        """Step id -> the nodes whose slurmd launched a task of it, for job ``job``: the scheduler's own
        account (each slurmd logs ``launch task StepId=J.S request``), whatever diagnose believes."""
        pattern = re.compile(rf"launch task StepId={re.escape(job)}\.(\d+) request")
        steps: dict[str, list[str]] = {}
        for node in self.nodes.values():
            text = node.log.read_text(errors="replace") if node.log.exists() else ""
            for step in dict.fromkeys(pattern.findall(text)):
                steps.setdefault(f"{job}.{step}", []).append(node.name)
        return dict(sorted(steps.items(), key=lambda item: int(item[0].rpartition(".")[2])))

    # -- faults --------------------------------------------------------------------------------------

    def processes(self, name: str) -> dict[int, str]:
        """Machine pid -> command line of every live process on node ``name`` (its pid namespace)."""
        found = {}
        for pid in pids_in({self._namespace_of(name)}):
            with contextlib.suppress(OSError):
                found[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        return found

    def _namespace_of(self, name: str) -> str:
        """Node ``name``'s pid namespace; an error where it was not captured (an empty one would find no
        process, and every "nothing left running" check would pass unseen)."""
        namespace = self.nodes[name].pid_namespace
        if not namespace:
            raise SlurmBedError(f"node {name!r}: the bed did not capture its pid namespace")
        return namespace

    def step_processes(self, name: str) -> dict[int, str]:
        """The processes of job steps on node ``name``: all but its init shell (and the lifeline reader
        it forked) and slurmd."""
        init = str(self.nodes[name].dir / "init.sh")
        return {
            pid: cmd
            for pid, cmd in self.processes(name).items()
            if cmd and init not in cmd and not cmd.startswith(SLURMD)
        }

    def freeze(self, name: str) -> list[int]:
        """SIGSTOP every process of the job steps on node ``name`` but slurmstepd: the node stops making
        progress as a hung machine does, and only SIGKILL (scancel's) ends them. The pids frozen."""
        frozen = [pid for pid, cmd in self.step_processes(name).items() if not cmd.startswith("slurmstepd")]
        for pid in frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        return frozen

    def crash(self, name: str) -> None:
        """Node ``name`` dies: its slurmd is killed, and with it the node's namespace — every slurmstepd
        and task there — as when a machine loses power. slurmctld learns it only from missed answers."""
        node = self.nodes[name]
        node._proc, node._lifeline = _end(node._proc, node._lifeline)
        deadline = time.monotonic() + 10
        while pids_in({self._namespace_of(name)}) and time.monotonic() < deadline:
            time.sleep(0.05)

    def plant(self, name: str, spec: HostSpec) -> None:
        """Give the running node ``name`` the tools, files and /sys/class/infiniband of ``spec`` (a
        fault builder's or the healthy one's, for the same node name): the next job or health check on
        the node sees them. /dev/infiniband, the port range and memlock are fixed at start."""
        node = self.nodes[name]
        old = node.spec
        spec = replace(spec, name=name)
        _check_spec(spec)
        fixed = ("infiniband", "port_range", "memlock_kib")
        changed = [f for f in fixed if getattr(spec, f) != getattr(old, f)]
        if changed or sorted(spec.files) != sorted(old.files):
            raise SlurmBedError(f"node {name}: {changed or 'the set of files'} cannot change while it runs")
        if (spec.sysfs_infiniband is None) != (old.sysfs_infiniband is None):
            raise SlurmBedError(f"node {name}: /sys/class/infiniband cannot appear or vanish while it runs")
        self._write_tools(node, spec)
        if node.pid is None:
            raise SlurmBedError(f"node {name} is not running")
        copy = f"find {shlex.quote(TOOLS_DIR)} -mindepth 1 -delete && cp -a {shlex.quote(str(node.tools))}/. {shlex.quote(TOOLS_DIR)}/"
        result = subprocess.run(
            ["nsenter", f"--target={_init_pid(node.pid)}", "--mount", "/bin/sh", "-c", copy],
            capture_output=True,
            text=True,
            env=_SPAWN_ENV,
            check=False,
        )
        if result.returncode != 0:
            raise SlurmBedError(f"node {name}: tools not replaced: {result.stderr.strip()}")
        for index, (_, content) in enumerate(sorted(spec.files.items())):
            (node.dir / "files" / str(index)).write_text(content)
        if spec.sysfs_infiniband is not None:
            # In place: the node has this very folder bound over /sys/class/infiniband.
            sysfs = node.dir / "sysfs_infiniband"
            for entry in sysfs.iterdir():
                if entry.is_dir():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
            for relative, content in sorted(spec.sysfs_infiniband.items()):
                path = sysfs / sysfs_relative(relative)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(content)
        node.spec = spec


def _check_spec(spec: HostSpec) -> None:
    if not _NODE_NAME.fullmatch(spec.name):
        raise ValueError(f"bad Slurm node name {spec.name!r}")
    if spec.env or spec.jump or spec.behind_jump or spec.serve != "ssh" or not spec.authorized:
        raise ValueError(
            f"node {spec.name}: a Slurm node takes tools, files, /dev/infiniband, sysfs, port range and "
            "memlock only (jobs get their environment from srun/sbatch)"
        )


def _init_pid(holder: int) -> int:
    """The namespace's first process (the child of ``unshare --fork``)."""
    children = Path(f"/proc/{holder}/task/{holder}/children").read_text().split()
    if not children:
        raise SlurmBedError(f"the namespace of pid {holder} has no init")
    return int(children[0])


def _end(proc: subprocess.Popen[bytes] | None, lifeline: int | None) -> tuple[None, None]:
    """Close a daemon's lifeline (its init kills it and exits, and the kernel the rest); SIGKILL the
    holder of the namespaces if that takes too long."""
    if lifeline is not None:
        os.close(lifeline)
    if proc is not None:
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 9)
            proc.wait(timeout=10)
    return None, None


def _free_ports(count: int) -> list[int]:
    """Ports nothing listens on now, all different (held together while the kernel picks them)."""
    with contextlib.ExitStack() as stack:
        sockets = [
            stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(count)
        ]
        for sock in sockets:
            sock.bind((LOOPBACK, 0))
        return [sock.getsockname()[1] for sock in sockets]


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "".join(path.read_text(errors="replace").splitlines(keepends=True)[-lines:])
    except OSError as exc:
        return f"(unreadable: {exc})"


_prerequisite_cache: list[str | None] = []


def prerequisite_problem() -> str | None:
    """Why the Slurm bed cannot run on this machine (not root, a program missing, unshare refused), or None."""
    if not _prerequisite_cache:
        _prerequisite_cache.append(_find_prerequisite_problem())
    return _prerequisite_cache[0]


def _find_prerequisite_problem() -> str | None:
    if os.geteuid() != 0:
        return "the Slurm test bed needs root (namespaces, slurmd as root)"
    for program, package in ((SLURMCTLD, "slurmctld"), (SLURMD, "slurmd"), (MUNGED, "munge")):
        if not os.access(program, os.X_OK):
            return f"{program} is missing (install {package})"
    for program in (*CLIENTS, "unshare", "nsenter", "hostname", "mount"):
        if shutil.which(program, path=_SPAWN_ENV["PATH"]) is None:
            return f"{program} is not installed (slurm-client, util-linux, hostname)"
    probe = subprocess.run(
        ["unshare", *_NS_FLAGS, "/bin/sh", "-c", "hostname slurmbed-probe && mount -t tmpfs probe /mnt"],
        capture_output=True,
        text=True,
        env=_SPAWN_ENV,
        check=False,
    )
    if probe.returncode != 0:
        return f"unshare --uts --mount --pid is not permitted here: {probe.stderr.strip()}"
    return None


def require_slurm() -> None:
    """Fail the calling test under CI when the bed cannot run here, skip it elsewhere
    (tests/support/prerequisites.py)."""
    require("the Slurm test bed", prerequisite_problem())


@contextlib.contextmanager
def slurm_bed(workdir: Path, nodes: Sequence[HostSpec | str], **options: object) -> Iterator[SlurmBed]:
    """A started bed for a fixture: checks prerequisites (``require_slurm``), starts, yields, stops."""
    require_slurm()
    bed = SlurmBed(workdir, nodes, **options)  # type: ignore[arg-type]
    with bed:
        yield bed
