"""docs/nightly.md and its cron and systemd examples say what diagnose does: the retention figures are the
ones the shipped playbooks and the parser apply (``--check`` prints them), and the examples start the
``diagnose`` the documented install makes, with a command line diagnose accepts. An operator copies these
files into /etc as they are; an example naming a program the install never made fails at 02:00."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from diagnose.cli import build_parser
from diagnose.config.playbook import load_playbook

ROOT = Path(__file__).resolve().parents[2]
NIGHTLY = (ROOT / "docs" / "nightly.md").read_text(encoding="utf-8")
CRON = (ROOT / "docs" / "cron" / "diagnose-nightly.cron").read_text(encoding="utf-8")
SERVICE = (ROOT / "docs" / "cron" / "diagnose-nightly.service").read_text(encoding="utf-8")


def test_retention_figures_in_the_docs_are_the_ones_applied(tmp_path) -> None:
    text = " ".join(NIGHTLY.split())
    said = re.search(
        r"the shipped `nightly` and `nightly-moe` playbooks keep (\d+) runs and (\d+) days, and a playbook "
        r"whose `nightly:` section leaves them out keeps (\d+) runs and (\d+) days",
        text,
    )
    assert said, "docs/nightly.md states the retention of the shipped playbooks and the defaults"
    for name in ("nightly", "nightly-moe"):
        plan = load_playbook(name).nightly
        assert plan is not None and (plan.keep_runs, plan.keep_days) == (int(said[1]), float(said[2])), name
    bare = tmp_path / "bare.yaml"
    bare.write_text("name: bare\nchecks: [host.reachable]\nnightly:\n  time_budget_s: 600\n")
    plan = load_playbook(bare).nightly
    assert plan is not None and (plan.keep_runs, plan.keep_days) == (int(said[3]), float(said[4]))
    # no other sentence may call a figure the nightly's default
    assert "nightly's default `keep_runs`" not in text


def _installed_diagnose() -> str:
    """The command the documented install makes: ``<venv>/bin/diagnose`` of its ``python3 -m venv <venv>``."""
    venv = re.search(r"python3 -m venv (\S+) && (?:sudo )?\1/bin/pip install diagnose-cluster", NIGHTLY)
    assert venv, "docs/nightly.md shows how the nightly's diagnose is installed"
    return f"{venv[1]}/bin/diagnose"


def test_cron_and_systemd_start_the_diagnose_the_install_made() -> None:
    command = _installed_diagnose()
    cron_line = next(line for line in CRON.splitlines() if re.match(r"\s*\d+\s+\d+\s+\*", line))
    cron_words = shlex.split(cron_line)[6:]  # after the five time fields and the user
    exec_start = re.search(r"^ExecStart=(.*?)(?<!\\)$", SERVICE.replace("\\\n", " "), re.MULTILINE)
    assert exec_start
    service_words = shlex.split(exec_start[1])
    documented = re.search(r"^0 2 \* \* \*\s+diagnose\s+(.*)$", NIGHTLY, re.MULTILINE)
    assert documented, "docs/nightly.md quotes the crontab line"
    for words in (cron_words, service_words, shlex.split(documented[1])):
        assert words[0] == command, words[0]
        args = build_parser().parse_args(words[1:])  # a command line diagnose accepts
        assert args.command == "run" and args.playbook == "nightly"
    assert shlex.split(documented[1]) == cron_words  # the doc quotes the file as it is


def test_the_examples_name_the_history_once_for_every_command() -> None:
    """The history is set in the job's environment, where `diagnose history` run by hand can read the same
    variable, not as a --history only the nightly's command line carries."""
    assert re.search(r"^DIAGNOSE_HISTORY=/\S+$", CRON, re.MULTILINE)
    assert re.search(r"^Environment=DIAGNOSE_HISTORY=/\S+$", SERVICE, re.MULTILINE)
