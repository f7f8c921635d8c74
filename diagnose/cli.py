"""The `diagnose` command line: run, report, checks, history, baseline.

Exit codes (DESIGN.md): 0 PASS · 1 FAIL (or ERROR: something could not be judged) · 2 usage or
configuration error, nothing run · 3 the run could not finish (results so far written) · 4 another run
holds the lock · 130 interrupted (results so far written).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import traceback
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any

from diagnose import __version__
from diagnose.errors import ConfigError

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
    from diagnose.custom import run_custom_checks
    from diagnose.inventory import parse_extra_vars, resolve_hosts
    from diagnose.playbook import custom_check_paths, load_playbook

    try:
        formats = _formats(args.format)
        playbook = load_playbook(args.playbook)
        extra_vars = parse_extra_vars(args.extra_vars or [])
        inventory = Path(args.inventory) if args.inventory else _default_inventory()
        hosts = resolve_hosts(inventory, playbook, args.limit, extra_vars)
        host_checks, cluster_checks = engine.selected_catalog(playbook.checks)
        custom_modules = custom_check_paths(playbook)
        for host in hosts:  # type errors in expected values surface now, not mid-run
            for name in ("expected_gpu_count", "expected_hca_count", "min_port_range"):
                host.vars.int(name)
            host.vars.float("command_timeout_s")
    except ConfigError as exc:
        print(f"diagnose: {exc}", file=sys.stderr)
        return EXIT_CONFIG

    started = datetime.now(timezone.utc)
    out_dir = (
        Path(args.out)
        if args.out
        else engine.default_out_dir(Path(args.inventory) if args.inventory else None, started)
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    profiles = sorted({str(h.vars.get("diagnose_profile")) for h in hosts if h.vars.get("diagnose_profile")})
    header = engine.run_header(inventory, playbook, ",".join(profiles) or None, ["diagnose", *args.argv])
    store = engine.ResultsStore(out_dir / "results.json", header)
    states: dict[str, engine.HostState] = {}
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
        )
        engine.run_cluster_stage(cluster_checks, states, store)
        if custom_modules:
            reachable = [s.host for s in states.values() if s.connection is not None]
            store.add_checks(run_custom_checks(custom_modules, reachable, out_dir))
        if playbook.benchmarks and playbook.benchmarks.enabled and not args.skip_benchmarks:
            engine.run_benchmarks(playbook.benchmarks, states, out_dir, store)
        document = store.finish(finished=_now())
    except KeyboardInterrupt:
        store.finish(finished=_now(), interrupted=True)
        print(f"diagnose: interrupted; results so far are in {out_dir / 'results.json'}", file=sys.stderr)
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

    written = _render(out_dir / "results.json", formats)
    if written is None:
        return EXIT_INTERNAL
    _print_summary(document, out_dir, written)
    return EXIT_PASS if document["verdict"] == "PASS" else EXIT_FAIL


def _render(results_path: Path, formats: set[str]) -> list[Path] | None:
    from diagnose.report.render import render

    try:
        return render(results_path, formats)
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
    print(f"diagnose: {document['verdict']} — {hosts} host(s), {tally or 'no results'} — {out_dir}")
    for path in written:
        print(f"  {path}")


def cmd_report(args: argparse.Namespace) -> int:
    try:
        formats = _formats(args.format)
    except ConfigError as exc:
        print(f"diagnose: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    path = Path(args.results)
    if not path.is_file():
        print(f"diagnose: {path}: no such results file", file=sys.stderr)
        return EXIT_CONFIG
    written = _render(path, formats)
    if written is None:
        return EXIT_INTERNAL
    for item in written:
        print(item)
    return EXIT_PASS


def cmd_checks(args: argparse.Namespace) -> int:
    from diagnose.catalog import load_catalog

    rows = [(e.id, e.checklist, e.needs, e.summary) for e in load_catalog()]
    rows += [
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
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    print(f"{'id':<{widths[0]}}  {'list':<{widths[1]}}  {'needs':<{widths[2]}}  what it judges")
    for row in rows:
        print(f"{row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]:<{widths[2]}}  {row[3]}")
    return EXIT_PASS


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="diagnose", description="Accept and watch GPU training clusters.")
    parser.add_argument("--version", action="version", version=f"diagnose {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="check the hosts, run the benchmarks, write results and reports")
    run.add_argument("-i", "--inventory", help="Ansible inventory (YAML or INI); default: this machine")
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
    run.set_defaults(func=cmd_run)

    report = sub.add_parser("report", help="re-render reports from a results.json without touching any host")
    report.add_argument("results")
    report.add_argument("--format", default="html,pdf", help=f"comma list of {', '.join(FORMATS)}")
    report.set_defaults(func=cmd_report)

    checks = sub.add_parser("checks", help="list the check catalog")
    checks.set_defaults(func=cmd_checks)
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
