"""The shipped programs run on hosts that have nothing of diagnose: each imports only the standard
library, torch and the modules the launcher copies beside it, and runs from a folder holding just those."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from diagnose.launchers.base import LaunchSpec
from diagnose.launchers.torchrun_argv import PROGRAM_NAME, shipped_files
from tests.support.paths import REPO

SHIPPED = REPO / "diagnose" / "shipped"
PROGRAMS = sorted(p for p in SHIPPED.glob("*.py") if p.name != "__init__.py")


def spec_for(program: Path) -> LaunchSpec:
    return LaunchSpec(
        run_id="r",
        tag="t",
        hosts=[],
        connections={},
        nproc=1,
        backend="gloo",
        program_args=[],
        expected_rows=[],
        row_budget_s=lambda collective, nbytes: 1.0,
        out_dir=Path("."),
        program=program,
    )


BESIDE = {path.stem for path in spec_for(PROGRAMS[0]).beside}


def imported(path: Path) -> set[str]:
    """Top-level names of every import, nested or guarded ones too; ``from . import x`` gives ``.x``."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                names |= (
                    {f".{alias.name}" for alias in node.names} if not node.module else {f".{node.module}"}
                )
            else:
                names.add((node.module or "").split(".")[0])
    return names


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.name)
def test_imports_only_the_standard_library_torch_and_what_is_shipped_beside(path: Path) -> None:
    allowed = set(sys.stdlib_module_names) | {"torch"} | BESIDE | {f".{name}" for name in BESIDE}
    assert imported(path) <= allowed, f"{path.name} imports {sorted(imported(path) - allowed)}"
    assert "diagnose" not in imported(path)


@pytest.mark.parametrize("path", [p for p in PROGRAMS if p.stem not in BESIDE], ids=lambda p: p.name)
def test_runs_from_a_folder_holding_only_what_the_launcher_ships(path: Path, tmp_path: Path) -> None:
    for name, text in shipped_files(spec_for(path)).items():
        (tmp_path / name).write_text(text)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([PROGRAM_NAME, *(f"{n}.py" for n in BESIDE)])
    done = subprocess.run(
        [sys.executable, "-S", "-E", PROGRAM_NAME, "--help"],  # -S -E: no site-packages, so no diagnose
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("usage:")
