"""The report reads results.json only: nothing of the stages that wrote it, so it never judges again."""

from __future__ import annotations

import ast

from tests.support.paths import REPO

RENDER = REPO / "diagnose" / "render"
# The rooms that measure and judge; the report shows what they recorded, with today's code or next year's.
FORBIDDEN = ("diagnose.benchmarks", "diagnose.probes", "diagnose.engine", "diagnose.inference")


def test_render_imports_nothing_of_the_stages() -> None:
    paths = sorted(RENDER.glob("*.py"))
    assert len(paths) > 10
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            found += [f"{path.name}:{node.lineno} {n}" for n in names if n.startswith(FORBIDDEN)]
    assert not found, found
