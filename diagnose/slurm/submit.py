"""``diagnose run --slurm-submit``: the run as a Slurm batch job on whole nodes of its own.

A nightly that starts collectives over SSH on nodes where user jobs hold the GPUs measures those jobs as
much as the fabric, and disturbs them. Submitted through sbatch, the run waits for nodes Slurm gives it
exclusively (``--exclusive``), and the batch script runs ``diagnose run --slurm`` on them: hosts from
``SLURM_JOB_NODELIST``, checks through srun steps, the benchmark as one srun step
(:mod:`diagnose.targets.slurm_nodes`, :mod:`diagnose.connectors.srun`, :mod:`diagnose.launchers.srun`).

The job's shape comes from variables, read like the benchmark settings from the first host (any inventory
level, the playbook's ``vars`` or ``-e``): ``slurm_partition`` (default ``--slurm-partition``),
``slurm_reservation``, ``slurm_qos``, ``slurm_account``, ``slurm_time``, ``slurm_nodes`` (node count) and
``slurm_gpus_per_node`` (an exclusive job gets no GPU it did not ask for).

With ``--slurm-rotate`` the job asks for the ``slurm_nodes`` idle, responding nodes that the run's series
covered longest ago (:mod:`diagnose.history.coverage`), so nightly runs on a few free nodes cover the
whole partition in turn.

Secrets stay out of the batch script, which Slurm keeps and shows to administrators: ``-e`` variables
with secret names (:func:`diagnose.core.redact.is_secret_name`) go into a file only the user can read, beside
the history database, passed as ``-e @file`` and removed when the job ends. Every Slurm command is an
argv list; the script itself quotes every word.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from diagnose import history
from diagnose.config.extra_vars import parse_extra_vars
from diagnose.core.errors import ConfigError
from diagnose.core.process import ProgramError, run_program
from diagnose.core.redact import is_secret_name
from diagnose.core.units import counted
from diagnose.engine.run import RunOptions, RunRequest
from diagnose.engine.run_ids import check_out_dir
from diagnose.history.coverage import last_covered, stalest
from diagnose.targets.slurm_nodes import SLURM_TIMEOUT_S, SlurmQuery, first_error_line, sinfo_nodes

#: Variable → sbatch option, in the order they appear on its command line.
SBATCH_OPTIONS = (
    ("slurm_partition", "--partition"),
    ("slurm_reservation", "--reservation"),
    ("slurm_qos", "--qos"),
    ("slurm_account", "--account"),
    ("slurm_time", "--time"),
    ("slurm_nodes", "--nodes"),
    ("slurm_gpus_per_node", "--gpus-per-node"),
)


@dataclass
class Submission:
    """What will be handed to sbatch: its argv, the batch script, the secret variables kept apart."""

    sbatch: list[str]
    script: str
    secrets: dict[str, Any]
    secrets_file: Path | None
    nodes: list[str] = field(default_factory=list)  # the rotation's choice; empty: Slurm chooses
    notes: list[str] = field(default_factory=list)
    output: str = ""


def split_secrets(extra_vars: list[str]) -> tuple[list[str], dict[str, Any]]:
    """``-e`` arguments without their secret-named variables, and those variables, merged in order.

    An argument holding no secret passes unchanged (``@file`` made absolute: the job may start elsewhere);
    one holding some is replaced by a JSON mapping of its other variables.
    """
    public: list[str] = []
    hidden: dict[str, Any] = {}
    for arg in extra_vars:
        if arg.strip().startswith("@"):
            public.append("@" + str(Path(arg.strip()[1:]).expanduser().resolve()))
            continue
        values = parse_extra_vars([arg])
        found = {k: v for k, v in values.items() if is_secret_name(k)}
        if not found:
            public.append(arg)
            continue
        hidden.update(found)
        shown = {k: v for k, v in values.items() if k not in found}
        if shown:
            public.append(json.dumps(shown))
    return public, hidden


def inner_query(query: SlurmQuery) -> SlurmQuery:
    """What the batch job asks for inside its allocation: the same partition and nodes, never a state."""
    return SlurmQuery(partitions=query.partitions, nodes=query.nodes)


def _absolute(path: str) -> str:
    return str(Path(path).expanduser().resolve())


def inner_argv(options: RunOptions, query: SlurmQuery, public_vars: list[str], db: Path | None) -> list[str]:
    """``diagnose run --slurm ...`` as the batch job runs it: the operator's options, paths absolute."""
    argv = [sys.executable, "-m", "diagnose.cli", "run", "--slurm", "--quiet"]
    if query.partitions:
        argv += ["--slurm-partition", query.partitions]
    if query.nodes:
        argv += ["--slurm-nodes", query.nodes]
    for inventory in options.inventories:
        argv += ["-i", _absolute(inventory)]
    if options.playbook:
        playbook = Path(options.playbook).expanduser()
        argv += ["--playbook", _absolute(options.playbook) if playbook.is_file() else options.playbook]
    if options.limit:
        argv += ["--limit", options.limit]
    argv += ["--forks", str(options.forks), "--format", options.formats]
    if options.connect_timeout is not None:
        argv += ["--timeout", f"{options.connect_timeout:g}"]
    if options.runs_dir:
        argv += ["--runs-dir", _absolute(options.runs_dir)]
    elif options.out:
        argv += ["--out", _absolute(options.out)]
    for arg in public_vars:
        argv += ["-e", arg]
    if options.skip_benchmarks:
        argv.append("--skip-benchmarks")
    if options.tool:
        argv += ["--tool", options.tool]
    if options.accept_unknown_host_keys:
        argv.append("--accept-unknown-host-keys")
    if options.known_hosts:
        argv += ["--known-hosts", _absolute(options.known_hosts)]
    if db is not None:
        argv += ["--history", str(db.expanduser().resolve())]
    for flag, value in (("--cluster-name", options.cluster_name), ("--operator", options.operator)):
        if value:
            argv += [flag, value]
    return argv


def batch_script(argv: list[str], secrets_file: Path | None, comment: str) -> str:
    """The batch script: the run, and the secrets file removed however the job ends."""
    lines = ["#!/bin/sh", f"# {comment}"]
    run = shlex.join(argv)
    if secrets_file is not None:
        lines += [
            f"s={shlex.quote(str(secrets_file))}",
            "trap 'rm -f \"$s\"' EXIT",
            "trap 'exit 143' TERM",
            "trap 'exit 130' INT",
        ]
        run += ' -e @"$s"'
    return "\n".join([*lines, run]) + "\n"


def secrets_folder(options: RunOptions) -> Path:
    """Beside the history database: per user, on the shared home where Slurm clusters keep it."""
    base = Path(options.history).expanduser().parent if options.history else history.default_db_path().parent
    return base / "submit"


def plan(request: RunRequest, rotation: str | None = None) -> Submission:
    """The sbatch command line and batch script for ``request`` (nothing written, nothing submitted);
    with ``rotation`` (node states, ``idle``) the nodes the series covered longest ago among those."""
    options = request.options
    if options.out and not options.runs_dir:  # refused now, not in the job's output hours later
        check_out_dir(Path(options.out))
    query = options.slurm or SlurmQuery()
    values = request.hosts[0].vars if request.hosts else None
    notes: list[str] = []
    chosen: dict[str, str] = {}
    for variable, flag in SBATCH_OPTIONS:
        value = values.str(variable) if values is not None else None
        if variable == "slurm_partition" and not value:
            value = query.partitions
        if value:
            chosen[flag] = value
    nodes: list[str] = []
    if rotation:
        nodes = _rotation(request, query, rotation, chosen, notes)
    elif query.nodes:
        nodes = [query.nodes]
    public, hidden = split_secrets(options.extra_vars)
    secrets_file = secrets_folder(options) / f"{secrets.token_hex(8)}.json" if hidden else None
    argv = inner_argv(options, inner_query(query), public, request.history_db)
    folder = Path(_absolute(options.runs_dir or options.out or "."))
    output = str(folder / "diagnose-slurm-%j.out")
    sbatch = ["sbatch", "--parsable", "--exclusive", f"--job-name=diagnose-{request.playbook.name}"]
    sbatch += [f"--chdir={_absolute('.')}", f"--output={output}"]
    sbatch += [f"{flag}={value}" for flag, value in chosen.items()]
    if nodes:
        sbatch.append(f"--nodelist={','.join(nodes)}")
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    comment = f"diagnose run ({request.playbook.name}) submitted at {when}"
    return Submission(
        sbatch, batch_script(argv, secrets_file, comment), hidden, secrets_file, nodes, notes, output
    )


def _rotation(
    request: RunRequest, query: SlurmQuery, states: str, chosen: dict[str, str], notes: list[str]
) -> list[str]:
    """The ``slurm_nodes`` responding nodes in ``states`` that the series covered longest ago."""
    db = request.history_db
    if db is None:
        raise ConfigError(
            "--slurm-rotate reads node coverage from the history: use a nightly playbook or --history"
        )
    count = chosen.get("--nodes")
    if count is None:
        raise ConfigError("--slurm-rotate needs slurm_nodes, the number of nodes each run takes")
    partition = chosen.get("--partition")
    candidates_query = SlurmQuery(partitions=partition, nodes=query.nodes, states=states)
    candidates = [n.name for n in sinfo_nodes(candidates_query, responding=True)]
    if not candidates:
        notes.append(
            f"no {candidates_query.states} node answers now; Slurm picks {counted(int(count), 'node')}"
        )
        return []
    inventory = ", ".join([inner_query(query).label, *map(_absolute, request.options.inventories)])
    series = {"inventory": inventory, "playbook": request.playbook.name, "limit": request.options.limit}
    picked = stalest(candidates, last_covered(db, series), int(count))
    if len(picked) < int(count):
        notes.append(
            f"only {len(picked)} {candidates_query.states} {'node answers' if len(picked) == 1 else 'nodes answer'}; "
            "Slurm adds the others"
        )
    return picked


def job_id(stdout: str) -> str:
    """The job id ``sbatch --parsable`` printed (``123`` or ``123;cluster``). Pure."""
    first = stdout.strip().splitlines()[0] if stdout.strip() else ""
    value = first.split(";", 1)[0].strip()
    if not value.isdigit():
        raise ValueError(f"sbatch printed {first[:200]!r} where a job id was expected")
    return value


def submit(submission: Submission) -> str:
    """Write the secrets file (mode 0600 in a 0700 folder), hand the script to sbatch, return the job id.

    A submission that fails leaves no secrets file behind; the ConfigError carries sbatch's own words.
    """
    Path(submission.output).parent.mkdir(parents=True, exist_ok=True)
    path = submission.secrets_file
    if path is not None:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.parent.chmod(0o700)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            json.dump(submission.secrets, handle)
    try:
        done = run_program(submission.sbatch, SLURM_TIMEOUT_S, stdin=submission.script)
        if done.returncode != 0:
            raise ConfigError(f"sbatch refused the job: {first_error_line(done.stderr)}")
        return job_id(done.stdout)
    except (ConfigError, ProgramError, ValueError) as exc:
        if path is not None:
            path.unlink(missing_ok=True)
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"sbatch: {exc}" if isinstance(exc, ValueError) else str(exc)) from None
