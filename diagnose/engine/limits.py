"""What a fan-out over many hosts costs the controller in open files and threads, and making room for it.

Measured on the loopback test bed (docs/scale.md): an SSH host whose checks are running holds three
descriptors (its socket, and the pipe paramiko's channel wakes the reader through) and a moment later the
evidence file being written; once its batch is done it keeps one, its socket, because the connection stays
open for the benchmarks until the run ends. Its paramiko transport is a thread for as long as the
connection is open, and each fork is one more thread while the host stage runs. A ProxyCommand keeps a
child process and its three pipes per host. The local, kubectl and srun connectors hold nothing between
commands; a command in flight holds its process's pipes.

So the held part grows with the hosts and the in-flight part with ``--forks``. At start the soft limits
are raised (up to the hard ones) to what the run needs; when even the hard limit cannot hold the
connections the run keeps open, it is refused before any host is touched (exit 2), naming the limit and
what to do; when it can hold them but not that many forks as well, the forks are capped and the reason
said. Running out of descriptors half-way would otherwise look like hosts failing at random.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Iterable
from dataclasses import dataclass

from diagnose.core.errors import ConfigError
from diagnose.core.hosts import Host

SSH_CONNECTIONS = frozenset({"ssh", "paramiko", "smart"})
HELD_FDS_SSH = 1
HELD_FDS_PROXY_COMMAND = 3  # the child's stdin and stdout pipes and its stderr file
IN_FLIGHT_FDS = 3  # a running batch: the channel's wake-up pipe (or a local process's pipes) + evidence
# Descriptors and threads the rest of the run needs beside the hosts: the interpreter, imports, results
# and report files, the benchmark launches' short-lived local files, the jump hosts' own logins.
SPARE_FDS = 256
SPARE_THREADS = 64


@dataclass(frozen=True)
class Need:
    """What a run's fan-out needs: descriptors held for the whole run and per fork, threads likewise."""

    hosts: int
    held_fds: int
    held_threads: int
    forks: int
    # Descriptors the process already holds when the plan is made (a run inside another program, a test
    # runner, holds hundreds): the limit is for the whole process, not for the fan-out alone.
    open_fds: int = 0

    def fds(self, forks: int) -> int:
        return self.open_fds + self.held_fds + IN_FLIGHT_FDS * forks + SPARE_FDS

    def threads(self, forks: int) -> int:
        return self.held_threads + forks + SPARE_THREADS


@dataclass(frozen=True)
class Plan:
    """The decision: soft limits to set (None: leave as is), the forks to use, what to tell the operator."""

    nofile: int | None
    nproc: int | None
    forks: int
    note: str | None


def need_of(hosts: Iterable[Host], forks: int, open_fds: int = 0) -> Need:
    """The fan-out's needs for ``hosts`` at ``forks`` (more forks than hosts are never used), in a process
    already holding ``open_fds`` descriptors."""
    held_fds = held_threads = count = 0
    for host in hosts:
        count += 1
        if host.connection in SSH_CONNECTIONS:
            held_threads += 1
            held_fds += HELD_FDS_SSH
            args = f"{host.vars.get('ansible_ssh_common_args') or ''} {host.vars.get('ansible_ssh_extra_args') or ''}"
            if "proxycommand" in args.lower():
                held_fds += HELD_FDS_PROXY_COMMAND
    return Need(count, held_fds, held_threads, max(1, min(forks, count)), open_fds)


def open_descriptors() -> int:
    """How many descriptors this process holds now (0 where /proc cannot say)."""
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 0


def _room(need: int, soft: int, hard: int) -> int | None:
    """The soft limit to set for ``need`` (None: the current one holds it)."""
    if soft == resource.RLIM_INFINITY or soft >= need:
        return None
    return need if hard == resource.RLIM_INFINITY else min(need, hard)


def plan_limits(need: Need, nofile: tuple[int, int], nproc: tuple[int, int]) -> Plan:
    """Pure: the soft limits and forks for ``need`` under (soft, hard) ``nofile`` and ``nproc``.

    ConfigError when the connections the run holds open (and one fork) cannot fit under a hard limit;
    fewer forks, with the reason, when they fit but the forks asked for do not.
    """
    forks, notes = need.forks, []
    for limits, cost, held, unit, where in (
        (nofile, IN_FLIGHT_FDS, need.fds(0), "open files", "ulimit -Hn, nofile"),
        (nproc, 1, need.threads(0), "threads", "ulimit -Hu, nproc"),
    ):
        hard = limits[1]
        if hard == resource.RLIM_INFINITY or held + cost * forks <= hard:
            continue
        if held + cost > hard:
            raise ConfigError(
                f"{need.hosts} hosts ({need.held_threads} over SSH) need about {held + cost} {unit} on this "
                f"controller (SSH connections stay open until the run ends) but the hard limit is {hard} "
                f"({where} in /etc/security/limits.conf): raise it, or run the hosts in parts with --limit"
            )
        fitting = (hard - held) // cost
        notes.append(
            f"--forks {forks} capped to {fitting}: {forks} forks need about {held + cost * forks} {unit} "
            f"and the hard limit is {hard} ({where})"
        )
        forks = fitting
    return Plan(
        nofile=_room(need.fds(forks), *nofile),
        nproc=_room(need.threads(forks), *nproc),
        forks=forks,
        note="; ".join(notes) or None,
    )


def make_room(hosts: list[Host], forks: int) -> Plan:
    """Raise this process's soft limits to what fanning out over ``hosts`` needs; the plan applied."""
    plan = plan_limits(
        need_of(hosts, forks, open_descriptors()),
        resource.getrlimit(resource.RLIMIT_NOFILE),
        resource.getrlimit(resource.RLIMIT_NPROC),
    )
    for kind, soft in ((resource.RLIMIT_NOFILE, plan.nofile), (resource.RLIMIT_NPROC, plan.nproc)):
        if soft is not None:
            resource.setrlimit(kind, (soft, resource.getrlimit(kind)[1]))
    return plan
