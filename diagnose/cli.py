"""The `diagnose` command line: run, report, checks, history, baseline.

Exit codes (DESIGN.md): 0 PASS · 1 FAIL (or ERROR: something could not be judged) · 2 usage or
configuration error, nothing run · 3 the run could not finish (results so far written) · 4 another run
holds the lock · 130 interrupted (results so far written).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import traceback
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any

from diagnose import __version__
from diagnose.errors import ConfigError

CPU_PROFILE = "cpu-testbed"
EXIT_PASS, EXIT_FAIL, EXIT_CONFIG, EXIT_INTERNAL, EXIT_LOCKED, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130
FORMATS = ("html", "pdf", "json", "junit", "prom")
DEFAULT_FORMATS = "json,html,pdf"


def _formats(text: str) -> set[str]:
    chosen = {part.strip() for part in text.split(",") if part.strip()}
    unknown = chosen - set(FORMATS)
    if unknown:
        raise ConfigError(
            f"--format: unknown format(s) {', '.join(sorted(unknown))}; choose from {', '.join(FORMATS)}"
        )
    return chosen | {"json"}


def _default_inventory() -> Path:
    return Path(str(resources.files("diagnose.inventories").joinpath("local.yaml")))


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _terminate(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def cmd_run(args: argparse.Namespace) -> int:
    from diagnose import engine
    from diagnose.catalog import load_catalog, select
    from diagnose.inventory import parse_extra_vars, resolve_hosts
    from diagnose.local_machine import no_gpu_reason
    from diagnose.playbook import PROFILE_VARIABLE, check_unknown_patterns, custom_check_paths, load_playbook
    from diagnose.variables import unknown_variable_warnings

    try:
        formats = _formats(args.format)
        playbook = load_playbook(args.playbook)
        extra_vars = parse_extra_vars(args.extra_vars or [])
        inventories = [Path(i) for i in args.inventory] if args.inventory else [_default_inventory()]
        inventory = inventories[0]
        profile_note = None
        if args.inventory is None and PROFILE_VARIABLE not in extra_vars:
            reason = no_gpu_reason()
            if reason:  # judge this machine for what it is, and say so (issue: the first run tells the truth)
                extra_vars[PROFILE_VARIABLE] = CPU_PROFILE
                profile_note = (
                    f"{reason}: judged with the {CPU_PROFILE} profile (-e {PROFILE_VARIABLE}=... to choose)"
                )
        if args.known_hosts and not Path(args.known_hosts).expanduser().is_file():
            raise ConfigError(f"--known-hosts {args.known_hosts}: no such file")
        hosts = resolve_hosts(inventories, playbook, args.limit, extra_vars)
        for warning in unknown_variable_warnings(hosts):
            print(f"diagnose: warning: {warning}", file=sys.stderr)
        catalog = load_catalog()
        check_unknown_patterns(playbook, [e.id for e in catalog])
        host_checks, cluster_checks = engine.split_catalog(select(catalog, playbook.checks))
        custom_modules = custom_check_paths(playbook)
    except ConfigError as exc:
        print(f"diagnose: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    if args.list_hosts or args.check:
        from diagnose.dry_run import host_lines, plan_lines

        plan = playbook.benchmarks
        benchmarks = (
            f"{', '.join(plan.collectives)} ({plan.tool})"
            if plan and plan.enabled and not args.skip_benchmarks
            else None
        )
        lines = plan_lines(hosts, host_checks, benchmarks) if args.check else host_lines(hosts)
        try:
            print("\n".join(lines))
            sys.stdout.flush()
        except BrokenPipeError:  # `| head` read what it wanted
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_PASS

    from diagnose import history, unattended

    db = Path(args.history) if args.history else history.default_db_path()
    use_history = playbook.nightly is not None or args.history is not None
    try:
        lock = unattended.acquire_lock(db) if use_history else None
    except unattended.LockBusy as exc:
        print(f"diagnose: {exc}", file=sys.stderr)
        return exc.exit_code
    try:
        return _run_locked(
            args,
            playbook,
            inventory,
            hosts,
            host_checks,
            cluster_checks,
            custom_modules,
            formats,
            db if use_history else None,
            profile_note,
        )
    finally:
        if lock is not None:
            lock.release()


def _run_locked(
    args: argparse.Namespace,
    playbook: Any,
    inventory: Path,
    hosts: list[Any],
    host_checks: list[Any],
    cluster_checks: list[Any],
    custom_modules: list[Path],
    formats: set[str],
    db: Path | None,
    profile_note: str | None = None,
) -> int:
    """The run proper, once configuration is valid and (for history runs) the lock is ours."""
    from diagnose import engine, history, unattended
    from diagnose.custom import run_custom_checks
    from diagnose.redact import redact_argv

    nightly = playbook.nightly
    deadline = unattended.Deadline(nightly.time_budget_s if nightly else None)
    started = datetime.now(timezone.utc)
    run_id = engine.new_run_id(started)
    try:
        if args.runs_dir:
            out_dir = unattended.dated_run_dir(args.runs_dir)
        elif args.out:
            out_dir = Path(args.out)
            out_dir.mkdir(parents=True, exist_ok=True)
        else:
            out_dir = engine.default_out_dir(run_id, inventory if args.inventory else None)
    except OSError as exc:
        where = "--runs-dir" if args.runs_dir else "--out" if args.out else "./diagnose-runs"
        print(f"diagnose: {where}: cannot create the run folder: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_CONFIG
    profiles = sorted({str(h.vars.get("diagnose_profile")) for h in hosts if h.vars.get("diagnose_profile")})
    profile = ",".join(profiles) or None
    argv = ["diagnose", *redact_argv(args.argv)]
    header = engine.run_header(run_id, started, inventory, playbook, profile, argv, args.limit)
    if args.inventory and len(args.inventory) > 1:  # the history series is the whole set, in its order
        header["inventory"] = ", ".join(args.inventory)
    header["cluster"] = args.cluster_name or (inventory.stem if args.inventory else socket.gethostname())
    if args.operator:
        header["operator"] = args.operator
    if profile_note:
        header["profile_note"] = profile_note
    store = engine.ResultsStore(out_dir / "results.json", header)
    if nightly is not None and db is not None:
        since = history.previous_run_started(db, header)
        if since is not None:  # the inventory or -e may set their own window
            for host in hosts:
                if "xid_since" not in host.vars and "xid_window" not in host.vars:
                    host.vars = host.vars.with_values(xid_since=since)
    states: dict[str, engine.HostState] = {}
    regressions: list[Any] = []
    signal.signal(signal.SIGTERM, _terminate)
    show_progress = sys.stderr.isatty() and not args.quiet
    try:
        states = engine.run_host_stage(
            hosts,
            host_checks,
            out_dir,
            store,
            args.forks,
            args.accept_unknown_host_keys,
            args.known_hosts,
            show_progress,
            deadline=deadline.expired if nightly else None,
        )
        engine.run_cluster_stage(cluster_checks, states, store)
        if custom_modules:
            reachable = [s.host for s in states.values() if s.connection is not None]
            store.add_checks(
                run_custom_checks(
                    custom_modules,
                    reachable,
                    out_dir,
                    accept_unknown_host_keys=args.accept_unknown_host_keys,
                    known_hosts=args.known_hosts,
                )
            )
        plan = playbook.benchmarks
        samples: dict[str, Any] = {}
        if plan and plan.enabled and not args.skip_benchmarks and not deadline.expired():
            samples = engine.run_benchmark_stage(plan, states, out_dir, store, deadline, host_checks)
        if not deadline.expired():
            engine.run_after_snapshot_stage(states, host_checks, out_dir, store, args.forks, samples)
            engine.note_counters_on_slow_collectives(store)
        if db is not None:
            regressions = history.regressions(
                db, store.document(), nightly.busbw_drop_pct if nightly else 10.0
            )
            store.add_checks([r.result for r in regressions])
            store.extra["history"] = {"trend": history.trend_for_report(db, store.document())}
        document = store.finish(finished=_now())
    except KeyboardInterrupt:
        # One bounded stop: a second Ctrl-C must not leave half the hosts with work running.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        store.finish(finished=_now(), interrupted=True)
        problems = engine.stop_remote_work()
        if problems:
            store.finish(finished=_now(), interrupted=True, not_stopped=problems)
        print(f"diagnose: interrupted; results so far are in {out_dir / 'results.json'}", file=sys.stderr)
        if problems:
            print("diagnose: could not stop everything it started:", file=sys.stderr)
            for problem in problems:
                print(f"  {problem}", file=sys.stderr)
        else:
            print("diagnose: everything started on the hosts was stopped", file=sys.stderr)
        sys.stderr.flush()
        os._exit(EXIT_INTERRUPTED)  # worker threads may sit in a network call; do not wait for them
    except Exception:
        traceback.print_exc()
        store.finish(finished=_now(), error="internal error; see stderr")
        print(
            f"diagnose: the run could not finish; results so far are in {out_dir / 'results.json'}",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
    finally:
        engine.close_all(states)

    if db is not None:
        history.record_run(db, document, out_dir)
    written = _render(out_dir / "results.json", formats)
    if written is None:
        return EXIT_INTERNAL
    if nightly is not None:
        html = next((p for p in written if p.suffix == ".html"), out_dir / "results.json")
        print(unattended.summary_line(document, regressions, html))
        if args.runs_dir and db is not None:
            kept = unattended.retain(
                db, document, args.runs_dir, out_dir, nightly.keep_runs, nightly.keep_days
            )
            for failure in kept.failures:
                print(f"diagnose: retention: {failure}", file=sys.stderr)
    else:
        _print_summary(document, out_dir, written)
    return EXIT_PASS if document["verdict"] == "PASS" else EXIT_FAIL


def _render(results_path: Path, formats: set[str], out_dir: Path | None = None) -> list[Path] | None:
    from diagnose.report.render import render

    try:
        return render(results_path, formats, out_dir)
    except Exception:
        traceback.print_exc()
        print(f"diagnose: rendering failed; {results_path} is complete", file=sys.stderr)
        return None


def _print_summary(document: dict[str, Any], out_dir: Path, written: list[Path]) -> None:
    counts: dict[str, int] = {}
    for item in document["checks"] + document["benchmarks"]:
        counts[item["status"]] = counts.get(item["status"], 0) + 1
    tally = ", ".join(f"{counts[s]} {s}" for s in ("FAIL", "ERROR", "WARN", "PASS", "SKIP") if counts.get(s))
    hosts = len(document["hosts"])
    note = document["run"].get("profile_note")
    verdict = f"{document['verdict']} ({note})" if note else document["verdict"]
    print(f"diagnose: {verdict} — {hosts} host(s), {tally or 'no results'} — {out_dir}")
    for path in written:
        print(f"  {path}")


def cmd_report(args: argparse.Namespace) -> int:
    from diagnose.report.load import read_results
    from diagnose.results import SCHEMA

    try:
        formats = _formats(args.format)
        path = Path(args.results)
        if path.is_dir():  # a run folder
            path = path / "results.json"
        if not path.is_file():
            raise ConfigError(f"{args.results}: no such results file or run folder")
        try:
            document = read_results(path)
        except ValueError as exc:
            raise ConfigError(f"{path}: not a results.json: {str(exc).splitlines()[0]}") from None
        if document.get("schema") != SCHEMA:
            raise ConfigError(
                f"{path}: results schema {document.get('schema')!r}, this diagnose reads {SCHEMA}"
            )
        out = Path(args.out) if args.out else None
        if out is not None:
            try:
                out.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ConfigError(f"--out {out}: cannot create: {exc.strerror or exc}") from None
    except ConfigError as exc:
        print(f"diagnose: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    written = _render(path, formats, out)
    if written is None:
        return EXIT_INTERNAL
    for item in written:
        if item != path:  # the input is not news
            print(item)
    return EXIT_PASS


def cmd_checks(args: argparse.Namespace) -> int:
    from diagnose.catalog import load_catalog

    rows = [(e.id, e.checklist, e.needs, e.summary) for e in load_catalog()]
    rows += [  # results made by the stages after the host checks, listed so every id in a report is here
        (
            "nccl.transport",
            "3",
            "benchmark stage (NCCL INFO log)",
            "the transport NCCL chose between and inside nodes",
        ),
        (
            "bench.<collective>",
            "3",
            "benchmark stage (torchrun)",
            "busbw over the size sweep vs the expected range",
        ),
        (
            "bench.straggler",
            "3",
            "benchmark stage (host pairs)",
            "the slow host(s) behind a result below range",
        ),
        ("bench.cleanup", "3", "benchmark stage", "no benchmark process left behind on any host"),
        (
            "bench.nccl_tests",
            "3",
            "nccl_tests_dir, mpirun",
            "nccl-tests binaries and launcher present where needed",
        ),
        (
            "history.regression",
            "–/3",
            "--history database",
            "PASS→FAIL, busbw drop, version change, host gone",
        ),
        (
            "custom.<module>::<test>",
            "–",
            "testinfra (playbook custom_checks)",
            "a site's own testinfra assertion",
        ),
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    print(f"{'id':<{widths[0]}}  {'list':<{widths[1]}}  {'needs':<{widths[2]}}  what it judges")
    for row in rows:
        print(f"{row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]:<{widths[2]}}  {row[3]}")
    return EXIT_PASS


def _history_db(args: argparse.Namespace) -> Path:
    from diagnose import history

    return Path(args.history) if args.history else history.default_db_path()


def cmd_history(args: argparse.Namespace) -> int:
    from diagnose import history

    db = _history_db(args)
    try:
        if args.check or args.collective:
            text = history.history_trend(db, args.check, args.collective, args.host, args.limit)
        else:
            text = history.history_list(db, args.limit)
    except ConfigError as exc:
        print(f"diagnose: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    print(text)
    return EXIT_PASS


def cmd_baseline(args: argparse.Namespace) -> int:
    from diagnose import history

    try:
        run_id = history.set_baseline(_history_db(args), args.run_id)
    except ConfigError as exc:
        print(f"diagnose: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    print(f"baseline: {run_id}")
    return EXIT_PASS


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="diagnose", description="Accept and watch GPU training clusters.")
    parser.add_argument("--version", action="version", version=f"diagnose {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="check the hosts, run the benchmarks, write results and reports")
    run.add_argument(
        "-i",
        "--inventory",
        action="append",
        help="Ansible inventory: YAML or INI file, or a folder of them; repeat to merge, as Ansible does "
        "(default: this machine)",
    )
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
    run.add_argument("--playbook", help="playbook name (acceptance, nightly, ...) or YAML file")
    run.add_argument("-l", "--limit", help="Ansible host pattern: group, host, glob, !exclude, &intersect")
    run.add_argument("-f", "--forks", type=int, default=32, help="hosts assessed in parallel (default 32)")
    run.add_argument("-o", "--out", help="run folder (default: ./diagnose-runs/<time>-<inventory>)")
    run.add_argument("--format", default=DEFAULT_FORMATS, help=f"comma list of {', '.join(FORMATS)}")
    run.add_argument("-e", "--extra-vars", action="append", help="key=value, JSON/YAML mapping or @file")
    run.add_argument("--skip-benchmarks", action="store_true", help="per-host checks only")
    run.add_argument(
        "--accept-unknown-host-keys",
        action="store_true",
        help="admit hosts missing from known_hosts (like host_key_checking=False); changed keys are still refused",
    )
    run.add_argument("--known-hosts", help="extra known_hosts file to verify host keys against")
    run.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    run.add_argument(
        "--history", help="history database (default: the user data dir; nightly playbooks use it)"
    )
    run.add_argument("--runs-dir", help="write the run into a new dated folder under this one (for cron)")
    run.add_argument(
        "--cluster-name", help="the cluster the report names (default: the inventory's name, or this host's)"
    )
    run.add_argument("--operator", help="who ran the acceptance, for the sign-off (default: the login)")
    run.set_defaults(func=cmd_run)

    report = sub.add_parser("report", help="re-render reports from a results.json without touching any host")
    report.add_argument("results", help="a results.json, or the run folder holding it")
    report.add_argument("-o", "--out", help="write the reports here (default: beside results.json)")
    report.add_argument("--format", default="html,pdf", help=f"comma list of {', '.join(FORMATS)}")
    report.set_defaults(func=cmd_report)

    checks = sub.add_parser("checks", help="list the check catalog")
    checks.set_defaults(func=cmd_checks)

    hist = sub.add_parser("history", help="list past runs, or the trend of a check or a benchmark")
    hist.add_argument("--history", help="history database (default: the user data dir)")
    hist.add_argument("--limit", type=int, default=20, help="runs shown (default 20)")
    hist.add_argument("--check", help="trend of this check id")
    hist.add_argument("--host", help="with --check: only this host")
    hist.add_argument("--collective", help="busbw trend of this collective")
    hist.set_defaults(func=cmd_history)

    base = sub.add_parser("baseline", help="pin a run as the baseline that regressions are measured against")
    base.add_argument("run_id")
    base.add_argument("--history", help="history database (default: the user data dir)")
    base.set_defaults(func=cmd_baseline)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(argv) if argv is not None else sys.argv[1:]
    if getattr(args, "forks", 1) < 1:
        parser.error("--forks must be at least 1")
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
