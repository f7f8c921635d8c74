"""Arguments that more than one sub-command takes, and the ``campaign`` sub-commands' own: the CLI adds them
(its parser answers mistakes in one line), their bodies are in :mod:`diagnose.commands`."""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Callable
from typing import Any

from diagnose.config.playbook import TOOLS
from diagnose.render.render import DEFAULT_FORMATS, FORMATS

#: --history of the commands that read no inventory: the environment names the database once for all.
HISTORY_HELP = "history database (default: $DIAGNOSE_HISTORY, else the user data dir)"

#: argparse's words for a value outside the choices (a sub-command, ``--format``): the value, the choices.
_INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)")


def closest_choice(message: str) -> str:
    """argparse's "invalid choice" with the closest choice, as a misspelled option gets its closest: a
    sub-command as ``unknown command rnu; did you mean run? (one of run, ...)``, an option's value with the
    hint after argparse's words; any other message unchanged. A sub-command typed wrong is the slip an
    operator makes first."""
    choice = _INVALID_CHOICE.search(message)
    if not choice:
        return message
    choices = re.findall(r"'([^']*)'", choice[2])
    close = difflib.get_close_matches(choice[1], choices, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]}?" if close else ""
    if not message.split(":", 1)[0].endswith("command"):  # an option's value: argparse's words, and the hint
        return message + hint
    return f"unknown command {choice[1]}{hint} (one of {', '.join(choices)})"


def seconds(text: str) -> float:
    """A positive number of seconds (argparse's type: its error names the option)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"wants a number of seconds above 0, not {text!r}")
    return value


def formats_help(default: str) -> str:
    """--format replaces the defaults, it does not add to them: `--format junit,prom` at night writes no
    HTML or PDF (`diagnose report` draws them later); the help says so, as the README does."""
    return (
        f"the reports to write, exactly these: a comma list of {', '.join(FORMATS)} (default {default}; "
        "add to the list to keep a default, e.g. json,html,pdf,junit; results.json is always written)"
    )


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options ``run`` and ``campaign next`` share: what to run on which hosts, and where it goes."""
    parser.add_argument(
        "-i",
        "--inventory",
        action="append",
        help="Ansible inventory: YAML or INI file, or a folder of them; repeat to merge, as Ansible does "
        "(default: this machine)",
    )
    parser.add_argument("--playbook", help="playbook name (acceptance, nightly, ...) or YAML file")
    parser.add_argument("-l", "--limit", help="Ansible host pattern: group, host, glob, !exclude, &intersect")
    parser.add_argument("-f", "--forks", type=int, default=32, help="hosts assessed in parallel (default 32)")
    parser.add_argument(
        "-T",
        "--timeout",
        type=seconds,
        metavar="SECONDS",
        help="connection timeout, as Ansible's -T: the default that a host's ansible_ssh_timeout or "
        "diagnose_connect_timeout overrides (default 10; docs/variables.md)",
    )
    parser.add_argument("-o", "--out", help="run folder (default: ./diagnose-runs/<time>-<inventory>)")
    parser.add_argument("--format", default=DEFAULT_FORMATS, help=formats_help(DEFAULT_FORMATS))
    parser.add_argument("-e", "--extra-vars", action="append", help="key=value, JSON/YAML mapping or @file")
    parser.add_argument("--skip-benchmarks", action="store_true", help="per-host checks only")
    parser.add_argument(
        "--tool",
        choices=TOOLS,
        help="what measures the collectives, over the playbook's benchmarks.tool: torch (diagnose's own "
        "program) or nccl-tests (the site's *_perf binaries in nccl_tests_dir; docs/benchmarks.md)",
    )
    parser.add_argument(
        "--accept-unknown-host-keys",
        action="store_true",
        help="admit hosts missing from known_hosts (like host_key_checking=False); changed keys are still refused",
    )
    parser.add_argument("--known-hosts", help="extra known_hosts file to verify host keys against")
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress (on a terminal the live display, otherwise timestamped lines on stderr)",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="on stderr, each command run on each host with its exit status and time (-vv... as -v)",
    )
    parser.add_argument(
        "--history",
        help="history database (nightly playbooks use it; default: $DIAGNOSE_HISTORY, else the inventory's "
        "diagnose_history, else the user data dir)",
    )
    parser.add_argument("--runs-dir", help="write the run into a new dated folder under this one (for cron)")
    parser.add_argument(
        "--cluster-name", help="the cluster the report names (default: the inventory's name, or this host's)"
    )
    parser.add_argument("--operator", help="who ran the acceptance, for the sign-off (default: the login)")


def add_campaign_parsers(
    sub: Any, add_run_options: Callable[[argparse.ArgumentParser], None], handler: Callable[..., int]
) -> None:
    """``campaign status|next|certificate|exclude|include|repaired``; ``next`` takes run's options."""
    camp = sub.add_parser("campaign", help="acceptance over many runs: status, next, certificate, exclude")
    csub = camp.add_subparsers(dest="campaign_command", required=True)
    c_status = csub.add_parser("status", help="where a campaign stands: hosts accepted, pending, failed")
    c_status.add_argument("name", metavar="NAME")
    c_status.add_argument("--json", action="store_true", help="the same as JSON")
    c_next = csub.add_parser("next", help="run exactly what is missing on exactly the hosts that need it")
    c_next.add_argument("name", metavar="NAME")
    add_run_options(c_next)
    c_next.add_argument("--check", action="store_true", help="show the plan; touch no host")
    c_next.add_argument("--slurm", action="store_true", help="hosts from Slurm, as run --slurm")
    c_next.add_argument("--slurm-partition", metavar="P[,P]", help="only nodes of these partitions")
    c_cert = csub.add_parser(
        "certificate", help="write certificate.json, .html and .pdf: the as-built record"
    )
    c_cert.add_argument("name", metavar="NAME")
    c_cert.add_argument("-o", "--out", required=True, help="folder to write the certificate into")
    c_cert.add_argument("--operator", help="who issues it (default: the login)")
    c_excl = csub.add_parser("exclude", help="leave a host out of the sign-off, with the reason")
    c_excl.add_argument("name", metavar="NAME")
    c_excl.add_argument("host", metavar="HOST")
    c_excl.add_argument("--reason", required=True, help="why it is left out (printed on the certificate)")
    c_excl.add_argument("--operator", help="who decided (default: the login)")
    c_incl = csub.add_parser("include", help="take an excluded host back into the campaign")
    c_incl.add_argument("name", metavar="NAME")
    c_incl.add_argument("host", metavar="HOST")
    c_incl.add_argument("--operator", help="who decided (default: the login)")
    c_rep = csub.add_parser("repaired", help="say a failed host was repaired: next retests it first")
    c_rep.add_argument("name", metavar="NAME")
    c_rep.add_argument("host", metavar="HOST")
    c_rep.add_argument("--note", default="", help="what was done (reseated cable, replaced PSU, ...)")
    c_rep.add_argument("--operator", help="who repaired it (default: the login)")
    for command in (c_status, c_cert, c_excl, c_incl, c_rep):
        command.add_argument("--history", help=HISTORY_HELP)
    for command in (c_status, c_next, c_cert, c_excl, c_incl, c_rep):
        command.set_defaults(func=handler, parser=command)
