"""The bed's hosts as diagnose sees them (inventory variables for its SSH connections), and what runs inside
them: the processes a test waits for or expects gone after a run stopped.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from diagnose.core.hosts import Host
from diagnose.core.vars import Vars
from tests.support.nshost import pids_in
from tests.support.testbed import TestBed, TestHost


def hosts_of(bed: TestBed, per_host: dict[str, dict[str, Any]] | None = None, **extra: Any) -> list[Host]:
    """The bed's hosts as diagnose sees them: ``extra`` variables on every host, ``per_host`` on some."""
    common = {
        "ansible_user": "root",
        "ansible_ssh_private_key_file": str(bed.client_key),
        "diagnose_known_hosts_file": str(bed.known_hosts),
        "ansible_python_interpreter": sys.executable,
        "bench_startup_timeout_s": 120,
        **extra,
    }
    return [
        Host(
            h.name,
            vars=Vars(
                {
                    **common,
                    "ansible_host": h.address,
                    "ansible_port": h.port,
                    **(per_host or {}).get(h.name, {}),
                },
                h.name,
            ),
        )
        for h in bed.hosts.values()
    ]


def bench_processes(bed: TestBed, host: TestHost) -> list[int]:
    """Pids of torchrun or benchmark processes inside one test host (its own pid namespace)."""
    listing = bed.ssh(host, "ps -eo pid=,args=").stdout
    return [
        int(line.split()[0])
        for line in listing.splitlines()
        if "torch.distributed.run" in line or "program.py" in line
    ]


def command_lines(host: TestHost, needle: str) -> list[str]:
    """Command lines inside one test host's pid namespace that contain ``needle``, read from /proc (no SSH
    session of its own, so a frozen or busy host answers too)."""
    found = []
    for pid in pids_in({namespace_of(host)}):
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if needle in args:
            found.append(args)
    return found


def namespace_of(host: TestHost) -> str:
    """The host's pid namespace; an error where the bed could not capture it: an empty one would make every
    "nothing left running" check pass without looking at a single process."""
    if not host.pid_namespace:
        raise AssertionError(f"host {host.name!r}: the bed did not capture its pid namespace")
    return host.pid_namespace


def wait_until(condition: Callable[[], object], limit: float, what: str) -> None:
    """Poll ``condition`` every 0.1 s until it is true; fail naming ``what`` after ``limit`` seconds."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")
