"""What ``srun --label`` prints: each task's lines behind its task id, and srun's own verdict on each task.

The srun launcher (:mod:`diagnose.launchers.srun`) follows a Slurm step from the controller: the
step's two output streams come home through srun itself, so these pure functions split them back into
tasks and read which task ended how (``srun: error: n2: task 1: Exited with exit code 1``).
"""

from __future__ import annotations

import re
from typing import Any

# srun --label puts the task id, right-aligned to the width of the largest one, before each line.
_LABELLED = re.compile(r"^\s*(\d+): ?(.*)$")
# srun: error: <hostlist>: task<s> <task ranges>: <how it ended>
_TASK_END = re.compile(r"^srun: error: (?P<nodes>\S+): tasks? (?P<tasks>[0-9,\-\[\]]+): (?P<how>.+)$")
_EXIT = re.compile(r"^Exited with exit code (\d+)$")
# Signals as srun names them (strsignal), each with the conventional shell status 128 + number.
_SIGNALS = {
    "Hangup": 1,
    "Interrupt": 2,
    "Quit": 3,
    "Illegal instruction": 4,
    "Aborted": 6,
    "Bus error": 7,
    "Floating point exception": 8,
    "Killed": 9,
    "Segmentation fault": 11,
    "Terminated": 15,
}
_NODE_FAILURE = re.compile(r"^srun: error: Node failure on (\S+)$")


def split_labelled(text: str) -> tuple[dict[int, list[str]], list[str]]:
    """Lines by task id, and the lines no task printed (srun's and slurmstepd's own)."""
    tasks: dict[int, list[str]] = {}
    other: list[str] = []
    for line in text.splitlines():
        match = _LABELLED.match(line)
        if match:
            tasks.setdefault(int(match.group(1)), []).append(match.group(2))
        elif line.strip():
            other.append(line)
    return tasks, other


def _task_ids(text: str) -> list[int]:
    ids: list[int] = []
    for part in text.strip("[]").split(","):
        begin, _, end = part.partition("-")
        if begin.isdigit() and (not end or end.isdigit()):
            ids.extend(range(int(begin), int(end or begin) + 1))
    return ids


def task_endings(lines: list[str]) -> list[dict[str, Any]]:
    """srun's lines on tasks that did not end well: the nodes (a hostlist as srun prints it), the task ids,
    the exit status (128 + signal for a signal) and srun's words; and each node that failed under the step."""
    endings: list[dict[str, Any]] = []
    for line in lines:
        match = _TASK_END.match(line.strip())
        if match:
            how = match.group("how").strip()
            code: int | None = None
            exited = _EXIT.match(how)
            if exited:
                code = int(exited.group(1))
            else:
                name = how.removesuffix(" (core dumped)")
                code = 128 + _SIGNALS[name] if name in _SIGNALS else None
            endings.append(
                {
                    "nodes": match.group("nodes"),
                    "tasks": _task_ids(match.group("tasks")),
                    "code": code,
                    "how": how,
                }
            )
            continue
        failure = _NODE_FAILURE.match(line.strip())
        if failure:
            endings.append({"nodes": failure.group(1), "tasks": [], "code": None, "how": "node failure"})
    return endings
