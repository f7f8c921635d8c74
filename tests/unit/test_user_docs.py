"""The user documents speak to users; the acceptance walkthrough's commands are ones diagnose accepts.

Operators read docs/*.md and the README to run diagnose, not to follow its development: an issue number or
a machine someone lent for a test tells them nothing, and where a figure was measured belongs in
docs/validation.md, which also states plainly what ran on real hardware and what only on captured outputs.
A walkthrough whose commands name an option or a variable diagnose does not know fails the operator at the
worst moment, so each command of docs/acceptance.md is parsed by the real command line here.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import yaml

from diagnose.cli import build_parser
from diagnose.config.playbook import available_playbooks

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
#: Where records of which machine a figure came from, and the project's own history, may stand.
RECORDS = {"validation.md"}
#: Words that speak of the project's development instead of to the user. A Markdown link to a numbered
#: section (``](#1-prepare-the-hosts)``) is not an issue number.
DEVELOPMENT_WORDS = re.compile(
    r"\bissues? \d+\b|(?<![(\w])#\d+\b|\blent\b|\btest machines?\b|\bdevelopment container\b", re.IGNORECASE
)


def user_docs() -> list[Path]:
    """The README, docs/*.md but the records, and the packaged playbooks and profiles, which the walkthrough
    has operators copy and edit: their comments are read as documentation too."""
    playbooks = sorted((ROOT / "playbooks").rglob("*.yaml"))
    return [ROOT / "README.md", *(p for p in sorted(DOCS.glob("*.md")) if p.name not in RECORDS), *playbooks]


def test_user_docs_name_no_issue_numbers_and_no_lent_machines() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {match.group(0)!r} in {line.strip()[:100]}"
        for path in user_docs()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for match in DEVELOPMENT_WORDS.finditer(line)
    ]
    assert not found, "\n".join(found)


def test_the_pattern_finds_what_it_is_meant_to_find() -> None:
    """The check above is only as good as its pattern: it must catch the forms seen in the documents."""
    for text in ("Issue 33 saw why", "(issue 24)", "see #45", "on the lent 4× H200", "a test machine"):
        assert DEVELOPMENT_WORDS.search(text), text
    for text in ("[Prepare](#1-prepare-the-hosts)", "silently", "issues a warning", "C#5"):
        assert not DEVELOPMENT_WORDS.search(text), text


def test_validation_states_what_ran_on_real_hardware_and_what_only_on_captures() -> None:
    text = (DOCS / "validation.md").read_text(encoding="utf-8")
    section = text.split("## What was validated on real hardware, and what only on captured outputs", 1)
    assert len(section) == 2, "validation.md has no table of real hardware against captured outputs"
    table = [line for line in section[1].split("\n## ", 1)[0].splitlines() if line.startswith("| ")]
    assert table[0] == "| part | on real hardware | only on captured or composed outputs |", table[0]
    rows = {
        cells[0]: cells[1:]
        for line in table[1:]
        for cells in [[c.strip() for c in line.strip("|").split(" | ")]]
    }
    for part in ("InfiniBand ports", "per-NIC perftest", "optics and firmware", "DCGM"):
        row = next(cells for name, cells in rows.items() if name.startswith(part))
        assert row[0] in (
            "–",
            "only the answer of a host without an HCA",
            "only the answer of a host without mlxlink",
        )
        assert "public sources" in row[1] or "DCGM's own writer" in row[1], (part, row)
    gpu = next(cells for name, cells in rows.items() if name.startswith("GPU checks"))
    assert "H100" in gpu[0] and "H200" in gpu[0], gpu


def commands(path: Path) -> Iterator[list[str]]:
    """Each ``diagnose ...`` line of the document's bash blocks, as the shell splits it (comments dropped)."""
    for block in re.findall(r"```bash\n(.*?)```", path.read_text(encoding="utf-8"), re.S):
        for line in block.splitlines():
            if line.startswith("diagnose "):
                yield shlex.split(line, comments=True)


def read_in_source(name: str) -> bool:
    """Whether diagnose's own code reads a variable of this name (a quoted literal in it)."""
    literal = f'"{name}"'
    sources = [*(ROOT / "diagnose").rglob("*.py"), *(ROOT / "checks").rglob("*.py")]
    return any(literal in p.read_text(encoding="utf-8") for p in sources)


def test_every_command_of_the_acceptance_walkthrough_is_one_diagnose_accepts() -> None:
    walkthrough = DOCS / "acceptance.md"
    argvs = list(commands(walkthrough))
    assert len(argvs) >= 12, argvs
    parser = build_parser()
    variables: set[str] = set()
    for argv in argvs:
        args, extras = parser.parse_known_args(argv[1:])  # a bad option or value exits here
        assert not extras, (argv, extras)
        playbook = getattr(args, "playbook", None)
        if playbook and not playbook.endswith(".yaml"):
            assert playbook in available_playbooks(), argv
        variables |= {item.split("=", 1)[0] for item in getattr(args, "extra_vars", None) or []}
    for block in re.findall(r"```yaml\n(.*?)```", walkthrough.read_text(encoding="utf-8"), re.S):
        data = yaml.safe_load(block)
        groups = data.get("all", data)
        variables |= set(groups.get("vars") or {})
        for host in (groups.get("hosts") or {}).values():
            variables |= set(host)
    assert {"bench_master_addr", "bench_python", "dcgm_diag_level", "nccl_tests_dir"} <= variables
    unknown = sorted(v for v in variables if not read_in_source(v))
    assert not unknown, f"docs/acceptance.md sets variables diagnose never reads: {unknown}"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "[docs/acceptance.md](docs/acceptance.md)" in readme


def test_sample_verdict_lines_count_as_diagnose_prints_them() -> None:
    """Counts read as sentences (``1 host``, ``4 hosts``); a sample line of the verdict still saying
    ``4 host(s)`` shows the operator a line diagnose no longer prints."""
    stale = [
        f"{path.name}: {line}"
        for path in user_docs()
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.startswith("diagnose") and "(s)" in line
    ]
    assert not stale, stale


def test_the_walkthrough_says_which_python_its_python_commands_use() -> None:
    """The README installs into a virtual environment and runs ``.venv/bin/diagnose`` without activating it;
    there, ``python -c 'import diagnose...'`` finds no ``python`` (Debian ships ``python3`` only) or one
    without diagnose, and the playbook copy of section 5 fails. The walkthrough says to activate the venv
    before its first command."""
    text = (DOCS / "acceptance.md").read_text(encoding="utf-8")
    first_python = text.index("python -c")
    activate = text.find(". .venv/bin/activate")
    assert 0 <= activate < first_python
