"""Removing launch folders that an earlier run could not: a host that stopped answering mid-benchmark keeps
its ``/tmp/diagnose-<run>-<tag>-n<node>`` folders, since nobody could reach it to remove them.

The next run that benchmarks on that host removes them first (:func:`sweep_script`), and says so. Only
diagnose's own names are touched (a run id, ``<yyyymmdd>T<hhmmss>Z-<4 hex>``, then a tag and ``-n<node>``;
or a bug report's folder), only folders the login user owns and no link, only those no process still uses
(none has the folder in its environment, where every launch process carries ``TMPDIR=<folder>/tmp``, or
on its command line, where the ranks carry ``<folder>/program.py``), and only those whose job ended (its
``rc`` written) :data:`MIN_AGE_S` ago, so that the run it belongs to has had time to collect it; a folder
without ``rc`` waits :data:`STALE_S`, since containers sharing a /tmp do not see each other's processes. The pattern is read from grep's standard input, so the sweep's own grep, whose
command line would otherwise name the folder, does not count as a user.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from diagnose.connectors.base import Connection
from diagnose.core.hosts import Host

#: A folder changed less than this many seconds ago may belong to a launch that is still starting.
MIN_AGE_S = 20
#: A folder without the job's exit status (``rc``) is removed only once nothing in it changed for a day.
STALE_S = 24 * 3600
#: One sweep takes a directory listing and one grep per folder: seconds even on a big node.
SWEEP_TIMEOUT_S = 20.0
_RUN = "[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]T[0-9][0-9][0-9][0-9][0-9][0-9]Z-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]"
_REMOVED = "removed "


def sweep_script(run_id: str, *, this_run: bool = False, min_age_s: int = MIN_AGE_S) -> str:
    """Shell that removes the unused launch folders of other runs (``this_run``: of run ``run_id`` only,
    once its launches have ended) and prints ``removed <folder>`` for each."""
    me = shlex.quote(run_id)
    skip = (
        f'case "$n" in {me}-*|bug-report-{me}-*) ;; *) continue;; esac'
        if this_run
        else (f'case "$n" in {me}-*|bug-report-{me}-*) continue;; esac')
    )
    return (
        "now=$(date +%s)\n"
        "for d in /tmp/diagnose-*; do\n"
        '  [ -d "$d" ] && [ ! -L "$d" ] && [ -O "$d" ] || continue\n'
        "  n=${d#/tmp/diagnose-}\n"
        f"  {skip}\n"
        f'  case "$n" in {_RUN}-*-n[0-9]*|bug-report-{_RUN}-*) ;; *) continue;; esac\n'
        # rc: the job ended that long ago; without it, only a folder untouched for a day (a host rebooted
        # mid-run), since a launch in another pid namespace sharing this /tmp is invisible to the grep.
        f'  if [ -f "$d/rc" ]; then t="$d/rc" w={int(min_age_s)}; else t="$d" w={STALE_S}; fi\n'
        '  age=$(( now - $(stat -c %Y "$t" 2>/dev/null || echo "$now") ))\n'
        '  [ "$age" -ge "$w" ] || continue\n'
        "  printf '%s/\\n' \"$d\" | grep -qsF -f - /proc/[0-9]*/environ /proc/[0-9]*/cmdline && continue\n"
        f'  rm -rf -- "$d" && echo "{_REMOVED}$d"\n'
        "done\n"
        "true\n"
    )


def removed(stdout: str) -> list[str]:
    """The folders a sweep removed, from its output. Pure."""
    return [line[len(_REMOVED) :] for line in stdout.splitlines() if line.startswith(_REMOVED + "/tmp/")]


def sweep(
    hosts: Sequence[Host],
    connections: Mapping[str, Connection],
    script: str,
    timeout: float = SWEEP_TIMEOUT_S,
) -> dict[str, list[str]]:
    """Run one sweep on every host at once; the folders removed on each (a host that does not answer: none)."""

    def one(host: Host) -> list[str]:
        connection = connections.get(host.name)
        if connection is None:
            return []
        try:
            result = connection.run(script, timeout=timeout)
        except Exception:  # a host that cannot be reached keeps its folders until a run reaches it
            return []
        return removed(result.stdout) if result.ok else []

    if not hosts:
        return {}
    with ThreadPoolExecutor(max_workers=min(32, len(hosts)), thread_name_prefix="sweep") as pool:
        return dict(zip([h.name for h in hosts], pool.map(one, hosts), strict=True))
