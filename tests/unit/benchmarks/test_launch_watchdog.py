"""A launch on a host the run lost stops itself: its watchdog ends every process of the launch once no poll
has renewed the lease, and otherwise leaves with the job or its folder. Real shells and processes."""

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


def _until(condition: Callable[[], object], seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def test_a_launch_nobody_polls_stops_itself_after_its_lease(tmp_path: Path) -> None:
    folder, token = tmp_path / "launch", "lease-test-unpolled"
    with _running(folder, token, lease_s=2):
        assert _until(lambda: _carrying(token), 5), "the job started"
        started = time.monotonic()
        assert _until(lambda: not _carrying(token), 8), "the job outlived its lease"
        assert time.monotonic() - started > 1.5, "not before the lease"
    # the job's shell writes rc after its ranks are gone: on a loaded machine a moment after the check above
    assert _until(lambda: (folder / "rc").is_file(), 5), "the stopped job's exit status"
    assert (folder / "rc").read_text().strip() == "137"
    said = (folder / "abandoned").read_text()
    assert "no poll from the run within its lease (2 s)" in said and "found=2" in said and "left=0" in said
    assert _until(lambda: not _watchdog(folder, token), 3), "the watchdog left after stopping the launch"


def test_before_its_first_poll_a_launch_gets_the_start_grace_on_top_of_its_lease(tmp_path: Path) -> None:
    """A launch over thousands of hosts starts them all before it polls any: the first lease is longer."""
    folder, token = tmp_path / "launch", "lease-test-grace"
    with _running(folder, token, lease_s=1, grace_s=4):
        time.sleep(3)
        assert _carrying(token), "within lease + grace the unpolled job runs on"
        assert _until(lambda: not _carrying(token), 8), "and ends once both have passed"


def test_polls_keep_a_launch_alive_and_removing_its_folder_ends_the_watchdog(tmp_path: Path) -> None:
    folder, token = tmp_path / "launch", "lease-test-polled"
    with _running(folder, token, lease_s=2):
        end = time.monotonic() + 5
        while time.monotonic() < end:
            subprocess.run(["sh", "-c", poll_script(str(folder), None)], check=True, timeout=5)
            time.sleep(0.5)
        assert _carrying(token), "polled every half second, the job must still run after 5 s"
        assert not (folder / "abandoned").exists()
        session = int((folder / "watchdog.pid").read_text())
        assert session in _watchdog(folder, token) and len(_in_session(session)) >= 1
        subprocess.run(["sh", "-c", remove_script(str(folder))], check=True, timeout=5)
        assert not folder.exists()
        assert _until(lambda: not _in_session(session), 1), "the watchdog and its sleep ended with the folder"


def test_the_watchdog_leaves_with_a_job_that_ends_and_a_stale_pid_file_harms_no_one(tmp_path: Path) -> None:
    folder, token = tmp_path / "launch", "lease-test-ends"
    _start(folder, token, "sleep 0.2", lease_s=60)
    assert _until(lambda: (folder / "rc").exists(), 5)
    assert _until(lambda: not _watchdog(folder, token), 3), "the watchdog left with the job"
    bystander = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        (folder / "watchdog.pid").write_text(f"{bystander.pid}\n")  # the pid reused by someone else
        subprocess.run(["sh", "-c", remove_script(str(folder))], check=True, timeout=5)
        assert bystander.poll() is None, "a process that does not name the folder is never signalled"
    finally:
        bystander.kill()
        bystander.wait()
