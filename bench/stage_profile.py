"""Where the controller's CPU goes in one host stage: what ``bench/fanout.py --profile N`` prints.

Two views, each of its own untimed run:

- by part, without a profiler: the CPU clock of the thread doing each part of a host's path (connect, log in,
  the batch read, evidence files, each check's parse and judge, the results store), summed over the hosts,
  and the CPU of every thread by kind, read from /proc before the connections close. Waiting costs nothing
  on a thread's CPU clock, so this is what each part costs, including its GIL hand-offs and system calls;
- by function, under a cProfile per thread timed by that thread's CPU clock: the profiler inflates pure
  Python code far more than system calls and C, so it says which functions, not how much each weighs.
"""

from __future__ import annotations

import cProfile
import gc
import io
import os
import pstats
import re
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from diagnose.connectors.base import Connection
from diagnose.connectors.ssh import SSHConnection
from diagnose.engine import host_batch
from diagnose.engine import stages as engine
from diagnose.engine.results import ResultsStore

_CLOCK_TICK = os.sysconf("SC_CLK_TCK")


class PartClock:
    """CPU seconds of the calling thread inside each wrapped function, by part name, over all threads."""

    def __init__(self) -> None:
        self.seconds: defaultdict[str, float] = defaultdict(float)
        self._lock = threading.Lock()

    def add(self, part: str, seconds: float) -> None:
        with self._lock:
            self.seconds[part] += seconds

    def wrap(self, owner: Any, name: str, part: str | Callable[..., str]) -> Callable[[], None]:
        """Replace ``owner.name`` with a timed call; the undo. ``part`` may name the part from the call's
        arguments (a check's id)."""
        original = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.thread_time()
            try:
                return original(*args, **kwargs)
            finally:
                self.add(part if isinstance(part, str) else part(*args), time.thread_time() - started)

        setattr(owner, name, timed)
        return lambda: setattr(owner, name, original)


@contextmanager
def parts_timed() -> Iterator[PartClock]:
    """The host stage's parts timed while inside; nested parts are counted in their callers too."""
    clock = PartClock()
    undo = [
        clock.wrap(engine, "assess_host", "host thread: assess_host, all of it"),
        clock.wrap(engine, "connect", "  connection object (ssh_config, login values)"),
        clock.wrap(SSHConnection, "open", "  open: TCP, key exchange, host key, auth"),
        clock.wrap(Connection, "run_batch", "  batch: exec, read, frame"),
        clock.wrap(engine, "judge_batch", "  judge_batch, all of it"),
        clock.wrap(host_batch, "save_evidence", "    evidence files"),
        clock.wrap(host_batch, "evaluate_check", lambda check, *_: f"    check {check.id}"),
        clock.wrap(host_batch, "fold_into_root_causes", "    root-cause folding"),
        clock.wrap(host_batch, "environment_from_facts", "    environment record"),
        clock.wrap(host_batch, "identity_from_facts", "    identity record"),
        clock.wrap(ResultsStore, "add_checks", "main thread: store.add_checks (rows, JSON text)"),
        clock.wrap(ResultsStore, "set_host", "main thread: store.set_host"),
        clock.wrap(ResultsStore, "_write", "store: results.json writes"),
    ]
    collecting = threading.local()

    def collector(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collecting.started = time.thread_time()
        elif hasattr(collecting, "started"):
            part = f"cyclic GC, any thread, generation {info['generation']}"
            clock.add(part, time.thread_time() - collecting.started)

    gc.callbacks.append(collector)
    try:
        yield clock
    finally:
        gc.callbacks.remove(collector)
        for step in reversed(undo):
            step()


def thread_cpu() -> dict[int, tuple[str, float]]:
    """Each live thread of this process: its kind (its name, digits dropped) and CPU seconds so far."""
    names = {thread.native_id: thread.name for thread in threading.enumerate()}
    threads = {}
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/stat") as stat:
                fields = stat.read().rpartition(")")[2].split()
        except OSError:
            continue
        kind = re.sub(r"[-_ ]?\d+", "", names.get(int(task), "other"))
        threads[int(task)] = (kind, (int(fields[11]) + int(fields[12])) / _CLOCK_TICK)
    return threads


def thread_cpu_since(before: dict[int, tuple[str, float]]) -> dict[str, float]:
    """CPU seconds by kind of thread since ``before`` (:func:`thread_cpu`), of the threads alive now."""
    kinds: defaultdict[str, float] = defaultdict(float)
    for tid, (kind, seconds) in thread_cpu().items():
        kinds[kind] += seconds - before.get(tid, (kind, 0.0))[1]
    return dict(kinds)


def print_parts(clock: PartClock, threads: dict[str, float], hosts: int, cpu: float) -> None:
    """The part table: CPU ms per host, largest first within the order the parts nest."""
    print(f"\ncontroller CPU by part, {hosts} hosts, no profiler: {1000 * cpu / hosts:.1f} ms/host in all")
    for kind, seconds in sorted(threads.items(), key=lambda item: -item[1]):
        print(f"  thread kind {kind:<46} {1000 * seconds / hosts:>8.1f}")
    checks = {k: v for k, v in clock.seconds.items() if k.startswith("    check ")}
    for part, seconds in clock.seconds.items():
        if part not in checks:
            print(f"  {part:<58} {1000 * seconds / hosts:>8.2f}")
    print(
        f"    checks' parse + judge, {len(checks)} checks{'':<28} {1000 * sum(checks.values()) / hosts:>8.2f}"
    )
    for part, seconds in sorted(checks.items(), key=lambda item: -item[1])[:12]:
        print(f"  {part:<58} {1000 * seconds / hosts:>8.2f}")


def profiled(work: Callable[[], object], hosts: int, top: int) -> None:
    """Run ``work`` with a cProfile in every thread (this one, and each started meanwhile: the pool's forks,
    paramiko's transports), timed by that thread's CPU clock; print the CPU per host by kind of thread and
    the ``top`` functions by own and by cumulative CPU."""
    profiles: list[tuple[str, cProfile.Profile]] = []
    lock = threading.Lock()

    def start(*_: object) -> None:
        profile = cProfile.Profile(time.thread_time)
        with lock:
            profiles.append((threading.current_thread().name, profile))
        profile.enable()  # takes this thread's profile hook over from here

    main = cProfile.Profile(time.thread_time)
    profiles.append((threading.current_thread().name, main))
    threading.setprofile(start)
    main.enable()
    try:
        work()
    finally:
        main.disable()
        threading.setprofile(None)
    kinds: defaultdict[str, list[float]] = defaultdict(list)
    for name, profile in profiles:
        profile.create_stats()
        kinds[re.sub(r"[-_ ]?\d+", "", name)].append(sum(entry[2] for entry in profile.stats.values()))
    print(f"\nthe same under cProfile, {hosts} hosts: CPU ms/host by thread kind (inflated by the profiler)")
    for kind, cpu in sorted(kinds.items(), key=lambda item: -sum(item[1])):
        print(f"  {kind:<40} {len(cpu):>4} threads {1000 * sum(cpu) / hosts:>8.1f}")
    merged = pstats.Stats(profiles[0][1], stream=io.StringIO())
    for _, profile in profiles[1:]:
        merged.add(profile)
    for order in ("tottime", "cumulative"):
        text = io.StringIO()
        merged.stream = text
        merged.sort_stats(order).print_stats(top)
        body = text.getvalue()
        print(f"top {top} by {order} (seconds for all {hosts} hosts):")
        print(body[body.find("   ncalls") :].rstrip())
