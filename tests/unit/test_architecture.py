"""The layout rules of docs/architecture.md, checked on the source: rooms, arrows, sizes, shipped programs.

Each rule here was broken once while the package grew (issue 22): loose modules at the top, cycles hidden
behind TYPE_CHECKING, private names borrowed across modules, a CLI that held check ids. Reading the source
with ``ast`` keeps the test independent of import side effects.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from diagnose.catalog.loading import load_catalog
from diagnose.catalog.stage_ids import STAGE_IDS
from tests.support.paths import REPO

PACKAGE = REPO / "diagnose"
MAX_TOP_MODULES = 6
MAX_LINES = 600


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


MODULES = _modules()


def _sources(root: Path) -> list[Path]:
    """Python files of the project under ``root``: virtual environments and hidden folders are not ours."""
    return sorted(
        p for p in root.rglob("*.py") if not any(part.startswith(".") for part in p.relative_to(REPO).parts)
    )


def _imports(name: str, path: Path) -> Iterator[tuple[str, list[str], int]]:
    """(module imported, names taken from it, line) for every import statement, nested or guarded ones too."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, [], node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            yield target, [alias.name for alias in node.names], node.lineno


def _edges(name: str, path: Path) -> set[str]:
    """The package modules whose code runs when ``name`` is imported: targets, their packages, submodules.

    A module's own enclosing packages are left out: Python runs them before the module, whatever it imports.
    """
    ancestors = {".".join(name.split(".")[:depth]) for depth in range(1, name.count(".") + 1)}
    edges = set()
    for target, names, _ in _imports(name, path):
        if not target.startswith("diagnose"):
            continue
        candidates = [target, *(f"{target}.{n}" for n in names)]
        for candidate in candidates:
            parts = candidate.split(".")
            for depth in range(2, len(parts) + 1):
                prefix = ".".join(parts[:depth])
                if prefix in MODULES and prefix != name and prefix not in ancestors:
                    edges.add(prefix)
    return edges


def test_few_modules_sit_directly_under_the_package() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_MODULES, top


def test_no_import_cycle_counting_guarded_and_local_imports() -> None:
    graph = {name: _edges(name, path) for name, path in MODULES.items()}
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [])
    assert not cycles, "\n".join(" -> ".join(cycle) for cycle in cycles[:10])


def test_no_private_name_is_imported_from_another_module() -> None:
    offenders = []
    for root in (PACKAGE, REPO / "checks", REPO / "tests", REPO / "bench"):
        for path in _sources(root):
            rel = path.relative_to(REPO)
            name = ".".join(rel.with_suffix("").parts)
            for target, names, line in _imports(name, path):
                if not target.startswith(("diagnose", "tests", "checks")):
                    continue
                private = [n for n in names if n.startswith("_") and not n.startswith("__")]
                if private:
                    offenders.append(f"{rel}:{line} imports {', '.join(private)} from {target}")
    assert not offenders, "\n".join(offenders)


def test_no_module_is_long() -> None:
    long = {
        str(path.relative_to(REPO)): n
        for path in sorted([*PACKAGE.rglob("*.py"), *(REPO / "checks").rglob("*.py")])
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, long


def test_shipped_programs_import_nothing_of_the_package() -> None:
    shipped = [name for name in MODULES if name.startswith("diagnose.shipped.")]
    assert shipped
    for name in shipped:
        for target, names, line in _imports(name, MODULES[name]):
            # common.py is copied beside every program (LaunchSpec.beside), gpu_sampler.py beside the stress
            # program, so a program may import those.
            beside = target == "diagnose.shipped" and set(names) <= {"common", "gpu_sampler"}
            assert beside or not target.startswith("diagnose"), f"{MODULES[name]}:{line} imports {target}"


def test_no_test_module_imports_another_test_module() -> None:
    for path in _sources(REPO / "tests"):
        if not path.name.startswith("test_"):
            continue
        name = ".".join(path.relative_to(REPO).with_suffix("").parts)
        for target, _, line in _imports(name, path):
            assert not re.search(r"(^|\.)test_\w+$", target), f"{path}:{line} imports {target}"


def test_every_integration_and_e2e_module_carries_its_marker() -> None:
    """`-m "not integration"` must leave out every test that needs the bed: four modules once had no marker."""
    for folder in ("integration", "e2e"):
        wanted = f"pytestmark = pytest.mark.{folder}\n"
        for path in sorted((REPO / "tests" / folder).glob("test_*.py")):
            assert wanted in path.read_text(encoding="utf-8"), f"{path} lacks `{wanted.strip()}`"


def test_architecture_names_every_room() -> None:
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    rooms = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))
    missing = [room for room in rooms if f"diagnose/{room}/" not in text]
    assert not missing, f"docs/architecture.md does not name {missing}"


def test_no_file_cites_a_document_outside_the_repository() -> None:
    cited = []
    for path in sorted(REPO.rglob("*")):
        hidden = any(part.startswith(".") for part in path.relative_to(REPO).parts)
        if hidden or not path.is_file() or path.suffix not in {".py", ".md", ".yaml", ".j2", ".sh"}:
            continue
        if path == Path(__file__):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in re.finditer(r"\.\./shared|(?<![\w/])DESIGN\.md", text):
            cited.append(f"{path.relative_to(REPO)}: {match.group(0)}")
    assert not cited, cited


def test_the_cli_holds_no_check_ids() -> None:
    ids = {entry.id for entry in load_catalog()} | {stage.id for stage in STAGE_IDS}
    text = (PACKAGE / "cli.py").read_text(encoding="utf-8")
    named = sorted(i for i in ids if re.search(rf"[\"'`]{re.escape(i)}[\"'`]", text))
    assert not named, named


#: Which rooms each room may import (docs/architecture.md's "may use" column); a new arrow is a design change.
MAY_USE = {
    "core": set(),
    "config": {"core", "connectors", "k8s"},
    "targets": {"core", "config", "parsers", "k8s"},
    "slurm": {"core", "config", "parsers", "targets", "history", "engine"},
    "k8s": {"core", "parsers"},
    "connectors": {"core", "parsers", "k8s"},
    "parsers": {"core"},
    "catalog": {"core"},
    "benchmarks": {
        "core",
        "catalog",
        "config",
        "connectors",
        "launchers",
        "localize",
        "parsers",
        "shipped",
        "probes",
    },
    "launchers": {"core", "connectors", "parsers", "shipped"},
    "probes": {
        "core",
        "catalog",
        "config",
        "parsers",
        "benchmarks",
        "launchers",
        "localize",
        "trace",
        "inference",
        "shipped",
    },
    "shipped": set(),
    "localize": {"core"},
    "trace": {"core", "catalog"},
    "inference": {"core", "parsers", "catalog"},
    "history": {"core", "catalog"},
    "quarantine": {"core", "catalog", "config", "connectors", "k8s", "parsers"},
    "render": {"core", "catalog"},
}


def test_rooms_use_only_the_rooms_the_architecture_names() -> None:
    crossings = []
    for name, path in MODULES.items():
        room = name.split(".")[1] if name.count(".") else None
        if room not in MAY_USE:
            continue
        for target in sorted(_edges(name, path)):
            other = target.split(".")[1]
            if other != room and other not in MAY_USE[room]:
                crossings.append(f"{name} imports {target}")
    assert not crossings, "\n".join(crossings)
