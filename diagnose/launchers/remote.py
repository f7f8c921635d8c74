"""The shell a launch runs on its hosts: start a job detached with its watchdog, poll it, bring its files
home, remove its folder. Pure text builders; :mod:`diagnose.launchers.base` runs them over each host's
connection.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence

from diagnose.launchers.stopping import TOKEN_VAR, kill_script

#: A launch stops itself on a host no poll has reached for this long (:func:`watchdog_script`): three poll
#: timeouts, where one already makes the run count the host as lost.
LEASE_S = 60
#: Before the first poll the lease is longer by this much: a launch over thousands of hosts starts them 64 at
#: a time (one SSH exec each) before it polls any.
START_GRACE_S = 120
_FILE_MARK = "@@diagnose-file "


def remote_dir(run_id: str, tag: str, node: int) -> str:
    return f"/tmp/diagnose-{run_id}-{tag}-n{node}"


#: The host's uptime in whole seconds (a clock no one sets back), as a shell function.
UPTIME = 'up() { read -r u _ 2>/dev/null </proc/uptime && echo "${u%.*}"; }'


def watchdog_script(token: str, lease_s: int = LEASE_S, start_grace_s: int = START_GRACE_S) -> str:
    """Shell (``$0`` the launch folder) that stops the launch once no poll has touched ``alive`` for
    ``lease_s`` seconds (``start_grace_s`` more before the first), and ends with the job (its ``rc``) or
    its folder.

    A host the run lost (its sshd killed, its network gone, the controller killed) cannot be reached to
    stop what runs there: its ranks would otherwise wait on peers that are gone for as long as NCCL or the
    rendezvous lets them (minutes; a torchrun agent retrying its store for the whole startup timeout). It
    runs without the token, so a stop and its count do not include it; its pid, which leads its own
    session, is in ``watchdog.pid`` for :func:`remove_script`.
    """
    return (
        f'd=$0\n{UPTIME}\necho $$ >"$d/watchdog.pid"\necho $(( $(up) + {int(start_grace_s)} )) >"$d/alive"\n'
        'while [ -d "$d" ] && [ ! -e "$d/rc" ]; do\n'
        "  sleep 1\n"
        '  now=$(up); last=$(cat "$d/alive" 2>/dev/null)\n'
        f'  [ -n "$now" ] && [ -n "$last" ] && [ $((now - last)) -gt {int(lease_s)} ] || continue\n'
        f'  {{ echo "diagnose: no poll from the run within its lease ({int(lease_s)} s): stopping the launch"\n'
        f"{kill_script(token)}"
        '  } >>"$d/abandoned" 2>&1\n'
        '  [ -e "$d/rc" ] || echo 137 >"$d/rc"\n'
        "  exit 0\n"
        "done\n"
    )


def remove_script(folder: str) -> str:
    """Shell that ends the launch's watchdog (its session, once its command line still names the folder: a
    pid reused since is left alone) and removes the folder."""
    return (
        f"d={shlex.quote(folder)}\n"
        'p=$(cat "$d/watchdog.pid" 2>/dev/null)\n'
        '[ -n "$p" ] && grep -qsF -- "$d" "/proc/$p/cmdline" && kill -TERM -- "-$p" 2>/dev/null\n'
        'rm -rf -- "$d"\n'
    )


def detached_script(
    folder: str,
    token: str,
    command: str,
    env: Mapping[str, str],
    *,
    merge_stderr: bool = False,
    lease_s: int = LEASE_S,
    start_grace_s: int = START_GRACE_S,
) -> str:
    """Shell that starts ``command`` (a shell command line; ``$0`` is the folder) detached in a session of
    its own, with the token, ``env`` and TMPDIR (torch's ``torchelastic_*``: gone with the folder) exported,
    and its watchdog (:func:`watchdog_script`) beside it.

    Its stdout goes to ``out.txt``, its stderr to ``err.txt`` (or into ``out.txt`` with ``merge_stderr``,
    where the order of both matters), its exit status to ``rc`` once it ends.
    """
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items())
    errors = "2>&1" if merge_stderr else '2> "$0/err.txt"'
    inner = f'{command} > "$0/out.txt" {errors}; echo $? > "$0/rc.tmp"; mv "$0/rc.tmp" "$0/rc"'
    return (
        f"d={shlex.quote(folder)}\n"
        'mkdir -p "$d/logs" "$d/tmp" || exit 1\n'
        "command -v setsid >/dev/null 2>&1 || { echo 'setsid (util-linux) is not installed' >&2; exit 127; }\n"
        f'setsid sh -c {shlex.quote(watchdog_script(token, lease_s, start_grace_s))} "$d" </dev/null >/dev/null 2>&1 &\n'
        f'export {TOKEN_VAR}={shlex.quote(token)} TMPDIR="$d/tmp"\n'
        f"{exports}"
        f'setsid sh -c {shlex.quote(inner)} "$d" </dev/null >/dev/null 2>&1 &\n'
        "exit 0\n"
    )


def poll_script(folder: str, offset: int | None, progress: str = "results.jsonl") -> str:
    """Exit status (empty while running) and, with ``offset``, new bytes of the progress file (none yet: no
    error); the poll renews the launch's lease (:func:`watchdog_script`)."""
    tail = f'tail -c +{offset + 1} "$d/{progress}" 2>/dev/null || :' if offset is not None else ":"
    return (
        f'd={shlex.quote(folder)}\n{heartbeat()}\nprintf \'rc=%s\\n\' "$(cat "$d/rc" 2>/dev/null)"\n{tail}\n'
    )


def heartbeat() -> str:
    """Shell that renews the lease of the launch in folder ``$d`` (where the folder is still there)."""
    return f'{UPTIME}\n[ -d "$d" ] && up >"$d/alive" 2>/dev/null'


#: The files of a launch folder :func:`collect_script` brings home by default: every rank's NCCL log, then
#: the job's stdout and stderr.
COLLECTED = ("logs/nccl-rank*.log", "out.txt", "err.txt")


def collect_script(folder: str, patterns: Sequence[str] = COLLECTED) -> str:
    """The files of ``folder`` matching ``patterns`` (globs, fixed words), each behind a marker line."""
    globs = " ".join(f'"$d"/{p}' for p in patterns)
    return (
        f"d={shlex.quote(folder)}\n"
        f"for f in {globs}; do\n"
        f'  [ -f "$f" ] || continue\n'
        f"  printf '%s%s\\n' {shlex.quote(_FILE_MARK)} \"${{f##*/}}\"\n"
        '  cat "$f"\n'
        "done\n"
    )


def split_files(text: str) -> dict[str, str]:
    files: dict[str, str] = {}
    name: str | None = None
    lines: list[str] = []
    for line in text.splitlines(keepends=True):
        if line.startswith(_FILE_MARK):
            if name is not None:
                files[name] = "".join(lines)
            name, lines = line[len(_FILE_MARK) :].strip(), []
        else:
            lines.append(line)
    if name is not None:
        files[name] = "".join(lines)
    return files
