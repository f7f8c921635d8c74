"""Every host-fact parser against real captured outputs, one case file per output (pyinfra style).

A case is ``tests/facts/<parser>/<case>.json``: the command that produced the output, where the output came
from (``source``), the output itself (``fixture``: a file under ``tests/fixtures/captured``, or inline
``output`` lines), its exit code, and either the expected ``facts`` or the ``raises`` error. Adding an odd
firmware's output is adding a file, not code.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from diagnose.core.check import ParseError
from diagnose.parsers.gpudirect import parse_driver_version_file, parse_kernel_release, parse_modules
from diagnose.parsers.ibstat import parse_ibstat
from diagnose.parsers.ibv_devinfo import parse_dev_infiniband, parse_ibv_devinfo
from diagnose.parsers.nccl_env import parse_nccl_env
from diagnose.parsers.nccl_version import parse_nccl_libs, parse_torch_probe
from diagnose.parsers.nvidia_smi import parse_smi_summary, parse_topo
from diagnose.parsers.os_release import parse_os_release

TESTS = Path(__file__).resolve().parents[2]
CASES = TESTS / "facts"
FIXTURES = TESTS / "fixtures" / "captured"

PARSERS: dict[str, Callable[[str, int | None], Any]] = {
    "ibstat": lambda text, rc: parse_ibstat(text),
    "ibv_devinfo": lambda text, rc: parse_ibv_devinfo(text),
    "dev_infiniband": parse_dev_infiniband,
    "smi_summary": lambda text, rc: parse_smi_summary(text),
    "topo": lambda text, rc: parse_topo(text),
    "modules": lambda text, rc: parse_modules(text),
    "nvidia_version": parse_driver_version_file,
    "kernel_release": lambda text, rc: parse_kernel_release(text),
    "torch_probe": parse_torch_probe,
    "nccl_libs": lambda text, rc: parse_nccl_libs(text),
    "nccl_env": lambda text, rc: parse_nccl_env(text),
    "os_release": lambda text, rc: parse_os_release(text),
}


def _case_paths() -> list[Path]:
    """This module's cases only: other parsers keep their own folders under tests/facts."""
    return [path for folder in sorted(PARSERS) for path in sorted((CASES / folder).glob("*.json"))]


def _case_files() -> list[Any]:
    return [pytest.param(path, id=f"{path.parent.name}/{path.stem}") for path in _case_paths()]


def _output(case: dict[str, Any]) -> str:
    if "fixture" in case:
        return (FIXTURES / case["fixture"]).read_text()
    return "\n".join(case["output"])


def check_case(path: Path, parse: Callable[[str, int | None], Any]) -> None:
    """One case file against its parser: the facts it expects, or the ParseError it expects."""
    case = json.loads(path.read_text())
    assert case.get("source"), f"{path} must say where its output came from"
    text = _output(case)
    if "raises" in case:
        with pytest.raises(ParseError, match=case["raises"]):
            parse(text, case.get("exit_code", 0))
        return
    assert parse(text, case.get("exit_code", 0)) == case["facts"]


@pytest.mark.parametrize("path", _case_files())
def test_case(path: Path) -> None:
    check_case(path, PARSERS[path.parent.name])


def test_every_parser_has_cases() -> None:
    missing = [folder for folder in PARSERS if not any((CASES / folder).glob("*.json"))]
    assert not missing, f"parsers without a case: {missing}"


def test_every_fixture_is_used_and_sourced() -> None:
    """A captured output no case reads is dead weight; one without a SOURCE line has no provenance."""
    used = {json.loads(p.read_text()).get("fixture") for p in _case_paths()}
    folders = {Path(name).parent.name for name in used if name}
    for fixture in sorted(f for folder in folders for f in (FIXTURES / folder).glob("*.txt")):
        relative = fixture.relative_to(FIXTURES).as_posix()
        assert relative in used, f"no case reads {relative}"
        source = (fixture.parent / "SOURCE").read_text()
        assert fixture.name in source, f"{relative} is not named in its folder's SOURCE"
