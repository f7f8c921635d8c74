"""One command on the first host: the program itself on one node, mpirun starting its ranks across nodes.

The launch of :mod:`diagnose.benchmarks.nccl_tests`. Only the first host runs something diagnose started,
so only it is polled: the command's output (stdout and stderr together, in order) is the progress file,
turned into progress records by the ``decode`` the caller passes (it knows what the program prints). The
other hosts of an mpirun job are in the stop list, where every process carrying the launch's token is
killed: :func:`mpirun_argv` passes the token to every rank with ``-x``. The rest of the life (follow,
stop, collect) is :mod:`diagnose.launchers.base`'s.

Open MPI's options are used (``-np``, ``-H host:slots``, ``-x VAR``); reaching the other hosts is the
launcher's business, set up by the site as for any MPI job.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from diagnose.core.hosts import Host
from diagnose.launchers.base import Launch, LaunchError, LaunchSpec
from diagnose.launchers.remote import detached_script, remote_dir
from diagnose.launchers.stopping import TOKEN_VAR

#: Open MPI's tag on a rank's output line (``--tag-output``): not part of what the rank printed.
MPI_TAG = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:")
#: A line of NCCL's own log (NCCL_DEBUG=INFO), interleaved with the program's output.
NCCL_LINE = re.compile(r"\bNCCL (?:INFO|WARN)\b")
#: What ``-x NAME`` can forward: an environment variable's name, nothing a shell would expand.
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def mpirun_argv(
    mpirun: str,
    hosts: Sequence[str],
    slots: int,
    mpi_args: Sequence[str],
    env: Mapping[str, str],
    forward: Iterable[str],
    program: Sequence[str],
) -> list[str]:
    """``mpirun -np <hosts × slots> -H host:slots,... <mpi_args> -x ... <program>``.

    ``env`` is passed with ``-x K=V``, then the variables named in ``forward`` (the first host's settings:
    ranks started by mpirun get its environment, not their host's login) and the launch token with
    ``-x K``, so that every rank on every host has them and the launch can find them again to stop them.
    """
    passed = [word for key, value in env.items() for word in ("-x", f"{key}={value}")]
    names = sorted({n for n in forward if n not in env and n != TOKEN_VAR and ENV_NAME.fullmatch(n)})
    passed += [word for name in [*names, TOKEN_VAR] for word in ("-x", name)]
    placement = ",".join(f"{host}:{slots}" for host in hosts)
    return [mpirun, "-np", str(len(hosts) * slots), "-H", placement, *mpi_args, *passed, *program]


class MpirunLaunch(Launch):
    """One process tree on the first host (the program, or mpirun and its ranks); ``others`` are the
    other hosts of an mpirun job, ``evidence`` the name its output gets under ``raw/<first host>/``."""

    progress_file = "out.txt"

    def __init__(
        self,
        spec: LaunchSpec,
        command: str,
        *,
        runner: str,
        others: Sequence[Host],
        evidence: str,
        decode: Callable[[list[str]], list[dict[str, Any]]],
    ) -> None:
        super().__init__(spec)
        self.command = command
        self.runner = runner
        self.others = list(others)
        self.evidence = evidence
        self._decoder = decode
        for index, host in enumerate(self.others, start=1):
            self.folders[host.name] = remote_dir(spec.run_id, spec.tag, index)
        self.outcome.rank_hosts = {}  # NCCL's log names the hosts of its ranks itself

    def start(self) -> None:
        """Start the command on the first host; mpirun, if that is the command, starts the others."""
        host = self.hosts[0]
        folder = self.folders[host.name]
        script = detached_script(folder, self.token, self.command, self.spec.env, merge_stderr=True)
        result = self._run(host, script)
        if not result.ok:
            if result.error:
                self.lost[host.name] = result.error
            detail = (result.error or result.stderr or result.ended).strip()[:300]
            raise LaunchError(f"could not start {self.runner} on {host.name}: {detail}", [host.name])

    def decode(self, lines: list[str]) -> list[dict[str, Any]]:
        """Progress records from the command's output, as the caller's ``decode`` reads them."""
        return self._decoder(lines)

    def stop_targets(self) -> list[Host]:
        """The first host and, for mpirun, the others: its ranks run there, carrying the token."""
        return [*self._reachable(), *(h for h in self.others if h.name not in self.lost)]

    def place(self, folder: Path, name: str, filename: str, suffix: str) -> Path:
        """The output is the evidence and, holding NCCL's INFO lines, the log the transport is read from."""
        if filename != "out.txt":
            return super().place(folder, name, filename, suffix)
        path = folder / self.evidence
        self.outcome.logs[0] = path
        self.outcome.evidence[f"{name}:{self.evidence}"] = str(path.relative_to(self.spec.out_dir))
        return path

    def failure_detail(self) -> str:
        """The last lines of the output that are neither NCCL's log nor the program's table: the error."""
        log = self.outcome.logs.get(0)
        if log is None or not log.exists():
            return ""
        lines = []
        for raw in log.read_text(errors="replace").splitlines():
            line = MPI_TAG.sub("", raw).strip()
            if line and not NCCL_LINE.search(line) and not line.startswith("#") and not line[0].isdigit():
                lines.append(line)
        return " | ".join(lines[-3:])[-400:]
