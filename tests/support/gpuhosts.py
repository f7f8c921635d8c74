"""One machine as N cluster nodes: the sshd test bed's hosts with networks of their own, each with a share
of the machine's GPUs, for running diagnose across hosts on one lent GPU machine.

Each host is a test-bed host (tests/support/testbed.py) with ``own_network``: its own hostname, an ``eth0`` on
the bed's switch (so NCCL counts separate nodes and goes between them over its network transport, NET/Socket
over the veth), a private /tmp, and its share of the GPUs: by default every ``/dev/nvidia<N>`` with the share
named in its login's ``CUDA_VISIBLE_DEVICES`` (``--gpu-mode cvd``); with ``--gpu-mode nodes`` only its own
``/dev/nvidia<N>`` plus the driver's control nodes, as a container runtime passes GPUs (on the lent H200 VMs
CUDA and NVML still reached the other GPUs that way). ``--share-gpus`` makes more hosts than GPUs, one GPU
each in turn, for the cross-node searches that need three hosts or more on a two-GPU machine. The machine's
login, Python and torch serve every host. On CPU machines (CI) the hosts get no GPUs and the same code runs.

    python -m tests.support.gpuhosts --hosts 2 --workdir /tmp/gh -- \\
        python3 -m diagnose run -i {inventory} -o /tmp/gh/run

starts the hosts, writes ``{inventory}`` (an Ansible inventory a user would write for such nodes:
``bench_master_addr`` each host's own address, ``-v/--var`` for more), runs the command, stops every host
and writes ``harness.json``: the hosts (name, address, GPUs, port), the command's exit status and wall time,
what was done to the hosts while it ran (``--at``), and every process still alive in each host afterwards
other than its sshd: at once (``left_running_at_exit``) and once a launch's lease has passed
(``left_running``; ``gone_after_s``: when the first look's processes were gone): a run that left something
behind shows it there.

``--shape HOST=RATE`` limits what HOST sends to RATE (``tc`` token bucket on its ``eth0``, e.g. ``2gbit``):
a slow NIC or a bad cable on one node, before the command starts.

``--at 'PATTERN=ACTION'`` acts when a line of the command's output matches the regular expression PATTERN:
``kill-sshd:HOST`` kills every sshd of HOST (the listener and the sessions; what the sessions started keeps
running), ``sigint``, ``sigterm`` or ``sigkill`` signal the command (``sigkill``: a controller that dies
without stopping anything, as the OOM killer or a scheduler's hard limit does it); ``+SECONDS`` after the
action word waits first (``'all_reduce.*2 ranks=sigint+5'``); ``@WORD`` instead waits until every host runs
a process whose command line holds WORD (``'all_reduce.*2 ranks=sigkill@program.py'``: once the ranks are
up on all hosts, however long a loaded machine takes to start them).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from diagnose.launchers.remote import LEASE_S
from tests.support.netns import HOST_INTERFACE
from tests.support.nshost import pids_in
from tests.support.testbed import HostSpec, TestBed, TestHost, bed_program

#: The driver's nodes every GPU host needs besides its own /dev/nvidia<N>.
CONTROL_DEVICES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")
#: NVLink SHARP (multicast) stays off on lent machines; a host's login carries these as a user's would.
MULTICAST_OFF = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


def machine_gpus(dev: Path = Path("/dev")) -> list[int]:
    """Minor numbers of the machine's GPU nodes (/dev/nvidia0, /dev/nvidia1, ...), ascending."""
    return sorted(int(p.name[6:]) for p in dev.glob("nvidia*") if re.fullmatch(r"nvidia\d+", p.name))


def split(gpus: list[int], hosts: int, shared: bool = False) -> list[list[int]]:
    """Equal consecutive shares (GPUs 0-1 to the first of two hosts, 2-3 to the second); refuses an uneven
    split, which would make hosts of different shapes. ``shared``: more hosts than GPUs, one GPU each in
    turn (four hosts on GPUs 0, 1, 0, 1), for cross-node work whose bottleneck is the hosts' network
    (their GPU checks would measure each other)."""
    if hosts < 1:
        raise ValueError("at least one host")
    if shared:
        if not gpus or hosts % len(gpus):
            raise ValueError(f"{hosts} hosts do not share {len(gpus)} GPUs evenly")
        return [[gpus[i % len(gpus)]] for i in range(hosts)]
    if len(gpus) % hosts:
        raise ValueError(f"{len(gpus)} GPUs do not split evenly over {hosts} hosts")
    size = len(gpus) // hosts
    return [gpus[i * size : (i + 1) * size] for i in range(hosts)]


def host_specs(
    shares: list[list[int]],
    *,
    prefix: str = "node",
    env: dict[str, str] | None = None,
    ip_tool: str | None = None,
    mode: str = "cvd",
) -> list[HostSpec]:
    """One HostSpec per share: own network, private /tmp, its GPUs. ``mode`` "nodes": only the share's
    /dev/nvidia<N> in the host, as a container runtime passes GPUs (``NVIDIA_VISIBLE_DEVICES`` says which);
    "cvd": every GPU node, the share named by ``CUDA_VISIBLE_DEVICES`` in the login (for a driver whose
    tools enumerate GPUs a host cannot open). ``ip_tool`` (a wrapper script's text) puts ``ip`` on hosts
    of a machine without iproute2, as cluster nodes have it."""
    if mode not in ("nodes", "cvd"):
        raise ValueError(f"unknown GPU mode {mode!r}")
    every = sorted({n for share in shares for n in share})
    specs = []
    for index, share in enumerate(shares):
        login = {**MULTICAST_OFF, **(env or {})}
        devices: tuple[str, ...] = ()
        if share:
            listed = ",".join(map(str, share))
            login["NVIDIA_VISIBLE_DEVICES" if mode == "nodes" else "CUDA_VISIBLE_DEVICES"] = listed
            shown = share if mode == "nodes" else every
            devices = (*(f"nvidia{n}" for n in shown), *CONTROL_DEVICES)
        specs.append(
            HostSpec(
                f"{prefix}{index + 1}",
                own_network=True,
                private_tmp=True,
                devices=devices,
                env=login,
                tools={"ip": ip_tool} if ip_tool else {},
            )
        )
    return specs


def inventory(bed: TestBed, hosts: list[TestHost], path: Path, extra: dict[str, object]) -> Path:
    """The inventory a user writes for these nodes: SSH to the published ports, and per host the address the
    other nodes reach it at (``bench_master_addr``, where a launch that host leads meets: the straggler
    search's pair tests are led by other hosts than the first)."""
    return bed.write_inventory(
        path,
        hosts,
        {"ansible_python_interpreter": sys.executable, **extra},
        host_vars={h.name: {"bench_master_addr": h.network_address} for h in hosts},
    )


@dataclass
class Action:
    """One ``--at`` rule: when a line matches ``pattern``, wait ``delay`` s or until every host runs a process
    naming ``running``, then do ``what``."""

    pattern: re.Pattern[str]
    what: str
    host: str | None = None
    delay: float = 0.0
    running: str | None = None
    done_at: float | None = None
    detail: str = ""

    @classmethod
    def parse(cls, text: str) -> Action:
        pattern, sep, action = text.rpartition("=")
        found = re.fullmatch(
            r"(kill-sshd:([\w.-]+)|sigint|sigterm|sigkill)(?:\+(\d+(?:\.\d+)?)|@(\S+))?", action
        )
        if not sep or not found:
            raise argparse.ArgumentTypeError(
                f"--at {text!r}: want PATTERN=kill-sshd:HOST|sigint|sigterm|sigkill[+S|@WORD]"
            )
        what = "kill-sshd" if found.group(2) else found.group(1)
        return cls(re.compile(pattern), what, found.group(2), float(found.group(3) or 0), found.group(4))


@dataclass
class Outcome:
    rc: int | None = None
    wall_s: float = 0.0
    actions: list[dict[str, Any]] = field(default_factory=list)


def sshd_pids(host: TestHost) -> list[int]:
    """The host's sshd processes (listener and sessions), by their command name."""
    if host.pid_namespace is None:
        raise RuntimeError(f"host {host.name}: its pid namespace was not captured; cannot find its sshd")
    found = []
    for pid in pids_in({host.pid_namespace}):
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if comm.startswith("sshd"):
            found.append(pid)
    return found


def leftovers(host: TestHost) -> list[str]:
    """Command lines of every process alive in the host but its own (the namespace's shell, sshd)."""
    if host.pid_namespace is None:
        raise RuntimeError(f"host {host.name}: its pid namespace was not captured; cannot tell what is left")
    own = host.dir / "init.sh"
    left = []
    for pid in pids_in({host.pid_namespace}):
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if comm.startswith("sshd") or str(own) in args:
            continue
        left.append(f"{pid} {args}")
    return left


def follow_leftovers(
    hosts: list[TestHost], first: dict[str, list[str]], wait_s: float = LEASE_S + 15
) -> tuple[dict[str, list[str]], float | None]:
    """What is still running after up to ``wait_s`` more seconds, and after how many seconds (from the first
    look) nothing was (None: something stayed, or nothing was there to begin with)."""
    left, started = first, time.monotonic()
    while any(left.values()) and time.monotonic() - started < wait_s:
        time.sleep(2)
        left = {h.name: leftovers(h) for h in hosts}
    gone = round(time.monotonic() - started, 1) if any(first.values()) and not any(left.values()) else None
    return left, gone


def run_command(argv: list[str], actions: list[Action], hosts: dict[str, TestHost], log: Path) -> Outcome:
    """Run ``argv``, copying its output to our stdout and ``log``, doing each action when its line shows."""
    outcome = Outcome()
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)

    def act(action: Action) -> None:
        word = action.running
        while word is not None and not all(any(word in p for p in leftovers(h)) for h in hosts.values()):
            if proc.poll() is not None:
                action.detail = f"not done: the command ended before every host ran {word}"
                outcome.actions.append({"at_s": None, "action": action.what, "detail": action.detail})
                return
            time.sleep(0.1)
        time.sleep(action.delay)
        action.done_at = round(time.monotonic() - start, 1)
        if action.what == "kill-sshd":
            host = hosts[action.host or ""]
            pids = sshd_pids(host)
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):  # a session that ended meanwhile
                    os.kill(pid, signal.SIGKILL)
            action.detail = f"killed {len(pids)} sshd process(es) of {host.name}"
        else:
            proc.send_signal(getattr(signal, action.what.upper()))
            action.detail = f"sent {action.what.upper()} to the command"
        outcome.actions.append({"at_s": action.done_at, "action": action.what, "detail": action.detail})

    assert proc.stdout is not None
    with open(log, "w") as copy:
        for line in proc.stdout:
            sys.stdout.write(line)
            copy.write(line)
            for action in actions:
                if action.done_at is None and action.detail == "" and action.pattern.search(line):
                    action.detail = "pending"
                    threading.Thread(target=act, args=(action,), daemon=True).start()
    outcome.rc = proc.wait()
    outcome.wall_s = round(time.monotonic() - start, 1)
    return outcome


def shape(host: TestHost, rate: str) -> str:
    """Limit what ``host`` sends on its eth0 to ``rate`` (tc's token bucket filter); returns tc's listing."""
    if not re.fullmatch(r"\d+(\.\d+)?[kmg]?bit", rate):
        raise ValueError(f"--shape rate {rate!r}: want e.g. 2gbit or 500mbit")
    enter = ["nsenter", f"--net=/proc/{host.pid}/ns/net"]
    tc = bed_program("tc")
    root = [*enter, tc, "qdisc", "add", "dev", HOST_INTERFACE, "root", "tbf", "rate", rate]
    subprocess.run([*root, "burst", "4mb", "latency", "100ms"], check=True, capture_output=True, text=True)
    listing = subprocess.run(
        [*enter, tc, "qdisc", "show", "dev", HOST_INTERFACE], capture_output=True, text=True
    )
    return listing.stdout.strip()


def ip_wrapper() -> str | None:
    """A login tool ``ip`` for hosts of a machine without iproute2: the bed's bundled one (toolbundle)."""
    bundle = os.environ.get("DIAGNOSE_TESTBED_BIN", "")
    if bundle and not any(Path(d, "ip").exists() for d in ("/usr/sbin", "/usr/bin", "/sbin", "/bin")):
        return f'#!/bin/sh\nexec {os.path.join(bundle, "ip")} "$@"\n'
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.support.gpuhosts", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--hosts", type=int, default=2)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--prefix", default="node", help="host names: PREFIX1, PREFIX2, ...")
    parser.add_argument(
        "-v", "--var", action="append", default=[], help="inventory variable KEY=VALUE (YAML)"
    )
    parser.add_argument(
        "--env", action="append", default=[], help="login environment KEY=VALUE of every host"
    )
    parser.add_argument("--host-env", action="append", default=[], help="HOST:KEY=VALUE for one host's login")
    parser.add_argument("--at", action="append", default=[], type=Action.parse)
    parser.add_argument("--gpu-mode", choices=("nodes", "cvd"), default="cvd")
    parser.add_argument(
        "--share-gpus", action="store_true", help="more hosts than GPUs: one GPU each, in turn"
    )
    parser.add_argument("--shape", action="append", default=[], help="HOST=RATE: tc rate limit on its eth0")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ({inventory} is replaced)")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    extra = {key: yaml.safe_load(value) for key, _, value in (v.partition("=") for v in args.var)}
    env = dict(item.partition("=")[::2] for item in args.env)
    specs = host_specs(
        split(machine_gpus(), args.hosts, args.share_gpus) if machine_gpus() else [[]] * args.hosts,
        prefix=args.prefix,
        env=env,
        ip_tool=ip_wrapper(),
        mode=args.gpu_mode,
    )
    by_name = {s.name: s for s in specs}
    named = [i.partition(":")[0] for i in args.host_env] + [i.partition("=")[0] for i in args.shape]
    unknown = sorted({n for n in [*named, *(a.host for a in args.at if a.host)] if n not in by_name})
    if unknown:
        parser.error(f"no host named {', '.join(unknown)} (the hosts: {', '.join(by_name)})")
    for item in args.host_env:
        name, _, pair = item.partition(":")
        key, _, value = pair.partition("=")
        by_name[name].env = {**by_name[name].env, key: value}
    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {"interface": HOST_INTERFACE}
    with TestBed(workdir / "bed") as bed:
        hosts = bed.add_many(specs)
        path = inventory(bed, hosts, workdir / "inventory.yaml", extra)
        record["hosts"] = [
            {
                "name": h.name,
                "address": h.network_address,
                "port": h.port,
                "gpus": h.spec.env.get("NVIDIA_VISIBLE_DEVICES")
                or h.spec.env.get("CUDA_VISIBLE_DEVICES", ""),
                "env": dict(h.spec.env),
            }
            for h in hosts
        ]
        started = {h.name: h for h in hosts}
        record["shaped"] = {}
        for item in args.shape:
            name, _, rate = item.partition("=")
            record["shaped"][name] = shape(started[name], rate)
        outcome = Outcome()
        if command:
            argv_ = [word.replace("{inventory}", str(path)) for word in command]
            outcome = run_command(argv_, args.at, started, workdir / "command.log")
        # Left running is judged as a user would look: a moment after the command returned, not at once
        # (a rank SIGKILLed as the run ended takes its GPU context down in a second or so). What is still
        # there is followed for a lease and a bit more: on a host the run lost, the launch's watchdog is
        # what stops it.
        time.sleep(2)
        record.update(rc=outcome.rc, wall_s=outcome.wall_s, actions=outcome.actions)
        record["left_running_at_exit"] = {h.name: leftovers(h) for h in hosts}
        record["left_running"], record["gone_after_s"] = follow_leftovers(
            hosts, record["left_running_at_exit"]
        )
        (workdir / "harness.json").write_text(json.dumps(record, indent=2) + "\n")
    print(
        f"gpuhosts: rc={outcome.rc} wall={outcome.wall_s}s left_running="
        f"{ {k: len(v) for k, v in record['left_running'].items()} } -> {workdir / 'harness.json'}"
    )
    return 0 if outcome.rc in (None, 0) else int(outcome.rc)


if __name__ == "__main__":
    sys.exit(main())
