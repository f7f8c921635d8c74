"""What an nccl-tests job needs settled before it starts: its variables, its command line, and the
preflight that says on which hosts it can run.

All of it is pure: the preflight is the text of a shell script here, run over each host's connection
and its lines read back by :mod:`diagnose.benchmarks.nccl_tests`, which also runs and follows the jobs
(its module docstring tells how a run goes).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from diagnose.core.hosts import Host
from diagnose.core.model import CommandOutput
from diagnose.core.vars import Vars
from diagnose.launchers.mpirun import ENV_NAME, mpirun_argv

#: The nccl-tests binary of each collective.
BINARIES: dict[str, str] = {
    "all_reduce": "all_reduce_perf",
    "reduce_scatter": "reduce_scatter_perf",
    "all_gather": "all_gather_perf",
    "all_to_all": "alltoall_perf",
    "broadcast": "broadcast_perf",
    "sendrecv": "sendrecv_perf",
}
#: nccl-tests' ``-d`` name of each ``bench_dtype``.
DTYPE_NAMES = {
    "float32": "float",
    "float16": "half",
    "bfloat16": "bfloat16",
    "float64": "double",
    "int32": "int32",
}
FALLBACKS = ("torch",)
PREFLIGHT_TIMEOUT_S = 30.0


# ---------------------------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class Settings:
    """The nccl-tests variables of a run; ``problem`` says what is wrong with them, if anything."""

    directory: str | None
    mpirun: str
    mpi_args: tuple[str, ...]
    fallback: str | None
    problem: str | None = None

    @classmethod
    def of(cls, host_vars: Vars) -> Settings:
        raw_args = host_vars.get("nccl_tests_mpi_args")
        problem = None
        if isinstance(raw_args, (list, tuple)):
            words = [str(word) for word in raw_args]
        else:
            try:
                words = shlex.split(str(raw_args)) if raw_args else []
            except ValueError as exc:
                words, problem = [], f"nccl_tests_mpi_args is not valid shell words ({exc})"
        fallback = (host_vars.str("nccl_tests_fallback") or "").strip().lower() or None
        if fallback in ("none", "false", "no"):
            fallback = None
        if fallback is not None and fallback not in FALLBACKS:
            problem = f"nccl_tests_fallback must be {' or '.join(FALLBACKS)} or unset, got {fallback!r}"
            fallback = None
        directory = (host_vars.str("nccl_tests_dir") or "").strip() or None
        mpirun = (host_vars.str("mpirun") or "").strip() or "mpirun"
        return cls(directory, mpirun, tuple(words), fallback, problem)


def binary_path(directory: str, collective: str) -> str:
    return f"{directory.rstrip('/')}/{BINARIES[collective]}"


def mpi_host(host: Host) -> str:
    """The name this host has in ``mpirun -H``: ``nccl_tests_mpi_host``, else its address."""
    return host.vars.str("nccl_tests_mpi_host") or host.address


def sweep_args(min_bytes: int, max_bytes: int, factor: int, warmup: int, iters: int, dtype: str) -> list[str]:
    """nccl-tests' options for the playbook's sweep, with validation on (``-c 1``)."""
    return [
        "-b",
        str(min_bytes),
        "-e",
        str(max_bytes),
        "-f",
        str(factor),
        "-w",
        str(warmup),
        "-n",
        str(iters),
        "-c",
        "1",
        "-d",
        DTYPE_NAMES[dtype],
    ]


def command_argv(
    settings: Settings,
    collective: str,
    hosts: Sequence[Host],
    gpus: int,
    sweep: Sequence[str],
    env: Mapping[str, str],
    forward: Iterable[str] = (),
) -> list[str]:
    """The command line on the first host: the binary on one node, the launcher across several.

    On one node the binary drives every GPU from one process (``-g gpus``) and inherits ``env`` from the
    shell. Across nodes each rank drives one GPU (``-g 1``) and :func:`mpirun_argv` passes ``env``, the
    variables named in ``forward`` (the first host's NCCL_* settings) and the launch token to every rank.
    """
    assert settings.directory is not None
    binary = binary_path(settings.directory, collective)
    if len(hosts) == 1:
        return [binary, *sweep, "-g", str(gpus)]
    program = [binary, *sweep, "-g", "1"]
    names = [mpi_host(h) for h in hosts]
    return mpirun_argv(settings.mpirun, names, gpus, settings.mpi_args, env, forward, program)


# --------------------------------------------------------------------------------------------- preflight


def preflight_script(directory: str, binaries: Iterable[str], launcher: str | None, list_env: bool) -> str:
    """One shell command: a line per binary that is missing or not executable, ``no-launcher`` when the
    launcher is not found, and with ``list_env`` an ``env NAME`` line per NCCL_* variable."""
    lines = [f"d={shlex.quote(directory)}"]
    for name in binaries:
        path = f'"$d"/{shlex.quote(name)}'
        lines.append(
            f"if [ ! -e {path} ]; then echo missing {shlex.quote(name)}; "
            f"elif [ -d {path} ] || [ ! -x {path} ]; then echo not-executable {shlex.quote(name)}; fi"
        )
    if launcher is not None:
        quoted = shlex.quote(launcher)
        # dash's `command -v` accepts a path that exists without being executable: test paths directly.
        lines.append(
            f"case {quoted} in */*) [ -f {quoted} ] && [ -x {quoted} ] ;; "
            f"*) command -v {quoted} >/dev/null 2>&1 ;; esac || echo no-launcher"
        )
    if list_env:
        lines.append("env | sed -n 's/^\\(NCCL_[A-Za-z0-9_]*\\)=.*/env \\1/p'")
    return "\n".join(lines) + "\n"


@dataclass
class HostCheck:
    """What one host's preflight found: binaries with what is wrong, the launcher, NCCL_* names."""

    binaries: dict[str, str] = field(default_factory=dict)  # binary -> "missing" | "not executable"
    launcher_found: bool = True
    env_names: list[str] = field(default_factory=list)
    error: str | None = None  # the host could not be checked


def read_preflight(output: CommandOutput) -> HostCheck:
    """The preflight lines of one host (see :func:`preflight_script`)."""
    if output.error or output.timed_out or output.exit_code not in (0, None):
        reason = output.error or (
            f"no answer within {PREFLIGHT_TIMEOUT_S:.0f} s"
            if output.timed_out
            else f"the check exited {output.exit_code}: {output.stderr.strip()[:200]}"
        )
        return HostCheck(error=reason)
    found = HostCheck()
    for line in output.stdout.splitlines():
        word, _, rest = line.strip().partition(" ")
        if word == "missing" and rest:
            found.binaries[rest] = "missing"
        elif word == "not-executable" and rest:
            found.binaries[rest] = "not executable"
        elif word == "no-launcher":
            found.launcher_found = False
        elif word == "env" and ENV_NAME.fullmatch(rest):
            found.env_names.append(rest)
    return found


def blocked_collectives(
    checks: Mapping[str, HostCheck], collectives: Iterable[str], launcher: str | None
) -> dict[str, str]:
    """Why each collective nccl-tests cannot run here cannot run (hosts in the order given)."""
    reasons: dict[str, str] = {}
    unchecked = [name for name, check in checks.items() if check.error]
    no_launcher = [name for name, check in checks.items() if not check.error and not check.launcher_found]
    for collective in collectives:
        binary = BINARIES[collective]
        parts = []
        if unchecked:
            parts.append(f"{', '.join(unchecked)} could not be checked")
        for state in ("missing", "not executable"):
            hosts = [n for n, c in checks.items() if c.binaries.get(binary) == state]
            if hosts:
                parts.append(f"{binary} is {state} on {', '.join(hosts)}")
        if no_launcher and launcher is not None:
            parts.append(f"the launcher {launcher} was not found on {', '.join(no_launcher)}")
        if parts:
            reasons[collective] = "; ".join(parts)
    return reasons
