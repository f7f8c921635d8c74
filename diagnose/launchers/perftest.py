"""perftest between two hosts: each runs its own script of steps, serving or writing, in lockstep.

The launch of :mod:`diagnose.probes.perftest`. Both hosts of a pair get a script
(:func:`diagnose.probes.perftest_plan.host_script`) copied into the launch's folder and started detached
with the launch's token (:func:`~diagnose.launchers.base.detached_script`), so every ``ib_write_bw`` server
and client it starts carries the token and is found again by :meth:`~diagnose.launchers.base.Launch.stop`
— on success, failure, a hang, the run's deadline or Ctrl-C (:func:`~diagnose.launchers.base.run_launch`
registers the launch where an interrupt stops it). Nothing is left listening.

Following differs from a collective's: there is no rendezvous and no progress file of rows, only each
host's ``progress`` file, where its script writes ``end <step>`` after every step and ``done`` at the end.
The launch is done when both scripts exit; hung when no step ended on either host within one step's
budget (the step is named); each step's outputs (one file per rail and host) come home as evidence.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Mapping, Sequence

from diagnose.core.hosts import Host
from diagnose.core.model import CommandOutput
from diagnose.launchers.base import (
    POLL_INTERVAL_S,
    Launch,
    LaunchError,
    LaunchOutcome,
    LaunchSpec,
    run_launch,
)
from diagnose.launchers.remote import detached_script, heartbeat

SCRIPT = "steps.sh"


def progress_script(folder: str) -> str:
    """The script's exit status (empty while it runs), then its progress lines; the poll renews the lease."""
    return (
        f"d={shlex.quote(folder)}\n{heartbeat()}\n"
        'printf \'rc=%s\\n\' "$(cat "$d/rc" 2>/dev/null)"\ncat "$d/progress" 2>/dev/null\n'
    )


def ended_steps(stdout: str) -> tuple[set[int], bool]:
    """(the steps a host's progress says ended, whether its script got to the end)."""
    ended, done = set(), False
    for line in stdout.splitlines()[1:]:
        word, _, rest = line.partition(" ")
        if word == "end" and rest.strip().isdigit():
            ended.add(int(rest))
        elif word == "done":
            done = True
    return ended, done


class PairLaunch(Launch):
    """One pair's steps: ``scripts`` by host name, ``steps`` their descriptions in order, and the seconds
    one step may take (``step_budget_s``) before the pair counts as hung."""

    runner = "perftest"
    collected = ("out.txt", "err.txt", "s*-r*.txt")

    def __init__(
        self, spec: LaunchSpec, scripts: Mapping[str, str], steps: Sequence[str], step_budget_s: float
    ) -> None:
        super().__init__(spec)
        self.scripts = dict(scripts)
        self.steps = list(steps)
        self.step_budget_s = step_budget_s
        self.ended: dict[str, set[int]] = {h.name: set() for h in self.hosts}

    def start(self) -> None:
        """Copy each host its script and start it, both hosts at once."""
        spec = self.spec

        def begin(host: Host) -> CommandOutput:
            folder = self.folders[host.name]
            spec.connections[host.name].put_text(f"{folder}/{SCRIPT}", self.scripts[host.name])
            env = {**spec.env, **spec.host_env.get(host.name, {})}
            return self._run(host, detached_script(folder, self.token, f'sh "$0/{SCRIPT}" "$0"', env))

        results = self._each(begin, self.hosts)
        broken = {n: r for n, r in results.items() if not r.ok}
        if broken:
            self.lost.update({n: r.error for n, r in broken.items() if r.error})
            detail = "; ".join(
                f"{n}: {(r.error or r.stderr or r.ended).strip()[:200]}" for n, r in broken.items()
            )
            raise LaunchError(f"could not start perftest: {detail}", sorted(broken))

    def poll(self) -> dict[str, CommandOutput]:
        return self._each(lambda h: self._run(h, progress_script(self.folders[h.name])), self._reachable())

    def follow(self) -> None:
        """Poll both hosts until both scripts ended, a step hung, a host was lost or the deadline passed."""
        spec = self.spec
        last_progress = time.monotonic()
        while True:
            results = self.poll()
            self._mark_lost(results)
            now = time.monotonic()
            if self.lost:
                names = ", ".join(sorted(self.lost))
                self._finish("host_lost", f"host {names} stopped answering during perftest")
                self.outcome.failed_hosts = sorted(self.lost)
                return
            codes = {}
            for name, result in results.items():
                ended, _ = ended_steps(result.stdout)
                if ended - self.ended[name]:
                    last_progress = now
                    self.ended[name] |= ended
                codes[name] = self._exit_code(result.stdout)
            if all(c is not None for c in codes.values()):
                failed = sorted(n for n, c in codes.items() if c != 0)
                self.outcome.failed_hosts = failed
                self._finish("failed" if failed else "done", "")
                return
            if now - last_progress > self.step_budget_s:
                self._finish("hung", f"{self.pending()} did not finish within {self.step_budget_s:.0f} s")
                return
            if spec.deadline is not None and now > spec.deadline:
                self._finish("deadline", f"the time budget ran out during {self.pending()}")
                return
            time.sleep(POLL_INTERVAL_S)

    def pending(self) -> str:
        """The first step that has not ended on both hosts, in words."""
        done = set.intersection(*self.ended.values()) if self.ended else set()
        index = next((i for i in range(len(self.steps)) if i not in done), len(self.steps) - 1)
        return f"step {index} ({self.steps[index]})" if self.steps else "the launch"

    def failure_detail(self) -> str:
        """The last lines the failed hosts' scripts wrote to their error output."""
        parts = []
        for name in self.outcome.failed_hosts:
            err = self.outcome.evidence.get(f"{name}:err.txt")
            if err is None:
                continue
            lines = [
                ln for ln in (self.spec.out_dir / err).read_text(errors="replace").splitlines() if ln.strip()
            ]
            parts.append(f"{name}: " + " | ".join(lines[-3:])[-300:])
        return "; ".join(parts)


def launch_pair(
    spec: LaunchSpec, scripts: Mapping[str, str], steps: Sequence[str], step_budget_s: float
) -> LaunchOutcome:
    """Run one pair's launch to its end and always clean up after it (see :func:`run_launch`)."""
    return run_launch(PairLaunch(spec, scripts, steps, step_budget_s))
