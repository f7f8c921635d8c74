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
from diagnose.render.view_inference import InferenceView, build_inference
from diagnose.render.view_localization import build_localization
from diagnose.render.view_quarantine import build_quarantine
from diagnose.render.view_stress import build_stress, stress_measured
from diagnose.render.view_training import build_training
from diagnose.render.view_watch import build_watch


def _always(_data: Any) -> bool:
    return True


def _inference_measured(data: InferenceView) -> bool:
    """A run that measured no pair and judged no serving file still has the chapter's verdicts, every one
    SKIP: a page that says only "not measured" three times."""
    return bool(data.pairs or data.serving) or any(v.status != "SKIP" for v in data.verdicts)


@dataclass(frozen=True)
class Part:
    """One chapter: its anchor, its heading, its partial template, the builder of its data, and whether
    that data holds anything measured (a chapter without is left out and named in the contents)."""

    key: str
    title: str
    template: str
    build: Callable[[dict[str, Any]], Any | None]
    measured: Callable[[Any], bool] = _always
    #: Why a chapter without anything measured is left out, as the contents' line says it.
    left_out_because: str = "every result SKIP"


PARTS: tuple[Part, ...] = (
    Part("training", "Training: compute / communication overlap", "training.html.j2", build_training),
    Part(
        "inference",
        "Inference: KV-cache transfer",
        "inference.html.j2",
        build_inference,
        _inference_measured,
    ),
    Part("localization", "Localization: slow host or link", "localization.html.j2", build_localization),
    Part("fleet", "Fleet: hosts against their peers", "fleet.html.j2", build_fleet),
    Part("fabric", "Fabric: RDMA write bandwidth of every NIC, by rail", "fabric.html.j2", build_fabric),
    Part(
        "stress",
        "GPUs under load: GEMM, HBM, memory test, SDC, burn-in",
        "stress.html.j2",
        build_stress,
        stress_measured,
        "not started: no host's Python could import torch",
    ),
    Part("watch", "Watch list: components getting worse night after night", "watch.html.j2", build_watch),
    Part(
        "quarantine",
        "Nodes diagnose acted on: cordons, drains, bug reports",
        "quarantine.html.j2",
        build_quarantine,
    ),
)


def build_parts(results: dict[str, Any]) -> tuple[list[tuple[Part, Any]], list[Part]]:
    """The parts this run measured something for, each with its view model, in registry order; and the
    parts it has records for that hold nothing measured (left out of the report, named in one line)."""
    built = []
    empty = []
    for part in PARTS:
        data = part.build(results)
        if data is None:
            continue
        if part.measured(data):
            built.append((part, data))
        else:
            empty.append(part)
    return built, empty
