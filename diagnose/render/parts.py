"""Report chapters that read their own top-level lists of results.json (``training``, ``inference``,
``localization``, ``fleet``, ``stress``, ``fabric``, ``quarantine`` with ``bug_report``) or their own rows
(``watch``: the ``history.watch`` results), shown after the benchmarks.

Each part is a builder (results dict → its view model, or None when the run has nothing for it) and a
partial template under ``reports/`` that receives the view model as ``data``. Adding a chapter is one
entry here and one template: the fixed chapters and their numbering stay as they are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from diagnose.render.view_fabric import build_fabric
from diagnose.render.view_fleet import build_fleet
from diagnose.render.view_inference import build_inference
from diagnose.render.view_localization import build_localization
from diagnose.render.view_quarantine import build_quarantine
from diagnose.render.view_stress import build_stress
from diagnose.render.view_training import build_training
from diagnose.render.view_watch import build_watch


@dataclass(frozen=True)
class Part:
    """One chapter: its anchor, its heading, its partial template and the builder of its data."""

    key: str
    title: str
    template: str
    build: Callable[[dict[str, Any]], Any | None]


PARTS: tuple[Part, ...] = (
    Part("training", "Training: compute / communication overlap", "training.html.j2", build_training),
    Part("inference", "Inference: KV-cache transfer", "inference.html.j2", build_inference),
    Part("localization", "Localization: slow host or link", "localization.html.j2", build_localization),
    Part("fleet", "Fleet: hosts against their peers", "fleet.html.j2", build_fleet),
    Part("fabric", "Fabric: RDMA write bandwidth of every NIC, by rail", "fabric.html.j2", build_fabric),
    Part("stress", "GPUs under load: GEMM, HBM, memory test, SDC, burn-in", "stress.html.j2", build_stress),
    Part("watch", "Watch list: components getting worse night after night", "watch.html.j2", build_watch),
    Part(
        "quarantine",
        "Nodes diagnose acted on: cordons, drains, bug reports",
        "quarantine.html.j2",
        build_quarantine,
    ),
)


def build_parts(results: dict[str, Any]) -> list[tuple[Part, Any]]:
    """The parts this run has data for, each with its view model, in registry order."""
    built = []
    for part in PARTS:
        data = part.build(results)
        if data is not None:
            built.append((part, data))
    return built
