"""The ``srun`` connector: a Slurm node through a one-task step of the job that holds it.

Where compute nodes refuse SSH (only jobs run there), the host checks still reach every node of an
allocation: each script runs as ``srun --jobid J --overlap --nodes 1 --ntasks 1 --nodelist NODE
/bin/sh -c SCRIPT`` (``ansible_connection: srun``; the default for the nodes of an allocation, see
:mod:`diagnose.slurm.hosts`). ``--overlap`` lets it share the node with the benchmark's step and with the
other checks. The transport is a local program like ``local``'s shell, so it shares that connector's
streaming loop; batches, caps, the frozen-host watchdog, stopping by session (another step on the same
node runs the kill script) and files written through the exec stream come from the base class unchanged.

Variables: ``slurm_job_id`` (default ``$SLURM_JOB_ID``: the allocation diagnose runs in) and
``slurm_node`` (the node's Slurm name, default the host's name).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from diagnose.connectors.base import DEFAULT_CONNECT_TIMEOUT_S, ConnectError, Connection, Exec, Sink
from diagnose.connectors.local import stream_process
from diagnose.core.hosts import Host

# A step is created by slurmctld and started by slurmd: slower than an SSH login on a busy controller.
OPEN_TIMEOUT_S = 30.0


def step_argv(job: str, node: str, script: str) -> list[str]:
    """One task on ``node`` in job ``job`` running ``script``; srun's informational lines kept quiet."""
    return [
        "srun",
        f"--jobid={job}",
        "--overlap",
        "--nodes=1",
        "--ntasks=1",
        f"--nodelist={node}",
        "--quiet",
        "--export=ALL",
        "--job-name=diagnose-check",
        "/bin/sh",
        "-c",
        script,
    ]


class SrunConnection(Connection):
    """One node of a Slurm job (``slurm_node``, default the host name), reached by steps of that job."""

    def __init__(self, host: Host) -> None:
        super().__init__(host)
        self.node = host.vars.str("slurm_node") or host.name
        self.job = host.vars.str("slurm_job_id") or os.environ.get("SLURM_JOB_ID") or None
        self.connect_timeout = host.vars.float("diagnose_connect_timeout", None) or DEFAULT_CONNECT_TIMEOUT_S

    def open(self) -> None:
        """Check that a step reaches the node now: a quick ``true`` through srun."""
        if self.job is None:
            raise ConnectError(
                "ansible_connection=srun needs a Slurm allocation: run inside salloc or sbatch "
                "(diagnose run --slurm-submit), or set slurm_job_id"
            )
        result = self.run("true", timeout=max(self.connect_timeout, OPEN_TIMEOUT_S))
        if result.error:
            raise ConnectError(result.error)
        if result.timed_out:
            raise ConnectError(f"no step of job {self.job} started on {self.node} in time")
        if result.exit_code != 0:
            words = next((ln.strip() for ln in result.stderr.splitlines() if ln.strip()), "no error text")
            raise ConnectError(f"srun could not reach {self.node} in job {self.job}: {words[:300]}")

    def _execute(
        self, script: str, stdin: bytes | None, out: Sink, err: Sink, deadline: Callable[[], float]
    ) -> Exec:
        if self.job is None:
            return Exec(error="no Slurm job to start a step in (slurm_job_id, SLURM_JOB_ID)")
        return stream_process(step_argv(self.job, self.node, script), stdin, out, err, deadline)
