"""The ``local`` connector: this machine through ``/bin/sh`` (``ansible_connection: local``)."""

from __future__ import annotations

import os
import selectors
import subprocess
import threading
import time
from collections.abc import Callable
from typing import IO

from diagnose.connectors.base import Connection, Exec, Sink, kill_session_script


class LocalConnection(Connection):
    """This machine, through a local shell (``ansible_connection: local``)."""

    def open(self) -> None:
        return None

    def _execute(
        self, script: str, stdin: bytes | None, out: Sink, err: Sink, deadline: Callable[[], float]
    ) -> Exec:
        return stream_process(["/bin/sh", "-c", script], stdin, out, err, deadline)


def stream_process(
    argv: list[str], stdin: bytes | None, out: Sink, err: Sink, deadline: Callable[[], float]
) -> Exec:
    """Run ``argv`` (never through a shell), stream both outputs to the sinks, give up at ``deadline()``.

    Shared by the connectors whose transport is a local program (``/bin/sh`` here, ``kubectl exec``):
    the program leads a session of its own, so Ctrl-C on the terminal is ours to act on, and giving up
    kills that whole session. A program that cannot start is an ``Exec`` with ``error`` set.
    """
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        return Exec(error=f"cannot start {argv[0]}: {exc.strerror or exc}")
    if stdin is not None and proc.stdin is not None:
        threading.Thread(target=_feed_and_close, args=(proc.stdin, stdin), daemon=True).start()
    assert proc.stdout is not None and proc.stderr is not None
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ, out)
    selector.register(proc.stderr, selectors.EVENT_READ, err)
    open_streams = 2
    try:
        while open_streams:
            wait = deadline() - time.monotonic()
            if wait <= 0:
                _kill_local_session(proc.pid)
                proc.wait()
                return Exec(timed_out=True)
            for key, _ in selector.select(timeout=min(wait, 0.5)):
                data = os.read(key.fd, 65536)
                if data:
                    key.data(data)
                else:
                    selector.unregister(key.fileobj)
                    open_streams -= 1
        return Exec(exit_code=proc.wait())
    finally:
        selector.close()
        proc.stdout.close()
        proc.stderr.close()


def _feed_and_close(pipe: IO[bytes], data: bytes) -> None:
    try:
        pipe.write(data)
        pipe.close()
    except OSError:
        pass  # the script ended without reading its input


def _kill_local_session(session: int) -> None:
    subprocess.run(["/bin/sh", "-c", kill_session_script(session)], capture_output=True, timeout=10)
