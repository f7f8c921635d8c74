"""A stand-in ``nvidia-bug-report.sh`` for test hosts: the driver's script takes minutes and needs a GPU.

Like the real one it takes ``--output-file FILE`` and writes ``FILE.gz`` (default
``nvidia-bug-report.log.gz`` in the working folder), starting with a real log's prologue
(tests/fixtures/captured/bug_report/, see SOURCE). ``filler_bytes`` of incompressible text follow it, so a
test can make the log larger than ``bug_report_max_bytes``; ``hang`` makes it write its prologue and then
wait, as the real script does on a GPU that stopped answering, with its own and its child's process ids
appended to ``pid_file`` so a test can see both were stopped.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from tests.support.paths import CAPTURED

HEADER = CAPTURED / "bug_report" / "header_rtx3060_2022.txt"
TOOL = "nvidia-bug-report.sh"


def bug_report_tool(filler_bytes: int = 0, hang: bool = False, pid_file: Path | None = None) -> str:
    """The script text (placed on a test host's PATH as ``nvidia-bug-report.sh``)."""
    header = shlex.quote(HEADER.read_text())
    filler = f"head -c {int(filler_bytes)} /dev/urandom | base64 -w 0; " if filler_bytes else ""
    wait = ""
    if hang:
        assert pid_file is not None, "a hanging stand-in records its process ids"
        wait = f"echo $$ >> {shlex.quote(str(pid_file))}; sleep 600 & echo $! >> {shlex.quote(str(pid_file))}; wait\n"
    return (
        "#!/bin/sh\n"
        "out=nvidia-bug-report.log\n"
        'while [ $# -gt 0 ]; do case "$1" in --output-file) out="$2"; shift 2 ;; *) shift ;; esac; done\n'
        'echo "nvidia-bug-report.sh will now collect information about your system and create the file '
        "'$out.gz' in the current directory.\"\n"
        f'{{ printf "%s" {header}; {filler}}} | gzip -c > "$out.gz"\n'
        f"{wait}"
        'echo "complete."\n'
    )
