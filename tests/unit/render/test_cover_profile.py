"""The cover's profile line carries the run's note and the profile suggested after the host stage."""

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
    assert profile.startswith(
        f"{MISSING} — no profile chosen (diagnose_profile unset): expected values absent — "
    )
    assert profile.endswith(
        "— suggested profile: single-node-nvlink (4× NVIDIA H200, NVLink on every pair, no RDMA port Active)"
    )


def test_an_older_file_without_them_shows_the_profile_alone() -> None:
    results = json.loads((REPO / "tests/fixtures/results/h200_local.json").read_text())
    assert build_cover(results).profile == results["run"]["profile"]
