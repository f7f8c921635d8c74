"""Fan-out bench: the per-host stage over 64 loopback sshd hosts, timed three ways in one run.

1. diagnose's host stage (connect, one batched round trip of every check command, parse, judge, write);
2. ansible-playbook with the same commands as separate `shell` tasks and `-f 64` (ansible-core is
   installed into this bench's own virtual environment, never a project dependency);
3. the floor: one combined command per host over Fabric, nothing else.

Targets (issue 2): diagnose <= 1.3 x the floor, and >= 20 x faster than ansible-playbook.

Every host is a healthy 8x H100 node of tests/support/hostkit.py. Its Python interpreter for the torch probe is a
fake that prints the probe's output captured on a lent H200 machine: a real `import torch` costs about
1.5 CPU-seconds per host, the same for all three methods, and on this 2-core machine 64 of them would
measure torch's import time rather than the orchestration the bench compares.

    python3 bench/fanout.py [--hosts 64] [--repeat 3] [--skip-ansible] [--without-node-health]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402
from fabric import Connection  # noqa: E402

from diagnose.config.playbook import load_playbook  # noqa: E402
from diagnose.engine import stages as engine  # noqa: E402
from diagnose.engine.results import ResultsStore  # noqa: E402
from diagnose.targets.loading import InventoryFiles  # noqa: E402
from diagnose.targets.resolve import resolve_hosts  # noqa: E402
from diagnose.targets.sources import HostContext  # noqa: E402
from tests.support.hostkit import captured, healthy_h100  # noqa: E402
from tests.support.testbed import HostSpec, Reply, TestBed, memlock_ceiling_kib  # noqa: E402

ANSIBLE_VENV = ROOT / "bench" / ".venv-ansible"
PROBE_PYTHON = "bench-python"


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


def time_diagnose(hosts, checks, workdir: Path, forks: int) -> tuple[float, int]:
    out = Path(tempfile.mkdtemp(dir=workdir, prefix="diagnose-"))
    store = ResultsStore(out / "results.json", {"id": "bench"})
    started = time.perf_counter()
    states = engine.run_host_stage(hosts, checks, out, store, forks, False, None, show_progress=False)
    elapsed = time.perf_counter() - started
    engine.close_all(states)
    failed = sum(1 for c in store.checks if c["status"] in ("FAIL", "ERROR"))
    return elapsed, failed


def time_floor(bed: TestBed, combined: str, forks: int) -> float:
    """One Fabric connection and one command per host: what any SSH-based tool must at least pay."""

    def one(host) -> None:
        connection = Connection(
            host.address,
            user=host.user,
            port=host.port,
            connect_kwargs={
                "key_filename": [str(bed.client_key)],
                "look_for_keys": False,
                "allow_agent": False,
            },
        )
        connection.client.load_host_keys(str(bed.known_hosts))
        try:
            connection.run(combined, hide=True, warn=True, in_stream=False)
        finally:
            connection.close()

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=forks) as pool:
        list(pool.map(one, bed.hosts.values()))
    return time.perf_counter() - started


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
    parser.add_argument("--hosts", type=int, default=64)
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of diagnose and of the floor (median kept)"
    )
    parser.add_argument("--skip-ansible", action="store_true")
    parser.add_argument(
        "--without-node-health", action="store_true", help="leave the node-health checks (section H) out"
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="fanout-") as tmp, TestBed(Path(tmp)) as bed:
        workdir = Path(tmp)
        started = time.perf_counter()
        bed.add_many([bench_host(f"node{i:02d}") for i in range(1, args.hosts + 1)])
        print(f"started {args.hosts} sshd hosts in {time.perf_counter() - started:.1f} s", file=sys.stderr)
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
        hosts = resolve_hosts([InventoryFiles(inventory)], HostContext(playbook))
        checks, _ = engine.selected_catalog(playbook.checks)
        if args.without_node_health:  # the catalog as it was before the node-health checks
            checks = [c for c in checks if c.checklist != "H"]
        commands = [c.script for c in engine.commands_of(checks, hosts[0].vars)]
        combined = " ; ".join(f"( {c} )" for c in commands)

        diagnose_times, floor_times, failed = [], [], 0
        for _ in range(args.repeat):
            elapsed, failed = time_diagnose(hosts, checks, workdir, args.hosts)
            diagnose_times.append(elapsed)
            floor_times.append(time_floor(bed, combined, args.hosts))
        diag, floor = statistics.median(diagnose_times), statistics.median(floor_times)
        ansible = (
            None if args.skip_ansible else time_ansible(ansible_inventory, commands, workdir, args.hosts)
        )

    print(f"\nper-host stage, {args.hosts} hosts, {len(commands)} commands each, forks {args.hosts}")
    print(f"{'method':<34}{'seconds':>9}{'vs floor':>10}")
    print(f"{'floor (1 combined cmd, Fabric)':<34}{floor:>9.2f}{1.0:>10.2f}")
    print(f"{'diagnose host stage':<34}{diag:>9.2f}{diag / floor:>10.2f}")
    if ansible is not None:
        print(f"{'ansible-playbook -f ' + str(args.hosts):<34}{ansible:>9.2f}{ansible / floor:>10.2f}")
    print()
    ok_floor = diag <= 1.3 * floor
    print(f"diagnose / floor    = {diag / floor:.2f}  (target <= 1.30) {'PASS' if ok_floor else 'MISS'}")
    if ansible is not None:
        speedup = ansible / diag
        print(f"ansible / diagnose  = {speedup:.1f}  (target >= 20)   {'PASS' if speedup >= 20 else 'MISS'}")
    if failed:
        print(f"note: {failed} FAIL/ERROR results in the last diagnose run (healthy hosts expected none)")
    print(
        f"runs: diagnose {', '.join(f'{t:.2f}' for t in diagnose_times)}; floor {', '.join(f'{t:.2f}' for t in floor_times)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
