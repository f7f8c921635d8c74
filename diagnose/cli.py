"""The `diagnose` command line: it parses the arguments, hands them to the sub-command's module in
:mod:`diagnose.commands`, prints what comes back and maps the outcome to the exit code. Nothing else.

Exit codes (docs/contracts.md): 0 PASS · 1 FAIL (or ERROR: something could not be judged) · 2 usage or
configuration error, nothing run · 3 the run could not finish (results so far written) · 4 another run
holds the lock · 130 interrupted (results so far written) · 141 stdout's reader left (``| head``).
"""

from __future__ import annotations

import argparse
import difflib
import logging
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any, NoReturn

from diagnose import __version__
from diagnose.commands.arguments import (
    HISTORY_HELP,
    add_campaign_parsers,
    add_run_options,
    closest_choice,
    formats_help,
)
from diagnose.core.errors import ConfigError
from diagnose.core.units import noun_for
from diagnose.history.storage import env_db_path
from diagnose.render.render import DEFAULT_FORMATS

EXIT_PASS, EXIT_FAIL, EXIT_CONFIG, EXIT_INTERNAL, EXIT_LOCKED, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130
#: A program stopped by SIGPIPE ends 128 + 13 in the shell's eyes (``$PIPESTATUS`` of ``yes | head -1``).
EXIT_BROKEN_PIPE = 141


def _silence_stdout() -> None:
    """The reader of stdout left (``| head`` read what it wanted): what is still buffered, and anything
    printed after, goes nowhere instead of raising BrokenPipeError again at the interpreter's exit."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _print_lines(lines: list[str]) -> None:
    """Print lines the command goes on after (trace renders its reports): a reader that left stops the
    printing, not the work."""
    try:
        print("\n".join(lines))
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()


def _config_error(exc: ConfigError, prefix: str = "diagnose") -> int:
    print(f"{prefix}: {exc}", file=sys.stderr)
    return EXIT_CONFIG


def _verdict_code(document: dict[str, Any]) -> int:
    return EXIT_PASS if document["verdict"] == "PASS" else EXIT_FAIL


def run_options(args: argparse.Namespace, **more: Any) -> Any:
    """The RunOptions of the options ``run`` and ``campaign next`` share, and ``more``."""
    from diagnose.engine.run import RunOptions

    return RunOptions(
        inventories=args.inventory or [],
        playbook=args.playbook,
        limit=args.limit,
        extra_vars=args.extra_vars or [],
        forks=args.forks,
        out=args.out,
        runs_dir=args.runs_dir,
        formats=args.format,
        skip_benchmarks=args.skip_benchmarks,
        tool=args.tool,
        accept_unknown_host_keys=args.accept_unknown_host_keys,
        known_hosts=args.known_hosts,
        history=args.history,
        cluster_name=args.cluster_name,
        operator=args.operator,
        argv=args.argv,
        connect_timeout=args.timeout,
        **more,
    )


def cmd_run(args: argparse.Namespace) -> int:
    from diagnose.commands import run as command
    from diagnose.engine.profile_hint import hosts_without_profile
    from diagnose.engine.run import prepare

    if args.slurm_rotate and not args.slurm_submit:
        print("diagnose: --slurm-rotate chooses the nodes of a --slurm-submit job", file=sys.stderr)
        return EXIT_CONFIG
    if args.slurm_submit and args.slurm_state and not args.slurm_rotate:
        print("diagnose: with --slurm-submit, --slurm-state narrows --slurm-rotate's nodes", file=sys.stderr)
        return EXIT_CONFIG
    slurm = command.slurm_query(
        args.slurm, args.slurm_submit, args.slurm_partition, args.slurm_nodes, args.slurm_state
    )
    options = run_options(
        args,
        slurm=slurm,
        k8s_cordon=args.k8s_cordon,
        list_only=args.list_hosts and not args.check,
        campaign=args.campaign,
    )
    try:
        request = prepare(options)
    except ConfigError as exc:
        return _config_error(exc)
    for warning in request.warnings:
        print(f"diagnose: warning: {warning}", file=sys.stderr)
    # Before the verdict it qualifies; not under --quiet, whose stderr is cron's mail every night (the
    # report's cover and results.json keep the note).
    if hosts_without_profile(request.hosts) and not (args.list_hosts or args.check or args.quiet):
        print(f"diagnose: {request.profile_note}", file=sys.stderr)
    if args.slurm_submit:
        rotation = (args.slurm_state or "idle") if args.slurm_rotate else None
        return _submit(request, rotation, args.check)
    if args.list_hosts or args.check:
        from diagnose.commands.dry_run import dry_run_lines

        _print_lines(dry_run_lines(request, args.check))
        return EXIT_PASS
    outcome = command.execute(request, quiet=args.quiet)
    return _report_outcome(outcome, request)


def _submit(request: Any, rotation: str | None, dry_run: bool) -> int:
    """Submit the run as a Slurm batch job and print its id; with ``--check``, print what would be.
    ``rotation``: the states of the nodes ``--slurm-rotate`` chooses from (None: no rotation)."""
    import shlex

    from diagnose.slurm.submit import plan, submit

    try:
        submission = plan(request, rotation)
        for note in submission.notes:
            print(f"diagnose: {note}", file=sys.stderr)
        if dry_run:
            _print_lines([f"$ {shlex.join(submission.sbatch)}", submission.script.rstrip("\n")])
            return EXIT_PASS
        job = submit(submission)
    except ConfigError as exc:
        return _config_error(exc)
    nodes = f" on {','.join(submission.nodes)}" if submission.nodes else ""
    print(f"diagnose: submitted batch job {job}{nodes}; its output: {submission.output.replace('%j', job)}")
    return EXIT_PASS


def _report_outcome(outcome: Any, request: Any) -> int:
    """The outcome as the operator (or cron) reads it, and the exit code it maps to."""
    from diagnose.commands.run import interrupted_lines

    results = outcome.out_dir / "results.json" if outcome.out_dir else None
    if outcome.status == "locked":
        print(f"diagnose: {outcome.message}", file=sys.stderr)
        return int(outcome.exit_code or EXIT_LOCKED)
    if outcome.status == "config":
        print(f"diagnose: {outcome.message}", file=sys.stderr)
        return EXIT_CONFIG
    if outcome.status == "interrupted":
        print("\n".join(interrupted_lines(results, outcome.stopped, outcome.not_stopped)), file=sys.stderr)
        sys.stderr.flush()
        _print_lines(_verdict_lines(outcome, request))  # what was measured, as a finished run says it
        for note in outcome.notes:
            print(f"diagnose: {note}", file=sys.stderr)
        sys.stderr.flush()
        os._exit(EXIT_INTERRUPTED)  # worker threads may sit in a network call; do not wait for them
    if outcome.status == "internal":
        print(outcome.message, file=sys.stderr, end="")
        what = "rendering failed" if outcome.document is not None else "the run could not finish"
        print(f"diagnose: {what}; results so far are in {results}", file=sys.stderr)
        return EXIT_INTERNAL
    document = outcome.document
    print("\n".join(_verdict_lines(outcome, request)))
    if request.playbook.nightly is not None:
        for failure in outcome.retention_failures:
            print(f"diagnose: retention: {failure}", file=sys.stderr)
    for note in outcome.notes:  # after the verdict, which stands: a format not written is no failed run
        print(f"diagnose: {note}", file=sys.stderr)
    return _verdict_code(document)


def _verdict_lines(outcome: Any, request: Any) -> list[str]:
    """What stdout says of a run that has a record, finished or interrupted alike (an interrupted run said
    nothing there, and cron's mail was empty): a nightly's one line, otherwise the summary with the profile
    suggested; then what recording into the campaign changed."""
    from diagnose.commands.run import summary_lines
    from diagnose.engine import unattended

    document = outcome.document
    if request.playbook.nightly is not None:
        results = outcome.out_dir / "results.json" if outcome.out_dir else None
        html = next((p for p in outcome.written if p.suffix == ".html"), results)
        lines = [unattended.summary_line(document, outcome.regressions, html)]
    else:
        lines = summary_lines(document, outcome.out_dir, outcome.written)
        suggestion = document["run"].get("profile_suggestion")
        if isinstance(suggestion, dict) and suggestion.get("text"):  # cron's one line stays one
            lines.append(f"diagnose: {suggestion['text']}")
    if outcome.campaign is not None:
        from diagnose.commands.campaign import event_lines

        lines += event_lines(outcome.campaign)
    return lines


def _render(results_path: Path, formats: set[str], out_dir: Path | None = None) -> list[Path] | None:
    """The reports written, or None (the traceback and a line on stderr) when a renderer failed."""
    from diagnose.commands.report import render_reports

    rendered = render_reports(results_path, formats, out_dir)
    if rendered.written is None:
        print(rendered.failure, file=sys.stderr, end="")
        print(f"diagnose: rendering failed; {results_path} is complete", file=sys.stderr)
    for note in rendered.notes:
        print(f"diagnose: {note}", file=sys.stderr)
    return rendered.written


def cmd_report(args: argparse.Namespace) -> int:
    from diagnose.commands.report import prepare_report, record_causes

    try:
        request = prepare_report(args.results, args.out, args.format, args.history)
    except ConfigError as exc:
        return _config_error(exc)
    record_causes(request)
    written = _render(request.results, request.formats, request.out)
    if written is None:
        return EXIT_INTERNAL
    for item in written:
        if item != request.results:  # the input is not news
            print(item)
    return EXIT_PASS


def cmd_trace(args: argparse.Namespace) -> int:
    from diagnose.commands.run import summary_lines
    from diagnose.commands.trace import TraceOptions, run_trace
    from diagnose.engine.run import parse_formats

    options = TraceOptions(
        traces=args.traces,
        out=args.out,
        extra_vars=args.extra_vars or [],
        profile=args.profile,
        fabric=args.fabric,
        serving=args.serving,
        argv=args.argv,
    )
    try:
        formats = parse_formats(args.format)
        outcome = run_trace(options)
    except ConfigError as exc:
        return _config_error(exc)
    document = outcome.document
    width = max((len(c["id"]) for c in document["checks"]), default=0)
    _print_lines([f"{c['id']:<{width}} {c['status']:<5} {c['message']}" for c in document["checks"]])
    written = _render(outcome.results_path, formats)
    if written is None:
        return EXIT_INTERNAL
    print("\n".join(summary_lines(document, outcome.out_dir, written)))
    return _verdict_code(document)


def cmd_node_check(args: argparse.Namespace) -> int:
    """One line on stdout and the exit-code contract of diagnose.commands.node_check (0/1/2/3)."""
    from diagnose.commands.node_check import (
        EXIT_INTERNAL,
        EXIT_USAGE,
        NodeCheckOptions,
        run_node_check,
        summary_line,
        this_node,
    )

    options = NodeCheckOptions(
        profile=args.profile,
        extra_vars=args.extra_vars or [],
        inventory=args.inventory,
        json_path=args.json,
        drain=args.drain,
        k8s=args.k8s,
        argv=args.argv,
    )
    try:
        outcome = run_node_check(options)
    except ConfigError as exc:
        print(f"diagnose node-check: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # slurmd keeps one line: say what broke there, the traceback on stderr
        traceback.print_exc()
        print(f"diagnose node-check: INTERNAL {this_node()}: {type(exc).__name__}: {exc}")
        return EXIT_INTERNAL
    _print_lines([summary_line(outcome)])
    return outcome.exit_code


def cmd_checks(args: argparse.Namespace) -> int:
    from diagnose.commands.checks import check_rows, table_lines

    print("\n".join(table_lines(check_rows())))
    return EXIT_PASS


def cmd_history(args: argparse.Namespace) -> int:
    from diagnose.commands.history import history_text

    last = args.last
    if args.limit_runs is not None:  # the old name, read as `run --limit` (hosts) would be: say so
        print("diagnose: warning: history --limit is deprecated; use --last N (N runs)", file=sys.stderr)
        last = args.limit_runs
    try:
        text = history_text(args.history, args.check, args.collective, args.host, last, args.watch)
    except ConfigError as exc:
        return _config_error(exc)
    print(text)
    return EXIT_PASS


def cmd_baseline(args: argparse.Namespace) -> int:
    from diagnose.commands.history import pin_baseline

    try:
        run_id = pin_baseline(args.history, args.run_id)
    except ConfigError as exc:
        return _config_error(exc)
    print(f"baseline: {run_id}")
    return EXIT_PASS


def cmd_campaign(args: argparse.Namespace) -> int:
    from diagnose.commands import campaign as command

    try:
        if args.campaign_command == "status":
            _print_lines([command.status_text(args.history, args.name, args.json)])
        elif args.campaign_command == "certificate":
            lines, accepted = command.certificate_lines(args.history, args.name, args.out, args.operator)
            _print_lines(lines)
            return EXIT_PASS if accepted else EXIT_FAIL
        elif args.campaign_command == "next":
            return _campaign_next(args)
        else:
            print(command.mark(args))
    except ConfigError as exc:
        return _config_error(exc)
    return EXIT_PASS


def _campaign_next(args: argparse.Namespace) -> int:
    from diagnose.commands import campaign as command
    from diagnose.commands import run as runs

    slurm = runs.slurm_query(args.slurm, False, args.slurm_partition, None, None)
    job = command.Next(
        command.NextOptions(args.name, run_options(args, slurm=slurm), check=args.check),
        lambda request: runs.execute(request, quiet=args.quiet),
    )
    if args.check:
        _print_lines(command.plan_lines(job))
        return EXIT_PASS
    codes: list[int] = []

    def told(result: Any) -> None:
        print(f"campaign {args.name}: {result.step.describe()}")
        codes.append(_report_outcome(result.outcome, result.request))

    if job.soak_hours > 0:
        job.soak_rounds(told, lambda line: print(f"campaign {args.name}: {line}", flush=True))
    else:
        job.steps(told)
    _print_lines(([] if codes else [f"campaign {args.name}: nothing to run"]) + job.status_lines())
    return max(codes, default=EXIT_PASS)


class Parser(argparse.ArgumentParser):
    """argparse that answers a mistake in one line on stderr, exit 2: the option at fault and what it
    wants, instead of a screen of usage in which the error is the last line."""

    def error(self, message: str) -> NoReturn:
        message = closest_choice(message.removeprefix("argument "))  # `diagnose rnu`: did you mean run?
        self.exit(EXIT_CONFIG, f"{self.prog}: {message} (`{self.prog} --help` lists the options)\n")

    def unknown(self, extras: list[str]) -> NoReturn:
        """Arguments this sub-command has no use for: each unknown option with the closest of its own
        options (``--inventroy``: did you mean --inventory?), else the stray words."""
        known = [option for option in self._option_string_actions if option.startswith("--")]
        options = [word for word in extras if word.startswith("-") and word != "-"]
        problems = []
        for word in options:
            name = word.split("=", 1)[0]
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            problems.append(f"unknown option {name}" + (f"; did you mean {close[0]}?" if close else ""))
        if not problems:
            problems.append(f"unexpected {noun_for(len(extras), 'argument')}: {' '.join(extras)}")
        self.error("; ".join(problems))


class _CurrentStderr:
    """Whatever ``sys.stderr`` is when a line is written: the progress display swaps it while it runs."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def _verbose() -> None:
    """``-v``: each command a host runs, with how it ended (``diagnose.commands``), on stderr; stdout keeps
    the summary cron mails and scripts read."""
    handler = logging.StreamHandler(_CurrentStderr())  # type: ignore[arg-type]
    # The progress lines' own stamp (UTC, ISO 8601, before the program's name), so one grep reads both.
    stamp = logging.Formatter("%(asctime)s diagnose: %(message)s", "%Y-%m-%dT%H:%M:%SZ")
    stamp.converter = time.gmtime
    handler.setFormatter(stamp)
    logger = logging.getLogger("diagnose.commands")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)


def build_parser() -> Parser:
    parser = Parser(prog="diagnose", description="Accept and watch GPU training clusters.")
    parser.add_argument("--version", action="version", version=f"diagnose {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="check the hosts, run the benchmarks, write results and reports")
    add_run_options(run)
    run.add_argument(
        "--list-hosts",
        action="store_true",
        help="list the selected hosts and how they are reached; touch none",
    )
    run.add_argument(
        "--check",
        action="store_true",
        help="dry run: hosts, merged variables, profile and the commands each check would run; touch none",
    )
    run.add_argument(
        "--campaign",
        metavar="NAME",
        help="record the run into this acceptance campaign (made on first use; docs/campaign.md)",
    )
    run.add_argument(
        "--k8s-cordon",
        action="store_true",
        help="cordon and taint the Kubernetes nodes of pods whose checks FAIL, within max_quarantine(_pct); "
        "lift only what diagnose set once they pass (docs/actions.md)",
    )
    slurm = run.add_argument_group("Slurm", "hosts from Slurm; -i inventories then only lend their variables")
    slurm.add_argument(
        "--slurm",
        action="store_true",
        help="hosts from Slurm: the nodes of the allocation diagnose runs in, else those sinfo lists",
    )
    slurm.add_argument("--slurm-partition", metavar="P[,P]", help="only nodes of these partitions")
    slurm.add_argument("--slurm-nodes", metavar="HOSTLIST", help="only these nodes (gpu[001-004,010])")
    slurm.add_argument("--slurm-state", metavar="STATES", help="only nodes in these states (idle,mixed)")
    slurm.add_argument(
        "--slurm-submit",
        action="store_true",
        help="submit the run as an exclusive sbatch job (slurm_partition, slurm_nodes, slurm_time, ...) "
        "and print its id; with --check, print the sbatch command and script",
    )
    slurm.add_argument(
        "--slurm-rotate",
        action="store_true",
        help="with --slurm-submit: ask for the idle nodes this series covered longest ago",
    )
    run.set_defaults(func=cmd_run, parser=run)

    report = sub.add_parser("report", help="re-render reports from a results.json without touching any host")
    report.add_argument(
        "results", metavar="RUN", help="a results.json, a run folder (its path or name), or a run id"
    )
    report.add_argument("-o", "--out", help="write the reports here (default: beside results.json)")
    report.add_argument(
        "--history",
        help="history database that finds a run id's folder (default: $DIAGNOSE_HISTORY, else the user data dir)",
    )
    report.add_argument("--format", default="html,pdf", help=formats_help("html,pdf"))
    report.set_defaults(func=cmd_report, parser=report)

    trace = sub.add_parser(
        "trace", help="judge torch.profiler traces of a training job (one per rank): checklist section 4"
    )
    trace.add_argument("traces", nargs="*", help="Kineto/Chrome-trace JSON files (.json or .json.gz)")
    trace.add_argument(
        "-o", "--out", help="write results and reports here (default: ./diagnose-runs/<time>-trace)"
    )
    trace.add_argument("--format", default=DEFAULT_FORMATS, help=formats_help(DEFAULT_FORMATS))
    trace.add_argument("-e", "--extra-vars", action="append", help="key=value (train_* thresholds), or @file")
    trace.add_argument("--profile", help="hardware profile whose train_* thresholds apply")
    trace.add_argument(
        "--fabric",
        help="a run (results.json, run folder or run id) whose all_reduce busbw is the fabric baseline",
    )
    trace.add_argument(
        "--serving",
        metavar="FILE",
        help="a `vllm bench serve --save-result` JSON judged against serving_ttft_p99_ms / serving_tpot_p99_ms "
        "(checklist section 5)",
    )
    trace.set_defaults(func=cmd_trace, parser=trace)

    node = sub.add_parser(
        "node-check",
        help="fast node-local checks of this node, one line, exit 0/1 (for Slurm's HealthCheckProgram, Prolog)",
        description="Exit codes: 0 healthy, 1 unhealthy (a check FAILed or could not judge), 2 usage or "
        "configuration error, 3 internal error or Slurm could not be updated.",
    )
    node.add_argument("--profile", help="hardware profile (as -e diagnose_profile=...)")
    node.add_argument("-e", "--extra-vars", action="append", help="key=value, JSON/YAML mapping or @file")
    node.add_argument(
        "-i",
        "--inventory",
        help="inventory whose host named like this node lends its variables (default: none)",
    )
    node.add_argument("--json", metavar="FILE", help="also write the results (schema 1) to FILE")
    node.add_argument(
        "--drain",
        action="store_true",
        help="unhealthy: drain this Slurm node with the failed checks as reason; healthy: resume it if "
        "node-check drained it (never an admin's drain)",
    )
    node.add_argument(
        "--k8s",
        action="store_true",
        help="in a pod: cordon and taint its node (NODE_NAME) when unhealthy, lift what diagnose set when "
        "healthy (never an operator's cordon or taint); within max_quarantine(_pct)",
    )
    node.set_defaults(func=cmd_node_check, parser=node)

    checks = sub.add_parser("checks", help="list the check catalog")
    checks.set_defaults(func=cmd_checks, parser=checks)

    hist = sub.add_parser(
        "history", help="list past runs, the trend of a check or a benchmark, or the watch list"
    )
    hist.add_argument("--history", help=HISTORY_HELP)
    hist.add_argument("--last", type=int, default=20, metavar="N", help="the N latest runs (default 20)")
    hist.add_argument("--limit", type=int, dest="limit_runs", help=argparse.SUPPRESS)  # deprecated: --last
    hist.add_argument("--check", help="trend of this check id")
    hist.add_argument("--host", help="with --check: only this host")
    hist.add_argument("--collective", help="busbw trend of this collective")
    hist.add_argument(
        "--watch", action="store_true", help="the watch list: components getting worse night after night"
    )
    hist.set_defaults(func=cmd_history, parser=hist)

    add_campaign_parsers(sub, add_run_options, cmd_campaign)

    base = sub.add_parser("baseline", help="pin a run as the baseline that regressions are measured against")
    base.add_argument(
        "run_id", metavar="RUN", help="a run id (or its start), or a run folder (its path or name)"
    )
    base.add_argument("--history", help=HISTORY_HELP)
    base.set_defaults(func=cmd_baseline, parser=base)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:
        args.parser.unknown(extras)
    args.argv = list(argv) if argv is not None else sys.argv[1:]
    if getattr(args, "history", False) is None:  # --history first, then the environment (history.HISTORY_ENV)
        args.history = env_db_path(os.environ)
    if getattr(args, "forks", 1) < 1:
        args.parser.error("-f/--forks: give at least 1")
    if getattr(args, "tool", None) and getattr(args, "skip_benchmarks", False):
        args.parser.error(
            f"--tool {args.tool}: --skip-benchmarks measures no collectives; give one of the two"
        )
    if getattr(args, "verbose", 0):
        _verbose()
    try:
        code = int(args.func(args))
        sys.stdout.flush()  # here, not at the interpreter's exit, where a closed pipe prints a traceback
    except BrokenPipeError:  # any command into `| head`: end quietly, as a program stopped by SIGPIPE does
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    return code


if __name__ == "__main__":
    sys.exit(main())
