"""Ctrl-C stops every batch in flight (``stop_running_batches``), including one whose session the controller
has not read yet: a batch that began a moment before the stop, or whose reader thread is behind on a loaded
controller. That second case once left a hung ``nvidia-bug-report.sh`` running until its 300 s timeout.

Real shells through :class:`LocalConnection`; a lagging reader is one whose deadline is not consulted (so the
session it has received is not read) until the test lets it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from diagnose.connectors.base import Exec, Sink, stop_running_batches
from diagnose.connectors.local import LocalConnection
from diagnose.core.check import Command
from diagnose.core.hosts import Host


class LaggingReader(LocalConnection):
    """Receives output as usual but looks at its deadline (where a batch learns its session) only once
    ``caught_up`` is set."""

    def __init__(self, host: Host) -> None:
        super().__init__(host)
        self.caught_up = threading.Event()

    def _execute(
        self, script: str, stdin: bytes | None, out: Sink, err: Sink, deadline: Callable[[], float]
    ) -> Exec:
        far = time.monotonic() + 120

        def lagging() -> float:
            return deadline() if self.caught_up.is_set() else far

        return super()._execute(script, stdin, out, err, lagging)


def hang(pid_file: Path) -> Command:
    return Command("hang", f"echo $$ > {pid_file}; exec sleep 600", timeout=600)


def start(connection: LocalConnection, pid_file: Path) -> tuple[threading.Thread, dict[str, Any]]:
    done: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: done.update(connection.run_batch([hang(pid_file)])))
    thread.start()
    deadline = time.monotonic() + 30
    while not (pid_file.exists() and pid_file.read_text().strip()):
        assert time.monotonic() < deadline, "the batch never started"
        time.sleep(0.05)
    return thread, done


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_batch_whose_session_is_known_is_stopped_at_once(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    thread, done = start(LocalConnection(Host("n1")), pid_file)
    time.sleep(1.5)  # the reader has woken (at most every 0.5 s) and read the session
    started = time.monotonic()
    assert stop_running_batches(timeout=5) == []
    thread.join(timeout=10)
    assert not thread.is_alive() and time.monotonic() - started < 10
    assert gone(int(pid_file.read_text()))
    assert not done["hang"].ok


def test_a_batch_whose_session_was_not_read_yet_stops_itself_once_it_is(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    connection = LaggingReader(Host("n2"))
    thread, done = start(connection, pid_file)
    problems: list[str] = []
    stopper = threading.Thread(target=lambda: problems.extend(stop_running_batches(timeout=20)))
    stopper.start()
    time.sleep(0.5)
    assert stopper.is_alive(), "the stop returned without waiting for the batch it could not reach"
    connection.caught_up.set()
    stopper.join(timeout=30)
    thread.join(timeout=30)
    assert problems == [] and not thread.is_alive()
    assert gone(int(pid_file.read_text()))
    assert done["hang"].error == "stopped with the rest of the run (interrupted, or its time budget spent)"


def test_a_batch_that_never_answers_is_named_when_the_stop_gives_up(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    connection = LaggingReader(Host("n3"))
    thread, _ = start(connection, pid_file)
    try:
        assert stop_running_batches(timeout=0.5) == [
            "could not stop the checks on n3: they had not yet answered when the run was stopped"
        ]
    finally:
        connection.caught_up.set()  # it stops itself now, as the earlier stop asked
        thread.join(timeout=30)
    assert gone(int(pid_file.read_text()))


@pytest.fixture(autouse=True)
def _no_batch_left() -> Any:
    yield
    assert stop_running_batches(timeout=5) == []
