"""The README's two set-up commands are what CI runs, and their comments name every package the scripts install.

.ci/run takes the commands from the README through .ci/readme_commands.py; these tests hold the shape that
makes that safe (two commands, a venv in each, command 2 never starting CI again) and keep the comments true
to .ci/install-deps and .ci/install-test-deps.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / ".ci" / "readme_commands.py"


def command(n: str, readme: Path | None = None) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, str(SCRIPT), n, *([] if readme is None else [str(readme)])]
    return subprocess.run(argv, capture_output=True, text=True)


def packages(script: str) -> set[str]:
    """The Debian package names a .ci script puts in its package lists."""
    text = (ROOT / ".ci" / script).read_text()
    names: set[str] = set()
    for group in re.findall(r"^\s*(?:\[.*\] \|\| )?(?:packages|optional)\+?=\(([^)]*)\)", text, re.M):
        names |= {word for word in group.split() if not word.startswith('"$')}
    return names


def comment_of(n: int) -> str:
    """The comment lines above command n in the README's first bash block."""
    text = (ROOT / "README.md").read_text()
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    return block.split("\n\n")[n - 1]


def test_the_readme_holds_two_commands_each_in_its_own_virtual_environment() -> None:
    first, second = command("1"), command("2")
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    one, two = first.stdout.strip(), second.stdout.strip()
    assert one.startswith(".ci/install-deps && python3 -m venv .venv && ")
    assert one.endswith(".venv/bin/diagnose run"), "command 1 runs diagnose on this machine"
    assert two.startswith(".ci/install-test-deps .venv && . .venv/bin/activate && ")
    assert "python -m pytest" in two and ".ci/run" not in two
    assert (
        "pip install ." in one and "sudo pip" not in one + two and "--break-system-packages" not in one + two
    )


def test_the_comments_name_every_package_the_scripts_install() -> None:
    deps, test_deps = packages("install-deps"), packages("install-test-deps")
    assert {"python3-venv", "libpango-1.0-0", "libpangoft2-1.0-0"} <= deps
    assert {"openssh-server", "slurmd", "kubernetes-client"} <= test_deps
    words_one, words_two = ({w.strip(",.;:()") for w in comment_of(n).split()} for n in (1, 2))
    assert deps - words_one == set(), "command 1's comment leaves out a package .ci/install-deps installs"
    assert test_deps - words_two == set(), "command 2's comment leaves out a package of .ci/install-test-deps"


def test_a_readme_whose_block_is_not_two_commands_is_refused(tmp_path: Path) -> None:
    three = tmp_path / "three.md"
    three.write_text("# x\n\n```bash\n# one\na\n\n# two\nb && \\\n  c\n\n# three\nd\n```\n")
    done = command("1", three)
    assert done.returncode == 2 and "holds 3 commands, not 2" in done.stderr
    recursive = tmp_path / "recursive.md"
    recursive.write_text("```bash\n# one\na\n# two\n.ci/install-test-deps .venv && .ci/run\n```\n")
    done = command("2", recursive)
    assert done.returncode == 2 and "runs .ci/run" in done.stderr
    joined = tmp_path / "joined.md"
    joined.write_text("```bash\n# one\na \\\n  b\n# two\nc\n```\n")
    assert command("1", joined).stdout.strip() == "a  b"
