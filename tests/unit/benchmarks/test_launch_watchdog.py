"""A launch on a host the run lost stops itself: its watchdog ends every process of the launch once no poll
has renewed the lease, and otherwise leaves with the job or its folder. Real shells and processes.

The tests drive the watchdog's clock instead of waiting out a lease: its lease runs from the uptime in the
folder's ``alive`` file (a poll writes the host's uptime there), so a test writes the uptime of a poll long
ago. What they wait for are events: the job's processes gone, its files written, the watchdog's own looks at
its lease (one after each of its ``sleep 1``)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from diagnose.launchers.remote import detached_script, poll_script, remove_script
from diagnose.launchers.stopping import TOKEN_VAR


def _carrying(token: str) -> list[int]:
    """Pids whose environment carries the launch's token."""
    needle = f"{TOKEN_VAR}={token}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in environ.split(b"\0") and state != "Z":
            found.append(int(entry.name))
    return found


def _watchdog(folder: Path, token: str) -> list[int]:
    """Pids whose command line names the folder and that carry no token: the watchdog and its sleep."""
    found, job = [], set(_carrying(token))
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                named = str(folder).encode() in (entry / "cmdline").read_bytes()
                if named and int(entry.name) not in job:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _in_session(sid: int) -> list[int]:
    """Pids of session ``sid`` (the watchdog leads its own: its sleep is in it too)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split() if entry.name.isdigit() else []
        except OSError:
            continue
        if fields and fields[0] != "Z" and int(fields[3]) == sid:
            found.append(int(entry.name))
    return found


def _start(folder: Path, token: str, command: str, lease_s: int, grace_s: int = 0) -> None:
    script = detached_script(str(folder), token, command, {}, lease_s=lease_s, start_grace_s=grace_s)
    subprocess.run(["sh", "-c", script], check=True, timeout=10)


@contextmanager
def _running(folder: Path, token: str, lease_s: int, grace_s: int = 0) -> Iterator[None]:
    """A launch of ``sleep 300``, whatever the test found, killed afterwards."""
    _start(folder, token, "sleep 300", lease_s, grace_s)
    try:
        yield
    finally:
        for pid in _carrying(token):
            os.kill(pid, 9)


def _until(condition: Callable[[], object], seconds: float = 30) -> bool:
    """Whether ``condition`` came true within ``seconds``: a bound on a wait for an event, never a claim
    about how long the event takes."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def _uptime() -> int:
    """The clock the watchdog reads (whole seconds of /proc/uptime, as ``up`` in its shell)."""
    return int(float(Path("/proc/uptime").read_text().split()[0]))


def _last_poll(folder: Path, seconds_ago: int) -> None:
    """Set the watchdog's clock: the last poll renewed the lease ``seconds_ago`` seconds back."""
    (folder / "alive").write_text(f"{_uptime() - seconds_ago}\n")


def _looks(folder: Path, count: int) -> bool:
    """Wait until the watchdog has looked at its lease ``count`` more times and gone on: each look follows
    one ``sleep 1`` of its own, so the first sleep seen may predate what the test just wrote, and each
    further sleep seen is one look done after it. False if the watchdog stopped looking (it left)."""
    session = int((folder / "watchdog.pid").read_text())
    seen: set[int] = set()

    def another() -> bool:
        for pid in _in_session(session):
            try:
                if Path(f"/proc/{pid}/comm").read_text().strip() == "sleep":
                    seen.add(pid)
            except OSError:
                continue
        return len(seen) > count

    return _until(another)


def test_a_launch_nobody_polls_stops_itself_after_its_lease(tmp_path: Path) -> None:
    folder, token = tmp_path / "launch", "lease-test-unpolled"
    with _running(folder, token, lease_s=60):
        assert _until(lambda: _carrying(token) and (folder / "watchdog.pid").is_file()), "the job started"
        _last_poll(folder, 50)
        assert _looks(folder, 2) and _carrying(token), "50 s after the last poll of a 60 s lease it runs on"
        assert not (folder / "abandoned").exists()
        _last_poll(folder, 61 + 5)
        assert _until(lambda: not _carrying(token)), "the job outlived its lease"
    # the job's shell writes rc after its ranks are gone: on a loaded machine a moment after the check above
    assert _until(lambda: (folder / "rc").is_file()), "the stopped job's exit status"
    assert (folder / "rc").read_text().strip() == "137"
    said = (folder / "abandoned").read_text()
    assert "no poll from the run within its lease (60 s)" in said and "found=2" in said and "left=0" in said
    assert _until(lambda: not _watchdog(folder, token)), "the watchdog left after stopping the launch"


def test_before_its_first_poll_a_launch_gets_the_start_grace_on_top_of_its_lease(tmp_path: Path) -> None:
    """A launch over thousands of hosts starts them all before it polls any: the first lease is longer."""
    folder, token = tmp_path / "launch", "lease-test-grace"
    before = _uptime()
    with _running(folder, token, lease_s=1, grace_s=120):
        assert _until(lambda: _carrying(token) and (folder / "watchdog.pid").is_file()), "the job started"
        start = int((folder / "alive").read_text())
        assert before + 120 <= start <= _uptime() + 120, "the first lease runs from the start plus the grace"
        assert _looks(folder, 3) and _carrying(token), "past its 1 s lease, within the grace, it runs on"
        assert not (folder / "abandoned").exists()
        (folder / "alive").write_text(f"{start - 120 - 2}\n")  # the grace and the lease both passed
        assert _until(lambda: not _carrying(token)), "and ends once both have passed"


def test_polls_keep_a_launch_alive_and_removing_its_folder_ends_the_watchdog(tmp_path: Path) -> None:
    folder, token = tmp_path / "launch", "lease-test-polled"
    with _running(folder, token, lease_s=60):
        assert _until(lambda: _carrying(token) and (folder / "watchdog.pid").is_file()), "the job started"
        _last_poll(folder, 55)
        before = _uptime()
        subprocess.run(["sh", "-c", poll_script(str(folder), None)], check=True, timeout=5)
        assert before <= int((folder / "alive").read_text()) <= _uptime(), "the poll renewed the lease"
        assert _looks(folder, 2) and _carrying(token), "the job runs on after the poll"
        assert not (folder / "abandoned").exists()
        session = int((folder / "watchdog.pid").read_text())
        assert session in _watchdog(folder, token) and len(_in_session(session)) >= 1
        subprocess.run(["sh", "-c", remove_script(str(folder))], check=True, timeout=5)
        assert not folder.exists()
        assert _until(lambda: not _in_session(session)), "the watchdog and its sleep ended with the folder"


def test_the_watchdog_leaves_with_a_job_that_ends_and_a_stale_pid_file_harms_no_one(tmp_path: Path) -> None:
    folder, token = tmp_path / "launch", "lease-test-ends"
    _start(folder, token, "true", lease_s=60)
    assert _until(lambda: (folder / "rc").exists())
    assert _until(lambda: not _watchdog(folder, token)), "the watchdog left with the job"
    bystander = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        (folder / "watchdog.pid").write_text(f"{bystander.pid}\n")  # the pid reused by someone else
        subprocess.run(["sh", "-c", remove_script(str(folder))], check=True, timeout=5)
        assert bystander.poll() is None, "a process that does not name the folder is never signalled"
    finally:
        bystander.kill()
        bystander.wait()
