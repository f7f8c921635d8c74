"""The one runner of parser cases (pyinfra style): ``tests/facts/<parser>/<case>.json``, one per output.

A case holds the command that produced the output, where the output came from (``source``), the output itself
(``fixture``: a file under ``tests/fixtures/captured``, or inline ``output`` lines), its exit code, and either the
expected ``facts`` or the ``raises`` error. A test module maps its folders to parsers and hands them here, so
adding an odd firmware's output is adding a file, not code.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from diagnose.core.check import ParseError
from tests.support.paths import CAPTURED, FACTS

Parse = Callable[[str, int | None], Any]


def case_paths(folders: Iterable[str]) -> list[Path]:
    """The case files of these parser folders only (other modules keep their own folders under tests/facts)."""
    return [path for folder in sorted(folders) for path in sorted((FACTS / folder).glob("*.json"))]


def case_params(folders: Iterable[str]) -> list[Any]:
    """The case files as pytest parameters named ``<parser>/<case>``."""
    return [pytest.param(path, id=f"{path.parent.name}/{path.stem}") for path in case_paths(folders)]


def folders_without_cases(folders: Iterable[str]) -> list[str]:
    """The parser folders that hold no case: a parser nothing tests."""
    return [folder for folder in folders if not any((FACTS / folder).glob("*.json"))]


def fixtures_read(paths: Iterable[Path]) -> set[str]:
    """The captured outputs (relative to tests/fixtures/captured) that these cases read."""
    return {name for path in paths if (name := json.loads(path.read_text()).get("fixture"))}


def check_case(path: Path, parse: Parse) -> None:
    """One case file against its parser: the facts it expects, or the ParseError it expects."""
    case = json.loads(path.read_text())
    assert case.get("source"), f"{path} must say where its output came from"
    text = (CAPTURED / case["fixture"]).read_text() if "fixture" in case else "\n".join(case["output"])
    if "raises" in case:
        with pytest.raises(ParseError, match=case["raises"]):
            parse(text, case.get("exit_code", 0))
        return
    assert parse(text, case.get("exit_code", 0)) == case["facts"]


def fact_suite(
    parsers: Mapping[str, Parse], folders: Iterable[str] | None = None, also_read: Iterable[Path] = ()
) -> tuple[Callable[..., None], ...]:
    """The three tests every parser module owes its cases, bound to its parsers.

    ``folders``: the captured-output folders whose every file must be read by a case (or named in one of
    ``also_read``, the rule tests that read captures directly) and named in the folder's SOURCE; by default
    the folders the cases read from.
    """

    @pytest.mark.parametrize("path", case_params(parsers))
    def test_case(path: Path) -> None:
        check_case(path, parsers[path.parent.name])

    def test_every_parser_has_cases() -> None:
        missing = folders_without_cases(parsers)
        assert not missing, f"parsers without a case: {missing}"

    def test_every_fixture_is_used_and_sourced() -> None:
        """A captured output nothing reads is dead weight; one without a SOURCE line has no provenance."""
        used = fixtures_read(case_paths(parsers))
        readers = "".join(path.read_text() for path in also_read)
        names = sorted(set(folders)) if folders is not None else sorted({Path(n).parent.name for n in used})
        for folder in names:
            source = (CAPTURED / folder / "SOURCE").read_text()
            for fixture in sorted((CAPTURED / folder).glob("*.txt")):
                relative = fixture.relative_to(CAPTURED).as_posix()
                assert relative in used or relative in readers, f"no case or rule test reads {relative}"
                assert fixture.name in source, f"{relative} is not named in its folder's SOURCE"

    return test_case, test_every_parser_has_cases, test_every_fixture_is_used_and_sourced
