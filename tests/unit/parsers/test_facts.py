"""Every host-fact parser against real captured outputs, one case file per output (pyinfra style).

A case is ``tests/facts/<parser>/<case>.json``, run by :func:`tests.support.facts.check_case`: adding an odd
firmware's output is adding a file, not code.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from diagnose.parsers.gpudirect import parse_driver_version_file, parse_kernel_release, parse_modules
from diagnose.parsers.ibstat import parse_ibstat
from diagnose.parsers.ibv_devinfo import parse_dev_infiniband, parse_ibv_devinfo
from diagnose.parsers.nccl_env import parse_nccl_env
from diagnose.parsers.nccl_version import parse_nccl_libs, parse_torch_probe
from diagnose.parsers.nvidia_smi import parse_smi_summary, parse_topo
from diagnose.parsers.os_release import parse_os_release
from tests.support.facts import (
    Parse,
    case_params,
    case_paths,
    check_case,
    fixtures_read,
    folders_without_cases,
)
from tests.support.paths import CAPTURED

PARSERS: dict[str, Parse] = {
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


@pytest.mark.parametrize("path", case_params(PARSERS))
def test_case(path: Path) -> None:
    check_case(path, PARSERS[path.parent.name])


def test_every_parser_has_cases() -> None:
    missing = folders_without_cases(PARSERS)
    assert not missing, f"parsers without a case: {missing}"


def test_every_fixture_is_used_and_sourced() -> None:
    """A captured output no case reads is dead weight; one without a SOURCE line has no provenance."""
    used = fixtures_read(case_paths(PARSERS))
    folders = {Path(name).parent.name for name in used}
    for fixture in sorted(f for folder in folders for f in (CAPTURED / folder).glob("*.txt")):
        relative = fixture.relative_to(CAPTURED).as_posix()
        assert relative in used, f"no case reads {relative}"
        source = (fixture.parent / "SOURCE").read_text()
        assert fixture.name in source, f"{relative} is not named in its folder's SOURCE"
