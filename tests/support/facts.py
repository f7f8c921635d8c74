"""The one runner of parser cases (pyinfra style): ``tests/facts/<parser>/<case>.json``, one per output.

A case holds the command that produced the output, where the output came from (``source``), the output itself
(``fixture``: a file under ``tests/fixtures/captured``, or inline ``output`` lines), its exit code, and either the
facts a reader of the capture ``states`` (each one strict, the parser free to say more; a long list stated by
its count, what every item says and the odd one out) or the ``raises`` error. The parser's whole answer is no
case: a saved blob nobody reads passes whatever it holds. A test module maps its folders to parsers and hands them
here, so adding an odd firmware's output is adding a file, not code.

A ``source`` names where the output came from in a form one can follow (:data:`SOURCE_SHAPES`): a captured
fixture's folder SOURCE, a repository and path (``owner/repo:path``), an address, a named machine with the date
of the capture, the exact command with its tools' versions and the system it ran on, or ``composed from`` one
of those with what was changed. A description alone, or "the development container", is refused.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from diagnose.core.check import ParseError
from tests.support.paths import CAPTURED, FACTS, REPO

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


# Where an output came from, in a form one can follow: a repository and path, an address, a lent machine and
# date, or the exact command with its tools' versions and the system it ran on (what anyone can run again; the
# project's own development container, named alone, is a place nobody else can look).
REFERENCE = (
    r"(?:[\w.-]+/[\w.-]+:[\w./-]+"  # owner/repo:path
    r"|https?://\S+"
    r"|machine: (?!development container\b)[^,:]+, \d{4}-\d{2}-\d{2}"  # machine: lent nvidia-h100-x1, 2026-11-25
    r"|command: `[^`]+` \([^()]*\d[^()]*\) on [^,:`]+, \d{4}-\d{2}-\d{2}"  # the command, its tools' versions, where
    r"|tests/fixtures/captured/[\w./-]+\.txt)"  # a capture of this repository, itself sourced
)
SOURCE_SHAPES = re.compile(
    rf"^(?:see tests/fixtures/captured/[\w-]+/SOURCE\b|{REFERENCE}|composed from {REFERENCE})"
)


def source_problem(case: dict[str, Any]) -> str | None:
    """Why the case's ``source`` does not say where its output came from; None when it does."""
    source = case.get("source") or ""
    if not SOURCE_SHAPES.match(source):
        return f"source {source!r} names no repository and path, address, machine or captured file"
    if "fixture" in case:
        folder = Path(case["fixture"]).parent.as_posix()
        if not source.startswith(f"see tests/fixtures/captured/{folder}/SOURCE"):
            return f"a captured fixture's source is its folder's SOURCE (tests/fixtures/captured/{folder}/SOURCE)"
    for named in re.findall(r"tests/fixtures/captured/[\w./-]+", source):
        if not (REPO / named).exists():
            return f"source names {named}, which does not exist"
    return None


_MISSING = object()


def _reading(item: Any, key: str) -> Any:
    """How a list item's ``key`` (the item itself when the key is empty) reads as a reader writes it:
    ``index=1`` for the number, ``active=false`` for the JSON boolean, ``state=Down`` for the string."""
    if key:
        if not isinstance(item, dict) or key not in item:
            return _MISSING
        item = item[key]
    if item is None or isinstance(item, bool):
        return json.dumps(item)
    return str(item)


def _stated_over(expected: dict[str, Any], actual: list[Any] | dict[str, Any]) -> str | None:
    """A collection stated by what a reader counts and picks out instead of item by item: ``#`` its length,
    ``*`` what every item says, ``#key=value`` how many items read so, ``key=value`` the one item that does,
    a number the item at that place (in a list), or a key of the mapping itself."""
    items = list(actual.values()) if isinstance(actual, dict) else actual
    by_key: dict[str, dict[Any, list[Any]]] = {}  # key -> reading -> items, built once per key named

    def reading_so(name: str, wanted: str) -> list[Any]:
        if name not in by_key:
            groups: dict[Any, list[Any]] = {}
            for item in items:
                groups.setdefault(_reading(item, name), []).append(item)
            by_key[name] = groups
        return by_key[name].get(wanted, [])

    for key, value in expected.items():
        if isinstance(actual, dict) and key in actual:
            if (found := _departure(value, actual[key])) is not None:
                return f".{key}{found}"
        elif key == "#":
            if len(items) != value:
                return f"[#]: {len(items)} items, not {value}"
        elif key == "*":
            for i, item in enumerate(items):
                if (found := _departure(value, item)) is not None:
                    return f"[{i}]{found}"
        elif key.startswith("#") and "=" in key:
            count = len(reading_so(*key[1:].split("=", 1)))
            if count != value:
                return f"[{key}]: {count} items, not {value}"
        elif "=" in key:
            picked = reading_so(*key.split("=", 1))
            if len(picked) != 1:
                return f"[{key}]: {len(picked)} items"
            if (found := _departure(value, picked[0])) is not None:
                return f"[{key}]{found}"
        elif (
            isinstance(actual, list) and re.fullmatch(r"-?\d+", key) and -len(items) <= int(key) < len(items)
        ):
            if (found := _departure(value, items[int(key)])) is not None:
                return f"[{key}]{found}"
        else:
            return f"[{key}]: missing"
    return None


def _departure(expected: Any, actual: Any) -> str | None:
    """The first place where ``actual`` departs from what ``expected`` states, as a path and what was found
    there; None where it holds. The path is written only on the way back from a departure, so a case that
    holds costs no more than walking what it states."""
    if isinstance(expected, dict) and expected:
        if not isinstance(actual, dict | list):
            return f": {actual!r} is not a mapping"
        return _stated_over(expected, actual)
    if isinstance(expected, list) and expected:
        if not isinstance(actual, list) or len(actual) != len(expected):
            return f": {actual!r} is not {len(expected)} items"
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            if (found := _departure(e, a)) is not None:
                return f"[{i}]{found}"
        return None
    if expected == actual and isinstance(expected, bool) == isinstance(actual, bool):
        return None
    return f": {actual!r}, not {expected!r}"


def differences(expected: Any, actual: Any, where: str = "facts") -> list[str]:
    """Where ``actual`` departs from the facts ``expected`` states (the first place, or none): every key stated
    must be there with its value, every list must have the stated length and items; keys not stated are the
    parser's own business (an empty dict or list states emptiness). A collection may also be stated by a
    mapping of counts and picks (:func:`_stated_over`): eight HCAs, port 1 of mlx5_3 Down, the rest Active,
    without listing them."""
    found = _departure(expected, actual)
    return [] if found is None else [f"{where}{found}"]


def check_case(path: Path, parse: Parse) -> None:
    """One case file against its parser: the facts it expects or states, or the ParseError it expects."""
    case = json.loads(path.read_text())
    problem = source_problem(case)
    assert problem is None, f"{path}: {problem}"
    text = (CAPTURED / case["fixture"]).read_text() if "fixture" in case else "\n".join(case["output"])
    if "raises" in case:
        with pytest.raises(ParseError, match=case["raises"]):
            parse(text, case.get("exit_code", 0))
        return
    parsed = parse(text, case.get("exit_code", 0))
    assert "facts" not in case, (
        f"{path}: a case states the facts a reader would write, not the parser's answer"
    )
    assert differences(case["states"], parsed) == [], f"{path}: the facts it states"


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
