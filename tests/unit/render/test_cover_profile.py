"""The cover's profile line carries the run's note and the profile suggested after the host stage, and
no placeholder dash where the run chose no profile."""

from __future__ import annotations

import json

from diagnose.core.units import MISSING
from diagnose.render.view import build_cover
from tests.support.paths import REPO


def test_the_cover_shows_no_profile_and_the_suggestion() -> None:
    results = json.loads((REPO / "tests/fixtures/results/h200_local.json").read_text())
    results["run"].pop("profile", None)
    results["run"]["profile_note"] = "no profile chosen (diagnose_profile unset): expected values absent"
    results["run"]["profile_suggestion"] = {
        "text": "suggested profile: single-node-nvlink (4× NVIDIA H200, NVLink on every pair, no RDMA port Active)",
        "groups": [],
    }
    profile = build_cover(results).profile
    # the note says there is no profile: no placeholder dash before it (the cover read "— — no profile")
    assert profile.startswith("no profile chosen (diagnose_profile unset): expected values absent — ")
    assert MISSING not in profile.split(" — ")
    assert profile.endswith(
        "— suggested profile: single-node-nvlink (4× NVIDIA H200, NVLink on every pair, no RDMA port Active)"
    )


def test_an_older_file_without_them_shows_the_profile_alone() -> None:
    results = json.loads((REPO / "tests/fixtures/results/h200_local.json").read_text())
    assert build_cover(results).profile == results["run"]["profile"]


def test_no_profile_and_no_note_reads_as_one_dash() -> None:
    results = json.loads((REPO / "tests/fixtures/results/h200_local.json").read_text())
    results["run"].pop("profile", None)
    assert build_cover(results).profile == MISSING
