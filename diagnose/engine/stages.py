"""One `diagnose run`: inventory → per-host checks (fanned out) → cluster rules → benchmarks → results.

The data path of docs/contracts.md, in that order. Configuration is fully loaded and validated before
the first host is touched (a bad inventory exits 2 and runs nothing); from then on nothing a host does —
refusing us, hanging, dying — stops the others, and every result is on disk as soon as it exists. The
stages print nothing: they tell the caller's :class:`~diagnose.engine.reporter.Reporter`.
"""

from __future__ import annotations

import gc
import queue
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from diagnose.catalog.loading import Entry, load_catalog, select
from diagnose.connectors import (
    ConnectError,
    close_jump_hosts,
    connect,
    running_batch_hosts,
    stop_running_batches,
)
from diagnose.connectors.srun import StepResult
from diagnose.core.check import Check, ClusterCheck, Facts
from diagnose.core.hosts import Host
from diagnose.core.model import SEVERITY, CheckResult, HostRecord, Outcome
from diagnose.engine.evaluate import evaluate_check, evaluate_cluster, outcome_result
from diagnose.engine.host_batch import HostState, commands_of, judge_batch, mark_unreachable, save_evidence
from diagnose.engine.reporter import HOST_STAGE, Reporter
from diagnose.engine.results import ResultsStore
from diagnose.engine.step_stage import run_batches_in_steps, run_host_stage_in_steps, uses_steps

DEFAULT_FORKS = 32


def assess_host(
    host: Host,
    checks: list[Check],
    out_dir: Path,
    accept_unknown_host_keys: bool,
    known_hosts: str | None,
) -> HostState:
    """Connect, run every check command in one batch, judge each check. Never raises for host trouble."""
    state = HostState(host=host)
    record = HostRecord(name=host.name, address=host.address)
    state.record = record
    try:
        connection = connect(host, accept_unknown_host_keys, known_hosts)
        connection.open()
    except ConnectError as exc:
        mark_unreachable(state, checks, str(exc), f"{host.name} is unreachable: {exc}")
        return state
    state.connection = connection
    timeout_cap = host.vars.float("command_timeout_s", None)
    commands = commands_of(checks, host.vars)
    outputs = connection.run_batch(commands, timeout_cap=timeout_cap)
    judge_batch(state, checks, commands, outputs, out_dir)
    return state


def run_host_stage(
    hosts: list[Host],
    checks: list[Check],
    out_dir: Path,
    store: ResultsStore,
    forks: int,
    accept_unknown_host_keys: bool,
    known_hosts: str | None,
    reporter: Reporter | None = None,
    deadline: Callable[[], bool] | None = None,
) -> dict[str, HostState]:
    """Fan the host stage out over ``forks`` threads; results reach the store as each host finishes.

    Where every host is a Slurm node reached through srun, the stage runs as steps instead, one task per
    node (:mod:`diagnose.engine.step_stage`).
    """
    if uses_steps(hosts):
        return run_host_stage_in_steps(hosts, checks, out_dir, store, forks, reporter, deadline)
    # What is alive now (modules, the catalog, the inventory, the run's state) outlives the stage: out of
    # the cyclic collector's sight while the hosts' batches are judged, its full collections no longer walk
    # it again and again. Handed back after, so nothing stays out of its reach.
    with _collector_frozen():
        reporter = reporter or Reporter()
        for host in hosts:
            store.set_host(HostRecord(name=host.name, address=host.address))
        states: dict[str, HostState] = {}
        reporter.hosts_started(len(hosts))
        began = time.monotonic()
        # Hosts are handed on as each finishes, through a queue their futures fill: looking over every
        # pending future on each tick would cost the controller hosts x ticks at 16,384 hosts.
        finishing: queue.SimpleQueue[Future[HostState]] = queue.SimpleQueue()
        pool = ThreadPoolExecutor(max_workers=max(1, forks), thread_name_prefix="host")
        try:
            futures: dict[Future[HostState], Host] = {
                pool.submit(assess_host, host, checks, out_dir, accept_unknown_host_keys, known_hosts): host
                for host in hosts
            }
            for future in futures:
                future.add_done_callback(finishing.put)
            pending = set(futures)
            while pending:
                finished = _finished(finishing)
                for future in finished:
                    host = futures[future]
                    try:
                        state = future.result()
                    except Exception as exc:  # a bug must cost one host, never the run
                        state = HostState(
                            host=host, record=HostRecord(host.name, host.address, error=str(exc))
                        )
                        state.results.append(
                            CheckResult(
                                "host.reachable", host.name, "–", "ERROR", message=f"internal error: {exc}"
                            )
                        )
                    states[host.name] = state
                    assert state.record is not None
                    store.set_host(state.record)
                    store.add_checks(state.results)
                    reporter.host_done(host.name)
                pending.difference_update(finished)
                if deadline is not None and deadline():
                    for problem in stop_running_batches():
                        reporter.problem(f"time budget exhausted: {problem}")
                    for future in pending:
                        future.cancel()
                        host = futures[future]
                        store.add_check(
                            CheckResult(
                                "host.reachable", host.name, "–", "ERROR", message="time budget exhausted"
                            )
                        )
                    break
        except KeyboardInterrupt:  # cut short, not done: the reporter says what each host was still running
            reporter.stage_interrupted(HOST_STAGE, time.monotonic() - began)
            raise
        except BaseException:
            reporter.hosts_finished()
            raise
        else:
            reporter.hosts_finished()
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        store.flush(force=True)
        return {h.name: states[h.name] for h in hosts if h.name in states}  # inventory order: rank 0 first


@contextmanager
def _collector_frozen() -> Iterator[None]:
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _finished(
    finishing: queue.SimpleQueue[Future[HostState]], wait_s: float = 0.05
) -> list[Future[HostState]]:
    """The futures done since the last look: the first waited for up to ``wait_s``, the rest as queued."""
    try:
        finished = [finishing.get(timeout=wait_s)]
    except queue.Empty:
        return []
    while True:
        try:
            finished.append(finishing.get_nowait())
        except queue.Empty:
            return finished


def run_cluster_stage(entries: list[ClusterCheck], states: dict[str, HostState], store: ResultsStore) -> None:
    reachable = {name: s for name, s in states.items() if s.connection is not None}
    facts = {name: s.facts for name, s in reachable.items()}
    host_vars = {name: s.host.vars for name, s in reachable.items()}
    for entry in entries:
        store.add_checks(evaluate_cluster(entry, facts, host_vars))
    store.flush(force=True)


def split_catalog(entries: list[Entry]) -> tuple[list[Check], list[ClusterCheck]]:
    host_checks = [e for e in entries if isinstance(e, Check)]
    cluster_checks = [e for e in entries if isinstance(e, ClusterCheck)]
    return host_checks, cluster_checks


def selected_catalog(patterns: list[str]) -> tuple[list[Check], list[ClusterCheck]]:
    return split_catalog(select(load_catalog(), patterns))


def close_all(states: dict[str, HostState], reporter: Reporter | None = None) -> None:
    """Close every host's connection, then the bastion logins they shared (also those of hosts that
    never reached a state: an interrupted or budget-stopped host stage)."""
    for state in states.values():
        if state.connection is not None:
            try:
                state.connection.close()
            except Exception as exc:
                (reporter or Reporter()).problem(f"closing {state.host.name}: {exc}")
    close_jump_hosts()


def stop_remote_work(timeout: float = 10.0) -> tuple[list[str], list[str]]:
    """Stop everything this run started on any host — the host checks' batches and the benchmark
    launches — in parallel, within about ``timeout`` seconds: one line for each thing stopped, one for
    each that could not be (the second list empty: nothing is left)."""
    from diagnose.launchers.stopping import stop_live_launches

    checking = running_batch_hosts()
    with ThreadPoolExecutor(max_workers=2) as pool:
        batches = pool.submit(stop_running_batches, min(5.0, timeout))
        launches = pool.submit(stop_live_launches, timeout)
        problems, stopped = batches.result(), launches.result()
    lines = [f"the checks still running on {', '.join(checking)}"] if checking else []
    return lines + stopped.stopped, problems + stopped.problems


def run_benchmark_stage(
    plan: Any,
    states: dict[str, HostState],
    out_dir: Path,
    store: ResultsStore,
    deadline: Any,
    checks: list[Check] | None = None,
    reporter: Reporter | None = None,
) -> dict[str, dict[str, list[Facts]]]:
    """Collectives across the reachable hosts, over the connections the host stage opened; meanwhile the
    checks that judge under load sample the GPU hosts. Returns those samples, by host and check id. The
    extras and launches tell ``reporter`` their steps as they go."""
    from diagnose.benchmarks.shared_gpu import mark_shared, shared_hosts
    from diagnose.benchmarks.stage import BenchContext
    from diagnose.benchmarks.stage import run_benchmark_stage as run_stage
    from diagnose.engine.sampling import LoadSampler
    from diagnose.launchers.progress import Teller

    healthy = [s for s in states.values() if s.healthy]
    # Hosts where gpu.processes found compute processes diagnose did not start: what is measured there
    # is marked shared_gpu (diagnose/benchmarks/shared_gpu.py).
    shared = shared_hosts({s.host.name: s.facts for s in healthy})
    under_load = [c for c in checks or [] if c.judge_under_load is not None]
    sampled = [s.host for s in healthy if any(_has_gpus(s.facts.get(c.id)) for c in under_load)]
    remaining = deadline.remaining() if deadline is not None else float("inf")
    context = BenchContext(
        hosts=[s.host for s in healthy],
        connections={s.host.name: s.connection for s in healthy if s.connection is not None},
        facts={s.host.name: s.facts for s in healthy},
        plan=plan,
        out_dir=out_dir,
        run_id=str(store.run["id"]),
        emit_check=store.add_check,
        replace_check=store.replace_check,
        emit_benchmark=lambda entry: store.add_benchmark(mark_shared(entry, shared)),
        emit_record=lambda section, entry: store.add_record(section, mark_shared(entry, shared)),
        deadline=None if remaining == float("inf") else time.monotonic() + remaining,
        told=Teller(reporter),
    )
    with LoadSampler(sampled, context.connections, under_load) as sampler:
        run_stage(context)
    store.flush(force=True)
    return sampler.samples


def _has_gpus(facts: Facts | None) -> bool:
    return bool(facts and facts.get("gpus"))


def note_counters_on_slow_collectives(store: ResultsStore) -> None:
    """Join the fabric's error counters to the collectives: a collective below its range (or one that
    failed) names the hosts whose IB error counters moved while the benchmarks ran."""
    moved = []
    for row in store.document()["checks"]:
        observed = row.get("observed")
        if row["id"] != "ib.counters" or not isinstance(observed, dict) or not observed.get("delta"):
            continue
        ports = "; ".join(
            f"{port} " + ", ".join(f"{name} +{change}" for name, change in changes.items())
            for port, changes in observed["delta"].items()
        )
        moved.append(f"{row['host']} ({ports})")
    if moved:
        store.annotate_benchmarks(
            ("FAIL", "WARN"), f" IB error counters moved during the benchmarks on {'; '.join(moved)}."
        )


def _after_snapshot(
    state: HostState,
    checks: list[Check],
    out_dir: Path,
    samples: dict[str, list[Facts]],
    stepped: StepResult | None = None,
) -> list[CheckResult]:
    """One host's checks judged again on what changed since the host stage (and on the load samples);
    ``stepped``: the commands already ran as the host's task of a Slurm step."""
    host, connection = state.host, state.connection
    judged = [c for c in checks if c.id in state.facts]
    if connection is None or not judged:
        return []
    commands = commands_of(judged, host.vars)
    if stepped is not None:
        outputs = stepped.outputs
    else:
        outputs = connection.run_batch(commands, timeout_cap=host.vars.float("command_timeout_s", None))
    after_commands = {c.key: replace(c, key=f"{c.key}.after") for c in commands}
    evidence = {
        key: save_evidence(out_dir, host.name, after_commands[key], outputs[key]) for key in after_commands
    }
    first = {r.id: r for r in state.results}
    results = []
    for check in judged:
        before = first[check.id]
        keys = [c.key for c in check.host_commands(host.vars)]
        result, after = evaluate_check(check, outputs, host.vars, evidence[keys[0]])
        if after is None:
            result = replace(
                before, message=f"{before.message} (no snapshot after the run: {result.message})"
            )
        else:
            outcomes: list[Outcome] = []
            if check.judge_delta is not None:
                outcomes.append(
                    _safe_judge(check.id, check.judge_delta, state.facts[check.id], after, host.vars)
                )
            if check.judge_under_load is not None and samples.get(check.id):
                outcomes.append(_safe_judge(check.id, check.judge_under_load, samples[check.id], host.vars))
            if not outcomes:
                continue
            # The worse verdict stands; on a tie the one measured under load says more. A part that could
            # not be judged (no sample under load) is said, not dropped.
            outcome = max(outcomes, key=lambda o: (SEVERITY[o.status], o is outcomes[-1]))
            unjudged = [o.message for o in outcomes if o.status == "SKIP" and o is not outcome]
            if unjudged:
                outcome = replace(outcome, message=f"{outcome.message} ({'; '.join(unjudged)})")
            result = outcome_result(check, host.name, outcome, evidence[keys[0]])
        results.append(result)
    return results


def _safe_judge(check_id: str, judge: Callable[..., Outcome], *args: Any) -> Outcome:
    try:
        return judge(*args)
    except Exception as exc:  # a rule bug must cost one result, never the run
        return Outcome("ERROR", f"rule {check_id} failed: {type(exc).__name__}: {exc}")


def run_after_snapshot_stage(
    states: dict[str, HostState],
    checks: list[Check],
    out_dir: Path,
    store: ResultsStore,
    forks: int,
    samples: dict[str, dict[str, list[Facts]]] | None = None,
    reporter: Reporter | None = None,
) -> None:
    """Judge the counter checks on the change over the run: their commands run again on every host still
    connected (after the benchmarks), and each such check's host-stage result is replaced by the verdict
    on the difference — a link that flapped while the collectives ran is a FAIL even if it recovered.
    Slurm nodes reached by srun run them as one step per wave, as in the host stage."""
    delta_checks = [c for c in checks if c.judge_delta is not None or c.judge_under_load is not None]
    connected = [s for s in states.values() if s.connection is not None]
    if not delta_checks or not connected:
        return
    stepped: dict[str, StepResult] = {}
    if uses_steps([s.host for s in connected]):  # Slurm nodes: one step per wave, as the host stage
        batches = [
            (s.host, commands_of([c for c in delta_checks if c.id in s.facts], s.host.vars))
            for s in connected
        ]
        stepped = run_batches_in_steps([(host, commands) for host, commands in batches if commands], forks)
    with ThreadPoolExecutor(max_workers=max(1, min(forks, len(connected)))) as pool:
        futures = {
            pool.submit(
                _after_snapshot,
                s,
                delta_checks,
                out_dir,
                (samples or {}).get(s.host.name, {}),
                stepped.get(s.host.name),
            ): s
            for s in connected
        }
        for future, state in futures.items():
            try:
                results = future.result()
            except Exception as exc:  # a bug costs this host's second snapshot, never the run
                (reporter or Reporter()).problem(f"snapshot after the run on {state.host.name}: {exc}")
                continue
            for result in results:
                store.replace_check(result)
    store.flush(force=True)
