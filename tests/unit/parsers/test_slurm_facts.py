"""The Slurm output parsers against real outputs captured on the Slurm test bed (the runner of tests/support/facts.py).

Cases live in ``tests/facts/<parser>/<case>.json`` and read fixtures from ``tests/fixtures/captured``'s
sinfo, scontrol_hostnames and srun folders, each named with its origin in that folder's SOURCE.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from diagnose.parsers.sinfo import parse_hostnames, parse_sinfo_nodes
from diagnose.parsers.srun_output import split_labelled, task_endings
from tests.support.facts import Parse, case_params, check_case, folders_without_cases


def _labelled(text: str) -> dict[str, Any]:
    tasks, other = split_labelled(text)
    return {"tasks": {str(task): lines for task, lines in tasks.items()}, "other": other}


PARSERS: dict[str, Parse] = {
    "sinfo_nodes": lambda text, rc: parse_sinfo_nodes(text),
    "hostnames": lambda text, rc: parse_hostnames(text),
    "srun_endings": lambda text, rc: task_endings(split_labelled(text)[1]),
    "srun_labelled": lambda text, rc: _labelled(text),
}


@pytest.mark.parametrize("path", case_params(PARSERS))
def test_case(path: Path) -> None:
    check_case(path, PARSERS[path.parent.name])


def test_every_parser_has_cases() -> None:
    missing = folders_without_cases(PARSERS)
    assert not missing, f"parsers without a case: {missing}"
