"""Print set-up command N (1 or 2) of the README, so that CI runs them as the README writes them.

Usage: readme_commands.py N [README] (the repository's README.md by default).

The README's first ```bash block holds exactly two commands, each a line (or lines joined by a trailing
backslash) after its comment. Anything else there is an error: a third command, a missing one, or a test
command that would start CI again (.ci/run runs command 2).
"""

from __future__ import annotations

import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def first_bash_block(text: str) -> list[str]:
    """The lines of the first ```bash fenced block."""
    lines = text.splitlines()
    start = lines.index("```bash") + 1
    return lines[start : lines.index("```", start)]


def commands(text: str) -> list[str]:
    """The commands of the first ```bash block, comments and blank lines left out, continuations joined."""
    found: list[str] = []
    pending = ""
    for line in first_bash_block(text):
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        found.append(pending + stripped)
        pending = ""
    return found


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2) or argv[0] not in ("1", "2"):
        print("usage: readme_commands.py 1|2 [README]", file=sys.stderr)
        return 2
    readme = Path(argv[1]) if len(argv) == 2 else README
    found = commands(readme.read_text())
    if len(found) != 2:
        print(f"{readme}: the first ```bash block holds {len(found)} commands, not 2", file=sys.stderr)
        return 2
    if ".ci/run" in found[1]:
        print(f"{readme}: command 2 runs .ci/run, which runs command 2", file=sys.stderr)
        return 2
    print(found[int(argv[0]) - 1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
