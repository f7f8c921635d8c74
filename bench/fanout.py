"""Fan-out bench: the per-host stage over loopback sshd hosts, timed three ways in one run.

1. diagnose's host stage (connect, one batched round trip of every check command, parse, judge, write);
2. the floor: the very batch script diagnose sends each host (same commands, same `timeout` wrappers and
   frame markers, checked byte for byte against what diagnose sent in an untimed first run), one exec per
   host over Fabric, nothing else;
3. ansible-playbook with the same commands as separate `shell` tasks and `-f <hosts>` (ansible-core is
   installed into this bench's own virtual environment, never a project dependency); optional.

Diagnose and the floor alternate, so both see the same load; each reports its wall time, the
controller's CPU time (this process, all its threads: the sshd hosts are other processes) per host, and
the SSH round trips per host as paramiko in this process made them (connections, channels opened, exec
requests: a follow-up command, a second exec, sftp or a re-connect would show; the floor is 1/1/1).
Targets: diagnose <= 0.8 x the floor (issue 47; 1.1 x in issue 22); (issue 2) >= 20 x faster than
ansible-playbook.

Every host is a healthy 8x H100 node of tests/support/hostkit.py. Its Python interpreter for the torch probe is a
fake that prints the probe's output captured on a lent H200 machine: a real `import torch` costs about
1.5 CPU-seconds per host, the same for all three methods, and on this 2-core machine 64 of them would
measure torch's import time rather than the orchestration the bench compares.

    python3 bench/fanout.py [--hosts 16 64] [--repeat 3] [--skip-ansible] [--without-node-health]
                            [--without ID ...] [--profile N]

``--profile N`` adds one untimed diagnose run at the largest size under a profiler per thread, each timed
by its own thread's CPU clock, and prints the controller's CPU per host by kind of thread and the N
functions with the most CPU of their own and in all (the profiler itself roughly doubles the CPU).
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import re
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import paramiko  # noqa: E402
import yaml  # noqa: E402
from fabric import Connection  # noqa: E402
from stage_profile import parts_timed, print_parts, profiled, thread_cpu, thread_cpu_since  # noqa: E402

from diagnose.config.playbook import load_playbook  # noqa: E402
from diagnose.connectors import batch_script  # noqa: E402
from diagnose.core.hosts import Host  # noqa: E402
from diagnose.engine import stages as engine  # noqa: E402
from diagnose.engine.results import ResultsStore  # noqa: E402
from diagnose.targets.loading import InventoryFiles  # noqa: E402
from diagnose.targets.resolve import resolve_hosts  # noqa: E402
from diagnose.targets.sources import HostContext  # noqa: E402
from tests.support.hostkit import captured, healthy_h100  # noqa: E402
from tests.support.nshost import memlock_ceiling_kib, pids_in  # noqa: E402
from tests.support.testbed import HostSpec, Reply, TestBed  # noqa: E402

ANSIBLE_VENV = ROOT / "bench" / ".venv-ansible"
PROBE_PYTHON = "bench-python"
TARGET_RATIO = 0.8
SESSION_END_S = 2.0
_TOKEN = re.compile(r"@@diagnose-[0-9a-f]{16}")


@dataclass
class Timing:
    """One method's runs at one size: wall seconds and controller CPU seconds, run by run."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    hosts_cpu: list[float] = field(default_factory=list)

    def add(self, measured: tuple[float, float]) -> None:
        self.wall.append(measured[0])
        self.cpu.append(measured[1])

    def hosts_cpu_ms_per_host(self, hosts: int) -> float:
        return 1000 * statistics.median(self.hosts_cpu) / hosts

    def median_wall(self) -> float:
        return statistics.median(self.wall)

    def cpu_ms_per_host(self, hosts: int) -> float:
        return 1000 * statistics.median(self.cpu) / hosts


def hosts_cpu(namespaces: set[str]) -> float:
    """CPU seconds of the live processes in these pid namespaces, their reaped children included: the hosts'
    own part of a run (sshd, the batch shell, every command), which diagnose and the floor both pay."""
    ticks = 0
    for pid in pids_in(namespaces):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        ticks += sum(int(value) for value in fields[11:15])  # utime, stime, cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def measured_on_hosts(namespaces: set[str], timing: Timing, work: Callable[[], object]) -> None:
    """Time ``work`` into ``timing``, with the CPU the hosts spent meanwhile (read once its sshd sessions
    have ended)."""
    before = hosts_cpu(namespaces)
    timing.add(timed(work))
    time.sleep(SESSION_END_S)
    timing.hosts_cpu.append(hosts_cpu(namespaces) - before)


def foreign_packages() -> list[str]:
    """The packages of checks and playbooks that load from another checkout than this bench's own: an
    editable install maps ``diagnose.checks`` and ``diagnose.playbooks`` to the checkout it was installed
    from, so a baseline run from a worktree would otherwise measure that checkout's checks without a word."""
    import diagnose.checks
    import diagnose.playbooks

    return [
        f"{package.__name__} from {where}"
        for package in (diagnose.checks, diagnose.playbooks)
        for where in package.__path__
        if not Path(where).resolve().is_relative_to(ROOT)
    ]


def timed(work: Callable[[], object]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this whole process, every thread) that ``work`` took."""
    cpu, wall = time.process_time(), time.perf_counter()
    work()
    return time.perf_counter() - wall, time.process_time() - cpu


def bench_host(name: str) -> HostSpec:
    spec = healthy_h100(name)
    probe = Reply(stdout=captured("nccl_version/torch_h200x4.txt"))
    return replace(spec, tools={**spec.tools, PROBE_PYTHON: probe})


def ansible_playbook() -> Path:
    """ansible-playbook from the bench's own virtual environment, created on first use."""
    binary = ANSIBLE_VENV / "bin" / "ansible-playbook"
    if not binary.exists():
        subprocess.run([sys.executable, "-m", "venv", str(ANSIBLE_VENV)], check=True)
        subprocess.run([str(ANSIBLE_VENV / "bin" / "pip"), "install", "-q", "ansible-core"], check=True)
    return binary


def host_script(host: Host, checks) -> str:
    """The batch script diagnose's connector sends ``host``, with a fresh token of the same form."""
    commands = engine.commands_of(checks, host.vars)
    token = "@@diagnose-" + secrets.token_hex(8)
    return batch_script(commands, token, host.vars.float("command_timeout_s", None))


def diagnose_run(hosts: list[Host], checks, workdir: Path) -> tuple[Callable[[], object], ResultsStore]:
    """The host stage as ``diagnose run`` drives it (forks = hosts), and the store it writes."""
    out = Path(tempfile.mkdtemp(dir=workdir, prefix="diagnose-"))
    store = ResultsStore(out / "results.json", {"id": "bench"})

    def work() -> None:
        states = engine.run_host_stage(hosts, checks, out, store, len(hosts), False, None)
        engine.close_all(states)

    return work, store


def profile_stage(hosts: list[Host], checks, workdir: Path, top: int) -> None:
    """Two untimed diagnose runs over ``hosts``: one timed part by part on each thread's CPU clock (the
    threads read before the connections close), one under cProfile (:mod:`stage_profile`)."""
    out = Path(tempfile.mkdtemp(dir=workdir, prefix="parts-"))
    store = ResultsStore(out / "results.json", {"id": "bench"})
    threads = thread_cpu()
    cpu = time.process_time()
    with parts_timed() as clock:
        states = engine.run_host_stage(hosts, checks, out, store, len(hosts), False, None)
    cpu = time.process_time() - cpu
    by_kind = thread_cpu_since(threads)
    engine.close_all(states)
    print_parts(clock, by_kind, len(hosts), cpu)
    work, _store = diagnose_run(hosts, checks, workdir)
    profiled(work, len(hosts), top)


class WireRecorder:
    """What every host's sshd was asked for through paramiko in this process, by the host's port: the first
    batch script exec'd (token masked: the bytes on the wire, whoever sent them), and the round trips each
    host cost: SSH connections started, channels opened (sessions, and sftp's), exec requests made.

    A host stage that needs one batch per host shows 1 / 1 / 1; a follow-up command, a second exec, an sftp
    transfer or a re-connect shows as more."""

    def __init__(self) -> None:
        self.sent: dict[int, str] = {}
        self.connections: Counter[int] = Counter()
        self.channels: Counter[int] = Counter()
        self.execs: Counter[int] = Counter()
        self._lock = threading.Lock()
        self._originals = (
            paramiko.Channel.exec_command,
            paramiko.Transport.open_channel,
            paramiko.Transport.start_client,
        )

    def __enter__(self) -> WireRecorder:
        exec_command, open_channel, start_client = self._originals
        lock = self._lock

        def port_of(transport: paramiko.Transport) -> int:
            return transport.getpeername()[1]

        def recording_exec(channel: paramiko.Channel, command: str) -> None:
            port = port_of(channel.get_transport())
            with lock:
                self.execs[port] += 1
                if " OUT " in command:
                    self.sent.setdefault(port, _TOKEN.sub("@@TOKEN", command))
            exec_command(channel, command)

        def counting_open(transport: paramiko.Transport, kind: str, *args: object, **kwargs: object):
            with lock:
                self.channels[port_of(transport)] += 1
            return open_channel(transport, kind, *args, **kwargs)

        def counting_start(transport: paramiko.Transport, *args: object, **kwargs: object) -> None:
            with lock:
                self.connections[port_of(transport)] += 1
            start_client(transport, *args, **kwargs)

        paramiko.Channel.exec_command = recording_exec
        paramiko.Transport.open_channel = counting_open
        paramiko.Transport.start_client = counting_start
        return self

    def __exit__(self, *exc: object) -> None:
        (paramiko.Channel.exec_command, paramiko.Transport.open_channel, paramiko.Transport.start_client) = (
            self._originals
        )

    def per_host(self, ports: list[int]) -> tuple[float, float, float]:
        """(connections, channels, exec requests) per host over ``ports``, the hosts of the run."""
        count = len(ports)
        return tuple(
            sum(seen[p] for p in ports) / count for seen in (self.connections, self.channels, self.execs)
        )


@dataclass
class RoundTrips:
    """A method's round trips per host, run by run, as :class:`WireRecorder` counted them."""

    runs: list[tuple[float, float, float]] = field(default_factory=list)

    def text(self) -> str:
        """``connections/channels/execs``, the largest of each over the runs (they should never differ)."""
        return "/".join(f"{max(run[i] for run in self.runs):g}" for i in range(3))


def check_same_bytes(bed: TestBed, hosts: list[Host], checks, scripts: dict[str, str], workdir: Path) -> int:
    """Run diagnose and the floor once, untimed, and stop unless every host received the same script from
    both; how many FAIL/ERROR results diagnose gave (healthy hosts: none expected)."""
    with WireRecorder() as from_diagnose:
        work, store = diagnose_run(hosts, checks, workdir)
        work()
    with WireRecorder() as from_floor:
        floor_run(bed, hosts, scripts)()
    ports = [bed.hosts[h.name].port for h in hosts]
    differing = [
        h.name
        for h, port in zip(hosts, ports, strict=True)
        if port not in from_diagnose.sent or from_diagnose.sent.get(port) != from_floor.sent.get(port)
    ]
    if differing:
        raise SystemExit(f"the floor did not send diagnose's batch script to {', '.join(differing)}")
    return sum(1 for c in store.checks if c["status"] in ("FAIL", "ERROR"))


def floor_run(bed: TestBed, hosts: list[Host], scripts: dict[str, str]) -> Callable[[], object]:
    """One Fabric connection and one exec of the host's batch script per host, ``len(hosts)`` at once:
    what any SSH-based tool sending that script must at least pay."""

    def one(host: Host) -> None:
        spec = bed.hosts[host.name]
        connection = Connection(
            spec.address,
            user=spec.user,
            port=spec.port,
            connect_kwargs={
                "key_filename": [str(bed.client_key)],
                "look_for_keys": False,
                "allow_agent": False,
            },
        )
        connection.client.load_host_keys(str(bed.known_hosts))
        try:
            connection.run(scripts[host.name], hide=True, warn=True, in_stream=False)
        finally:
            connection.close()

    def work() -> None:
        with ThreadPoolExecutor(max_workers=len(hosts)) as pool:
            list(pool.map(one, hosts))

    return work


def time_ansible(inventory: Path, commands: list[str], workdir: Path, forks: int) -> float:
    playbook = workdir / "ansible-bench.yml"
    tasks = [
        {"name": f"command {i}", "ansible.builtin.shell": cmd, "ignore_errors": True}
        for i, cmd in enumerate(commands)
    ]
    playbook.write_text(
        yaml.safe_dump([{"hosts": "all", "gather_facts": False, "tasks": tasks}], width=1 << 16)
    )
    env = {
        "PATH": f"{ANSIBLE_VENV / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        "ANSIBLE_HOST_KEY_CHECKING": "False",
        "ANSIBLE_PYTHON_INTERPRETER": "/usr/bin/python3",
        "ANSIBLE_LOCAL_TEMP": str(workdir / "ansible-tmp"),
        "HOME": str(workdir),
    }
    started = time.perf_counter()
    done = subprocess.run(
        [str(ansible_playbook()), "-i", str(inventory), "-f", str(forks), str(playbook)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - started
    recap = done.stdout[done.stdout.rfind("PLAY RECAP") :]
    if "PLAY RECAP" not in done.stdout or "unreachable=0" not in recap:
        raise SystemExit(
            f"ansible-playbook did not run every task:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--hosts", type=int, nargs="+", default=[64], help="fan-out sizes (one bed, the largest)"
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of diagnose and of the floor per size (median kept)"
    )
    parser.add_argument("--skip-ansible", action="store_true")
    parser.add_argument(
        "--profile", type=int, default=0, metavar="N", help="profile one diagnose run; print N functions"
    )
    parser.add_argument(
        "--without-node-health", action="store_true", help="leave the node-health checks (section H) out"
    )
    parser.add_argument(
        "--without",
        nargs="+",
        default=[],
        metavar="ID",
        help="leave these check ids (fnmatch patterns) out, to price what they add",
    )
    args = parser.parse_args()
    sizes = sorted(set(args.hosts))
    foreign = foreign_packages()
    if foreign:
        print(f"warning: not this checkout's ({ROOT}): {'; '.join(foreign)}", file=sys.stderr)
    load_before = os.getloadavg()

    with tempfile.TemporaryDirectory(prefix="fanout-") as tmp, TestBed(Path(tmp)) as bed:
        workdir = Path(tmp)
        started = time.perf_counter()
        bed.add_many([bench_host(f"node{i:02d}") for i in range(1, sizes[-1] + 1)])
        print(f"started {sizes[-1]} sshd hosts in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        inventory = bed.write_inventory(
            workdir / "inventory.yaml",
            extra_vars={
                "diagnose_profile": "h100-8x-ndr400",
                "ansible_python_interpreter": PROBE_PYTHON,
                # Where the machine cannot raise `ulimit -l`, healthy hosts have its limit (tests/support/hostkit.py).
                **({"min_memlock_kib": memlock_ceiling_kib()} if memlock_ceiling_kib() else {}),
            },
        )
        # Ansible runs its modules with the interpreter variable, so its inventory keeps the real one.
        ansible_inventory = bed.write_inventory(workdir / "ansible-inventory.yaml")
        playbook = load_playbook("acceptance")
        all_hosts = resolve_hosts([InventoryFiles(inventory)], HostContext(playbook))
        checks, _ = engine.selected_catalog(playbook.checks)
        if args.without_node_health:  # the catalog as it was before the node-health checks
            checks = [c for c in checks if c.checklist != "H"]
        checks = [c for c in checks if not any(fnmatch.fnmatchcase(c.id, p) for p in args.without)]
        commands = [c.script for c in engine.commands_of(checks, all_hosts[0].vars)]

        # The floor's scripts are built here, independently; an untimed run of both checks the wire.
        scripts = {h.name: host_script(h, checks) for h in all_hosts}
        failed = check_same_bytes(bed, all_hosts, checks, scripts, workdir)
        print(
            f"floor sent diagnose's batch script byte for byte to all {len(scripts)} hosts "
            f"({len(commands)} commands, {len(next(iter(scripts.values())))} bytes each)",
            file=sys.stderr,
        )

        if args.profile:
            profile_stage(all_hosts, checks, workdir, args.profile)

        timings: dict[int, tuple[Timing, Timing]] = {}
        trips: dict[int, tuple[RoundTrips, RoundTrips]] = {}
        loads: dict[int, list[float]] = {}
        for size in sizes:
            hosts = all_hosts[:size]
            ports = [bed.hosts[h.name].port for h in hosts]
            namespaces = {bed.hosts[h.name].pid_namespace for h in hosts} - {None}
            diag, floor = Timing(), Timing()
            diag_trips, floor_trips = RoundTrips(), RoundTrips()
            loads[size] = []
            for _ in range(args.repeat):
                loads[size].append(os.getloadavg()[0])
                work, _store = diagnose_run(hosts, checks, workdir)
                with WireRecorder() as wire:
                    measured_on_hosts(namespaces, diag, work)
                diag_trips.runs.append(wire.per_host(ports))
                with WireRecorder() as wire:
                    measured_on_hosts(namespaces, floor, floor_run(bed, hosts, scripts))
                floor_trips.runs.append(wire.per_host(ports))
            timings[size] = (diag, floor)
            trips[size] = (diag_trips, floor_trips)
        ansible = None if args.skip_ansible else time_ansible(ansible_inventory, commands, workdir, sizes[-1])

    print(f"\nper-host stage, {len(commands)} commands per host, forks = hosts, median of {args.repeat}")
    print(
        f"{'hosts':>5} {'diagnose s':>10} {'floor s':>8} {'ratio':>6} "
        f"{'diagnose CPU ms/host':>21} {'floor CPU ms/host':>18} {'hosts CPU ms/host':>18} "
        f"{'round trips/host':>17} {'floor':>6}"
    )
    for size, (diag, floor) in timings.items():
        print(
            f"{size:>5} {diag.median_wall():>10.2f} {floor.median_wall():>8.2f} "
            f"{diag.median_wall() / floor.median_wall():>6.2f} "
            f"{diag.cpu_ms_per_host(size):>21.1f} {floor.cpu_ms_per_host(size):>18.1f} "
            f"{diag.hosts_cpu_ms_per_host(size):>8.0f} ({floor.hosts_cpu_ms_per_host(size):>6.0f}) "
            f"{trips[size][0].text():>17} {trips[size][1].text():>6}"
        )
    print("hosts CPU: the bed hosts' own (sshd, batch shell, commands) during diagnose's runs (the floor's)")
    print("round trips per host: SSH connections / channels opened / exec requests (the floor: 1/1/1)")
    print()
    for size, (diag, floor) in timings.items():
        ratio = diag.median_wall() / floor.median_wall()
        verdict = "PASS" if ratio <= TARGET_RATIO else "MISS"
        print(f"{size} hosts: diagnose / floor = {ratio:.2f}  (target <= {TARGET_RATIO:.2f}) {verdict}")
        print(
            f"  runs: diagnose {', '.join(f'{t:.2f}' for t in diag.wall)} s; "
            f"floor {', '.join(f'{t:.2f}' for t in floor.wall)} s; "
            f"load average (1 min) at each start {', '.join(f'{x:.1f}' for x in loads[size])}"
        )
    if ansible is not None:
        diag_wall = timings[sizes[-1]][0].median_wall()
        speedup = ansible / diag_wall
        print(
            f"ansible-playbook -f {sizes[-1]}: {ansible:.2f} s; ansible / diagnose = {speedup:.1f}  "
            f"(target >= 20) {'PASS' if speedup >= 20 else 'MISS'}"
        )
    if failed:
        print(f"note: {failed} FAIL/ERROR results in the untimed diagnose run (healthy hosts expected none)")
    if foreign:
        print(f"note: checks and playbooks were not this checkout's: {'; '.join(foreign)}")
    load_after = os.getloadavg()
    print(
        f"load average (1 min) before {load_before[0]:.1f}, after {load_after[0]:.1f} on {os.cpu_count()} CPUs"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
