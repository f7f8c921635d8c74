"""The fleet chapter of two CPU hosts: their memory copies differed by 43 %, which two hosts cannot pin on
either, so fleet.memcpy is a PASS that judged no figure (``judged: false``, the tally's *shown*). The chapter
showed the raw two-host verdict, WARN, beside a run with 0 WARN; it now says SHOWN with the result's own
message. The records are those of a two-host run of the sshd test bed (results.json ``fleet``), trimmed."""

from __future__ import annotations

from typing import Any

from diagnose.render.view_fleet import build_fleet

MESSAGE = (
    "memory copy over 2 hosts: median 3.33 GB/s, MAD 0.90 GB/s (27.2 %); two hosts cannot say which one is odd: "
    "node2 is 42.7 % below node1 (weak verdict: add hosts to judge them against a fleet); the profile sets no "
    "floor for it, so the fleet as a whole is not judged"
)


def _results(judged: bool) -> dict[str, Any]:
    hosts = [
        {"host": h, "metric": "memcpy", "check": "fleet.memcpy", "group": "CPU host", "unit": "GB/s",
         "value": v, "median": 3.328, "mad": 0.904, "robust_z": z, "deviation_pct": d, "verdict": "PASS",
         "why": "within the fleet's spread", "floor": None, "fleet_hosts": 2}
        for h, v, z, d in (("node1", 4.232, 0.67, 27.2), ("node2", 2.424, -0.67, -27.2))
    ]  # fmt: skip
    summary = {
        "host": None, "metric": "memcpy", "check": "fleet.memcpy", "group": "CPU host", "unit": "GB/s",
        "hosts": 2, "median": 3.328, "mad": 0.904, "floor": None, "shortfall": False, "weak": True,
        "verdict": "WARN", "message": MESSAGE,
    }  # fmt: skip
    check = {
        "id": "fleet.memcpy",
        "host": None,
        "status": "PASS" if not judged else "WARN",
        "judged": judged,
        "message": MESSAGE + " (CPU hosts, fewer than 4: the gap is shown, not judged)",
    }
    return {"fleet": [*hosts, summary], "checks": [check]}


def test_a_fleet_line_that_judged_nothing_reads_shown_with_its_result_message() -> None:
    view = build_fleet(_results(judged=False))
    assert view is not None
    (summary,) = view.summaries
    assert summary.status == "SHOWN"
    assert summary.message.endswith("(CPU hosts, fewer than 4: the gap is shown, not judged)")


def test_a_judged_fleet_line_keeps_its_verdict() -> None:
    view = build_fleet(_results(judged=True))
    assert view is not None
    (summary,) = view.summaries
    assert (summary.status, summary.message) == ("WARN", MESSAGE)
