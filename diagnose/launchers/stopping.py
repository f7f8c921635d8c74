"""Stopping a launch: the shell that ends every process carrying its token, and the stop of every launch an
interrupt (Ctrl-C, SIGTERM) left running.

A stop must end whatever the launch started, whatever process group or session each process chose
(torchrun puts each rank in a session of its own), within seconds even where the ranks ignore SIGTERM (a
rank deep inside an NCCL collective may not return to Python for minutes), verify that nothing is left,
and say what it stopped. :func:`kill_script` does that on one host over any connection (ssh, local,
kubectl exec, a Slurm node's srun); :func:`stop_live_launches` does it for every launch at once and
removes their folders. :mod:`diagnose.launchers.base` registers each launch here while it runs.
"""

from __future__ import annotations

import shlex
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from diagnose.core.units import counted

#: Seconds the launch's processes get to end on SIGTERM, then to be gone after SIGKILL.
TERM_GRACE_S = 2
KILL_WAIT_S = 2
#: Every process of a launch carries this variable (the launch's token): how stop() finds them all.
TOKEN_VAR = "DIAGNOSE_BENCH_TOKEN"


def kill_script(token: str) -> str:
    """Stop every process carrying the token, SIGTERM then SIGKILL, within a bounded time; say what it did.

    The token, not a process group or session, names the launch: torchrun puts each rank in a session of
    its own. The processes are found once with one ``grep`` over every ``/proc/<pid>/environ`` (a loop
    forking per process took seconds per pass on a big node, and a count-bounded grace of such passes
    outlived the caller's timeout, so SIGKILL never came), then followed by pid through ``/proc/<pid>/stat``
    only. Both waits end on the clock (``/proc/uptime``), not on a count of passes. A process that SIGKILL
    has reached is exiting (``PF_EXITING``; a GPU context may take seconds to tear down) and no longer
    counts. Prints ``found=``, ``killed=`` (those that needed SIGKILL), ``left=`` and one ``survivor=``
    line (pid, state, name) for each process still there.
    """
    needle = shlex.quote(f"{TOKEN_VAR}={token}")
    return (
        f"t={needle}\n"
        "ours() { if printf 'x\\0' | grep -qzx x 2>/dev/null; then "
        'grep -lzxF -e "$t" /proc/[0-9]*/environ 2>/dev/null '
        "| sed -n 's,^/proc/\\([0-9]*\\)/environ$,\\1,p'; "
        "else for p in /proc/[0-9]*; do tr '\\0' '\\n' < \"$p/environ\" 2>/dev/null | grep -qxF -e \"$t\" "
        '&& echo "${p#/proc/}"; done; fi; }\n'
        # alive: not a zombie, not dead, not already exiting (PF_EXITING, 0x4, in the flags field)
        "alive() { for q in $1; do s=$(sed 's/.*) //' \"/proc/$q/stat\" 2>/dev/null) || continue; set -- $s; "
        '[ -n "$1" ] && [ "$1" != Z ] && [ "$1" != X ] && [ $(( ${7:-0} & 4 )) -eq 0 ] '
        '&& echo "$q"; done; }\n'
        "cs() { read -r u _ < /proc/uptime; echo \"${u%.*}${u#*.}\" | sed 's/^0*//;s/^$/0/'; }\n"
        "until_gone() { e=$(( $(cs) + $2 )); "
        'while [ -n "$(alive "$1")" ] && [ "$(cs)" -lt "$e" ]; do sleep 0.1; done; }\n'
        "all=$(ours)\n"
        'echo "found=$(echo $all | wc -w)"\n'
        '[ -n "$all" ] && kill -TERM $all 2>/dev/null\n'
        f'until_gone "$all" {TERM_GRACE_S * 100}\n'
        # a process started during the grace (a launcher restarting its workers) is caught by a second look
        'rest=$(alive "$all $(ours)" | sort -u)\n'
        'echo "killed=$(echo $rest | wc -w)"\n'
        '[ -n "$rest" ] && kill -KILL $rest 2>/dev/null\n'
        f'until_gone "$rest" {KILL_WAIT_S * 100}\n'
        'left=$(alive "$rest $(ours)" | sort -u)\n'
        'echo "left=$(echo $left | wc -w)"\n'
        'for q in $left; do echo "survivor=$q $(cut -d\' \' -f3 "/proc/$q/stat" 2>/dev/null) '
        '$(cat "/proc/$q/comm" 2>/dev/null)"; done\n'
    )


def said(stdout: str) -> dict[str, str]:
    """The ``key=value`` lines of :func:`kill_script`'s output, the last of each key."""
    return dict(line.partition("=")[::2] for line in stdout.splitlines() if "=" in line)


def survivors(stdout: str) -> list[str]:
    """``pid state name`` of each process :func:`kill_script` found still there after SIGKILL."""
    return [line[len("survivor=") :].strip() for line in stdout.splitlines() if line.startswith("survivor=")]


#: Launches started and not yet stopped, for an interrupt to stop: each launch's stop, by its id.
LIVE: dict[int, Callable[[float], Stopped]] = {}
LIVE_LOCK = threading.Lock()


@dataclass
class Stopped:
    """What one stop of the live launches did: a line per launch and host it stopped, and a line per thing
    it could not stop or remove (empty: nothing is left)."""

    stopped: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def tell(
        self,
        what: str,
        found: dict[str, tuple[int, int]],
        leftovers: dict[str, int],
        alive: dict[str, list[str]],
    ) -> None:
        """One launch's stop in words, per host: how many processes it ended (and how many needed SIGKILL),
        and any that survived SIGKILL, named."""
        for name, (count, killed) in sorted(found.items()):
            forced = f", {killed} of them by SIGKILL" if killed else ""
            if count:
                self.stopped.append(
                    f"{what} on {name}: {counted(count, 'process', 'processes')} stopped{forced}"
                )
        for name, count in sorted(leftovers.items()):
            if count:
                names = "; ".join(alive.get(name, []))
                self.problems.append(
                    f"{counted(count, 'process', 'processes')} of {what} survived SIGKILL on {name}: {names}"
                )


def stop_live_launches(timeout: float = TERM_GRACE_S + KILL_WAIT_S + 6) -> Stopped:
    """Stop every launch still running (an interrupt left them) and remove their folders, all launches at
    once, within about ``timeout`` seconds; what was stopped, and what could not be."""
    with LIVE_LOCK:
        jobs = list(LIVE.values())
        LIVE.clear()
    if not jobs:
        return Stopped()
    with ThreadPoolExecutor(max_workers=min(32, len(jobs)), thread_name_prefix="stop") as pool:
        reports = list(pool.map(lambda stop: stop(timeout), jobs))
    return Stopped(
        [line for report in reports for line in report.stopped],
        [line for report in reports for line in report.problems],
    )
