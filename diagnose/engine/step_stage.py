"""The host stage as Slurm steps: every node's batch as one task of a single ``srun`` step per wave.

Where every host is a Slurm node reached through srun (``--slurm`` inside an allocation, or
``ansible_connection: srun``), the scheduler is the distributed engine: instead of three steps per node
(a reachability ``true``, a session probe, the batch), the nodes whose batches are the same run it as
ONE step with a task per node (:class:`diagnose.connectors.srun.SrunStep`), in waves of at most
``slurm_step_nodes`` nodes (default 2,048), the waves side by side. Each node's outputs come back framed
as over SSH and go through the same evidence, parsers and judges (:mod:`diagnose.engine.host_batch`).

A node whose task never started FAILs host.reachable saying so; one that stopped making progress, or that
Slurm lost under the step, is named with its unfinished checks as ERRORs, like a host that froze over SSH.
The step is cancelled (``scancel JOB.STEP``) once only such nodes are left, when the run's time budget
runs out, and on Ctrl-C. The second snapshot of the counters after the benchmarks runs the same way
(:func:`run_batches_in_steps`); the benchmark is one step of its own (:mod:`diagnose.launchers.srun`),
and anything else reaches a node through its srun connection, a step each time.
``slurm_step_checks: false`` keeps a step per node for both.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from diagnose.connectors.srun import (
    CANCEL_WAIT_S,
    DEFAULT_STEP_NODES,
    OPEN_TIMEOUT_S,
    SrunConnection,
    SrunStep,
    StepResult,
    cancel_running_steps,
    job_of,
    node_of,
)
from diagnose.core.check import Check, Command
from diagnose.core.hosts import Host
from diagnose.core.model import HostRecord
from diagnose.core.streams import DEFAULT_MAX_OUTPUT_BYTES
from diagnose.engine.host_batch import HostState, commands_of, judge_batch, mark_unreachable
from diagnose.engine.reporter import HOST_STAGE, Reporter
from diagnose.engine.results import ResultsStore

#: Host variable: False keeps the host stage on a step per node and command batch.
STEP_VAR = "slurm_step_checks"
#: Host variable: the most nodes one step of the host stage holds.
WAVE_VAR = "slurm_step_nodes"
#: Why a step is cancelled when the run's time budget runs out.
OUT_OF_TIME = "the run's time budget ran out"


def uses_steps(hosts: list[Host]) -> bool:
    """Whether the host stage runs as Slurm steps: every host reached through srun, none opting out."""
    return bool(hosts) and all(h.connection == "srun" and h.vars.bool(STEP_VAR, True) for h in hosts)


@dataclass
class Wave:
    """Hosts whose batches are the same, in the same job: one step."""

    job: str | None
    hosts: list[Host]
    commands: list[Command]
    timeout_cap: float | None
    max_output_bytes: int
    start_timeout: float

    @property
    def nodes(self) -> list[str]:
        return [node_of(h) for h in self.hosts]


def plan_waves(hosts: list[Host], checks: list[Check]) -> list[Wave]:
    """The steps of the host stage, in inventory order: see :func:`waves_of`."""
    return waves_of([(host, commands_of(checks, host.vars)) for host in hosts])


def waves_of(batches: list[tuple[Host, list[Command]]]) -> list[Wave]:
    """Each host with its batch, as steps: hosts grouped by job, batch and the settings that shape it,
    each group cut into waves of ``slurm_step_nodes`` distinct nodes."""
    groups: dict[tuple[object, ...], list[Host]] = {}
    for host, commands in batches:
        values = host.vars
        key = (
            job_of(host),
            tuple(commands),
            values.float("command_timeout_s", None),
            values.int("max_output_bytes", None) or DEFAULT_MAX_OUTPUT_BYTES,
            max(values.float("diagnose_connect_timeout", None) or 0.0, OPEN_TIMEOUT_S),
            values.int(WAVE_VAR, None) or DEFAULT_STEP_NODES,
        )
        groups.setdefault(key, []).append(host)
    waves = []
    for (job, commands, cap, limit, start, size), members in groups.items():
        current: list[Host] = []
        later: list[Host] = []  # a second host on a node already in the wave: a step holds a node once
        for host in members:
            if len(current) == size:
                waves.append(Wave(job, current, list(commands), cap, limit, start))
                current = []
            (later if node_of(host) in {node_of(h) for h in current} else current).append(host)
        if current:
            waves.append(Wave(job, current, list(commands), cap, limit, start))
        waves += [Wave(job, [host], list(commands), cap, limit, start) for host in later]
    return waves


def run_wave(
    wave: Wave, checks: list[Check], out_dir: Path, stop: Callable[[], str | None]
) -> list[HostState]:
    """One step over the wave's nodes, then each host judged from its task's output."""
    results, out_of_time = run_step(wave, stop)
    return [
        host_state(host, results[host.name], wave.commands, checks, out_dir, out_of_time)
        for host in wave.hosts
    ]


def run_step(wave: Wave, stop: Callable[[], str | None] | None = None) -> tuple[dict[str, StepResult], bool]:
    """The wave's step: each host's result by host name, and whether the run's time budget cut it."""
    step = SrunStep(
        wave.job, wave.nodes, wave.commands, wave.timeout_cap, wave.max_output_bytes, wave.start_timeout
    )
    results = step.run(stop)
    return {host.name: results[node_of(host)] for host in wave.hosts}, step.cancelled == OUT_OF_TIME


def run_batches_in_steps(batches: list[tuple[Host, list[Command]]], forks: int) -> dict[str, StepResult]:
    """Each host's batch, as steps (waves side by side, at most ``forks`` at once): the second snapshot's
    commands after the benchmarks, a step per wave instead of a step per node. Ctrl-C cancels them."""
    waves = waves_of(batches)
    if not waves:
        return {}
    results: dict[str, StepResult] = {}
    pool = ThreadPoolExecutor(max_workers=max(1, min(forks, len(waves))), thread_name_prefix="step")
    futures = [pool.submit(run_step, wave) for wave in waves]
    try:
        for future in concurrent.futures.as_completed(futures):
            results.update(future.result()[0])
    except BaseException:
        cancel_running_steps("diagnose was interrupted")
        concurrent.futures.wait(futures, timeout=CANCEL_WAIT_S + 10)
        raise
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return results


def host_state(
    host: Host,
    result: StepResult,
    commands: list[Command],
    checks: list[Check],
    out_dir: Path,
    out_of_time: bool = False,
) -> HostState:
    """What the host stage learnt about one node from its task of the step. A node the run's time budget
    cut off is no fault of the node: its host.reachable is an ERROR saying so, as on the per-host path."""
    state = HostState(host=host, record=HostRecord(name=host.name, address=host.address))
    if not result.started and not out_of_time:
        reason = result.error or "did not start"
        mark_unreachable(state, checks, reason, f"{host.name} was not reached by the checks step: {reason}")
        return state
    if result.started:
        state.connection = SrunConnection(host)  # later stages' own steps; nothing is run to open it
    judge_batch(state, checks, commands, result.outputs, out_dir)
    if out_of_time and result.error:
        for outcome in state.results:
            if outcome.id == "host.reachable":
                outcome.status = "ERROR"
                outcome.message = f"time budget exhausted before the checks ended on {host.name}"
    return state


def run_host_stage_in_steps(
    hosts: list[Host],
    checks: list[Check],
    out_dir: Path,
    store: ResultsStore,
    forks: int,
    reporter: Reporter | None = None,
    deadline: Callable[[], bool] | None = None,
) -> dict[str, HostState]:
    """The host stage of :func:`diagnose.engine.stages.run_host_stage` through steps; results reach the
    store as each wave ends. Ctrl-C cancels every step in flight before it propagates."""
    reporter = reporter or Reporter()
    for host in hosts:
        store.set_host(HostRecord(name=host.name, address=host.address))
    reporter.hosts_started(len(hosts))
    began = time.monotonic()
    waves = plan_waves(hosts, checks)

    def stop() -> str | None:
        return OUT_OF_TIME if deadline is not None and deadline() else None

    states: dict[str, HostState] = {}
    pool = ThreadPoolExecutor(max_workers=max(1, min(forks, len(waves))), thread_name_prefix="step")
    futures = {pool.submit(run_wave, wave, checks, out_dir, stop): wave for wave in waves}
    try:
        for future in concurrent.futures.as_completed(futures):
            for state in future.result():
                states[state.host.name] = state
                assert state.record is not None
                store.set_host(state.record)
                store.add_checks(state.results)
                reporter.host_done(state.host.name)
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):  # cut short, not done: said before the steps are cancelled
            reporter.stage_interrupted(HOST_STAGE, time.monotonic() - began)
        else:
            reporter.hosts_finished()
        cancel_running_steps("diagnose was interrupted")
        concurrent.futures.wait(futures, timeout=CANCEL_WAIT_S + 10)
        raise
    else:
        reporter.hosts_finished()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    store.flush(force=True)
    return {h.name: states[h.name] for h in hosts if h.name in states}
