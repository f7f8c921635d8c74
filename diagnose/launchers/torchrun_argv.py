"""What starting torchrun needs, whoever starts it: the host's Python, a free rendezvous port, its arguments.

Shared by the launchers that start torchrun — over each host's connection
(:mod:`diagnose.launchers.torchrun`) or as the tasks of one Slurm step
(:mod:`diagnose.launchers.srun`) — so both start the same program the same way.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from diagnose.core.hosts import Host
from diagnose.core.model import CommandOutput
from diagnose.launchers.base import LaunchError, LaunchSpec
from diagnose.shipped import collective_bench

#: The name the program gets in the launch's folder on each host; torchrun starts it by that name.
PROGRAM_NAME = "program.py"


def bench_python(host: Host) -> str:
    """The Python with torch on ``host``: ``bench_python``, else the host's interpreter."""
    return host.vars.str("bench_python") or host.python


def free_port_script(python: str) -> str:
    """Shell that prints a TCP port free on the host right now (for rank 0's rendezvous store)."""
    probe = "import socket; s = socket.socket(); s.bind(('', 0)); print(s.getsockname()[1])"
    return f"{shlex.quote(python)} -c {shlex.quote(probe)}"


def free_port(host: Host, probe: CommandOutput) -> int:
    """The port :func:`free_port_script` printed on ``host``; a LaunchError naming the host otherwise."""
    if not probe.ok or not probe.stdout.strip().isdigit():
        raise LaunchError(
            f"could not run {bench_python(host)} on {host.name} to pick a rendezvous port: "
            f"{(probe.error or probe.stderr or probe.stdout).strip()[:300]}",
            [host.name],
        )
    return int(probe.stdout.strip())


def torchrun_args(nodes: int, node_rank: str, nproc: int, addr: str, port: int) -> list[str]:
    """torchrun's options for a static rendezvous: no restarts, failures noticed within a second.
    ``node_rank`` is text so that a launcher may pass a shell expansion (``$i``) it quotes itself."""
    return [
        f"--nnodes={nodes}",
        f"--node-rank={node_rank}",
        f"--nproc-per-node={nproc}",
        f"--master-addr={addr}",
        f"--master-port={port}",
        "--max-restarts=0",
        "--monitor-interval=1",
    ]


def shipped_files(spec: LaunchSpec) -> dict[str, str]:
    """What a launch copies into its folder on every host, name -> text: the program as ``program.py``
    (the collective benchmark unless ``spec.program`` names another) and ``spec.beside`` under their own
    names, which the program imports from its own folder."""
    program = spec.program or Path(collective_bench.__file__)
    files = {PROGRAM_NAME: program.read_text(encoding="utf-8")}
    for path in spec.beside:
        files[path.name] = path.read_text(encoding="utf-8")
    return files


def program_args(spec: LaunchSpec, folder: str) -> list[str]:
    """The program's own arguments plus where it writes its progress, its NCCL logs and its files."""
    args = [*spec.program_args, "--results", f"{folder}/results.jsonl", "--log-dir", f"{folder}/logs"]
    if spec.fetch_dir:
        args += ["--files-dir", f"{folder}/{spec.fetch_dir}"]
    return args
