"""torchrun on every host: the benchmark program started over each host's own connection.

The launch of :mod:`diagnose.benchmarks.stage` with ``benchmarks.tool: torch``. Per host:

1. copy ``program.py`` and the files it imports from its folder (``common.py``) with ``put_text`` into the
   launch's folder on that host;
2. start ``{python} -m torch.distributed.run --nnodes N --node-rank i ...`` detached (see
   :mod:`diagnose.launchers.base` for the token that finds torchrun's workers again, and for the rest of
   the life: follow, stop, collect);
3. rank 0 writes the program's JSON progress lines (the default ``results.jsonl``) and every rank its
   NCCL log into ``logs/``, which :meth:`~diagnose.launchers.base.Launch.collect` brings home as
   ``<out>/raw/<host>/nccl-rank<N>.log``.

Variables: ``bench_python`` (per host) the Python with torch (default: the host's Python);
``bench_master_addr`` / ``bench_master_port`` the rendezvous address and port (default: the first
host's address, a free port found there).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from diagnose.core.hosts import Host
from diagnose.core.model import CommandOutput
from diagnose.launchers import torchrun_argv
from diagnose.launchers.base import (
    Launch,
    LaunchError,
    LaunchOutcome,
    LaunchSpec,
    run_launch,
)
from diagnose.launchers.remote import detached_script
from diagnose.launchers.srun import SrunLaunch, uses_srun
from diagnose.launchers.torchrun_argv import (
    PROGRAM_NAME,
    bench_python,
    free_port,
    free_port_script,
    shipped_files,
)
from diagnose.parsers.torchrun_failure import rank_failure


def start_script(
    folder: str,
    token: str,
    python: str,
    torchrun_args: list[str],
    program_args: list[str],
    env: Mapping[str, str],
) -> str:
    """Shell that starts torchrun detached in its own session and returns at once."""
    command = " ".join(
        [
            shlex.quote(python),
            "-m",
            "torch.distributed.run",
            *map(shlex.quote, torchrun_args),
            f'"$0/{PROGRAM_NAME}"',
            *map(shlex.quote, program_args),
        ]
    )
    return detached_script(folder, token, command, env)


class TorchrunLaunch(Launch):
    """One torchrun job: a torchrun agent per host, ``spec.nproc`` ranks under each."""

    runner = "torchrun"

    def _master(self) -> tuple[str, int]:
        """The rendezvous address and port: ``bench_master_*``, else the first host's address and a free port
        found there; on one node the loopback."""
        first = self.hosts[0]
        port = first.vars.int("bench_master_port", None)
        if port is None:
            port = free_port(first, self._run(first, free_port_script(bench_python(first))))
        if len(self.hosts) == 1:
            return "127.0.0.1", port
        return first.vars.str("bench_master_addr") or first.address, port

    def start(self) -> None:
        """Copy the program to every host and start torchrun there, all hosts at once."""
        spec = self.spec
        addr, port = self._master()
        files = shipped_files(spec)

        def begin(host: Host) -> CommandOutput:
            node = self.hosts.index(host)
            folder = self.folders[host.name]
            for name, text in files.items():
                spec.connections[host.name].put_text(f"{folder}/{name}", text)
            torchrun = torchrun_argv.torchrun_args(len(self.hosts), str(node), spec.nproc, addr, port)
            args = torchrun_argv.program_args(spec, folder)
            env = {**spec.env, **spec.host_env.get(host.name, {})}
            script = start_script(folder, self.token, bench_python(host), torchrun, args, env)
            return self._run(host, script)

        results = self._each(begin, self.hosts)
        broken = {n: r for n, r in results.items() if not r.ok}
        if broken:
            self.lost.update({n: r.error for n, r in broken.items() if r.error})
            detail = "; ".join(
                f"{n}: {(r.error or r.stderr or r.ended).strip()[:200]}" for n, r in broken.items()
            )
            raise LaunchError(f"could not start the benchmark: {detail}", sorted(broken))

    def failure_detail(self) -> str:
        """Per host whose torchrun failed, the first failed rank's own exception (torchrun's banner names
        the rank but not the cause), else the last lines of its stderr."""
        parts = []
        for name in self.outcome.failed_hosts:
            err = self.outcome.evidence.get(f"{name}:err.txt")
            if err is None:
                continue
            text = (self.spec.out_dir / err).read_text(errors="replace")
            parts.append(f"{name}: " + rank_failure(text))
        return "; ".join(parts)


def launch(spec: LaunchSpec) -> LaunchOutcome:
    """Run one torchrun launch to its end and always clean up after it (see :func:`run_launch`).

    Hosts whose ``bench_launcher`` is ``srun`` (the default for the nodes of a Slurm allocation) get
    torchrun started as the tasks of one Slurm step instead (:mod:`diagnose.launchers.srun`).
    """
    return run_launch(SrunLaunch(spec) if uses_srun(spec.hosts) else TorchrunLaunch(spec))
