"""A host whose InfiniBand port flaps between nights is history.unstable, through `diagnose run --history`.

Each night is a fresh test bed at the same inventory path, node2 healthy or with its port Down
(tests/support/hostkit.py), and the same history database; ``-e history_unstable_flips=2`` makes three nights enough.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import diagnose
from tests.support.hostkit import PROFILE, healthy_h100, memlock_vars, port_down
from tests.support.testbed import HostSpec, TestBed

pytestmark = pytest.mark.e2e

PLAYBOOK = """name: flap-watch
description: the port checks only, night after night
checks: [host.reachable, ib.port_state]
"""


def night(tmp_path: Path, n: int, node2: HostSpec) -> dict:
    inventory, playbook = tmp_path / "inv.yaml", tmp_path / "flap-watch.yaml"
    playbook.write_text(PLAYBOOK)
    out = tmp_path / f"night{n}"
    with TestBed(tmp_path / f"bed{n}") as bed:
        bed.add_many([healthy_h100("node1"), node2])
        bed.write_inventory(inventory)
        done = diagnose(
            "run",
            "-i",
            str(inventory),
            "--playbook",
            str(playbook),
            "--history",
            str(tmp_path / "h.sqlite3"),
            "-o",
            str(out),
            "--format",
            "json",
            "-e",
            f"diagnose_profile={PROFILE}",
            "-e",
            "history_unstable_flips=2",
            *memlock_vars(),
            cwd=tmp_path,
            timeout=300,
        )
    assert done.returncode in (0, 1), done.stderr
    return json.loads((out / "results.json").read_text())


def history_checks(results: dict) -> list[tuple[str, str | None, str]]:
    return [(c["id"], c["host"], c["status"]) for c in results["checks"] if c["id"].startswith("history.")]


def test_a_flapping_port_is_unstable_on_its_good_nights_and_bad_ones(tmp_path: Path) -> None:
    assert history_checks(night(tmp_path, 1, healthy_h100("node2"))) == []
    down = night(tmp_path, 2, port_down("node2"))
    assert history_checks(down) == [("history.regression", "node2", "FAIL")], "one change: a regression"

    back = night(tmp_path, 3, healthy_h100("node2"))
    assert back["verdict"] == "PASS"
    (unstable,) = [c for c in back["checks"] if c["id"] == "history.unstable"]
    assert (unstable["host"], unstable["status"]) == ("node2", "WARN")
    assert unstable["observed"] == ["PASS", "FAIL", "PASS"]
    assert "ib.port_state on node2 is unstable: failed 1 of the last 3 runs" in unstable["message"]

    again = night(tmp_path, 4, port_down("node2"))
    assert again["verdict"] == "FAIL", "the port is down tonight: its own check fails"
    assert history_checks(again) == [("history.unstable", "node2", "WARN")], "not one more regression"
