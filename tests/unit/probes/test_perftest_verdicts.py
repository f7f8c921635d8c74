"""The per-NIC benchmark's verdicts through its real driver (diagnose.probes.perftest_campaign) on a
modelled fabric: every pair on a rail runs at its slower NIC's pace and its cable's, in both directions.

Healthy NDR ports write at 391 Gb/s (the bed's stand-in: the HDR capture's 195.6 Gb/s, scaled to 400).
"""

from __future__ import annotations

from collections.abc import Sequence

from diagnose.core.model import CheckResult
from diagnose.localize.model import edge
from diagnose.probes import fleet_judge
from diagnose.probes.perftest_campaign import Campaign, Launch, Outcome
from diagnose.probes.perftest_plan import HostRails, Nic
from diagnose.probes.perftest_readings import Reading
from diagnose.probes.perftest_settings import Settings

HEALTHY_GBPS = 391.2


class Fabric:
    """Per NIC and per cable a factor on the healthy figure; ``latency_us`` the p99 of every rail pair."""

    def __init__(
        self,
        nic: dict[tuple[str, int], float] | None = None,
        link: dict[tuple[str, str, int], float] | None = None,
        together: float = 1.0,
        latency_us: float = 2.03,
        failing: set[str] | None = None,
    ) -> None:
        self.nic = nic or {}
        self.link = {(*edge(a, b), r): f for (a, b, r), f in (link or {}).items()}
        self.together = together
        self.latency_us = latency_us
        self.failing = failing or set()
        self.rounds: list[list[tuple[str, str]]] = []

    def __call__(self, number: int, launches: Sequence[Launch]) -> list[Reading]:
        self.rounds.append([(a, b) for a, b, _ in launches])
        readings = []
        for _, _, steps in launches:
            for step in steps:
                for rail in step.rails:
                    reading = Reading(number, step, rail, f"mlx5_{rail}", f"mlx5_{rail}", 400.0, "host→host")
                    pace = min(
                        self.nic.get((step.writer, rail), 1.0),
                        self.nic.get((step.server, rail), 1.0),
                        self.link.get((*edge(step.writer, step.server), rail), 1.0),
                    )
                    if self.failing & {step.writer, step.server}:
                        reading.error = "Couldn't connect to 10.0.0.9:18515"
                    elif step.kind == "bw":
                        share = self.together if step.mode == "together" else 1.0
                        reading.gbps = round(HEALTHY_GBPS * pace * share, 2)
                    else:
                        reading.latency = {
                            "typical_us": 1.87,
                            "avg_us": 1.88,
                            "p99_us": self.latency_us,
                            "p999_us": 5.4,
                        }
                    readings.append(reading)
        return readings


def rails_for(names: Sequence[str], count: int = 2) -> dict[str, HostRails]:
    return {
        n: HostRails(
            n, f"10.0.0.{i}", tuple(Nic(n, r, f"mlx5_{r}", 1, 400, r) for r in range(count)), True, "test"
        )
        for i, n in enumerate(names)
    }


def campaign(fabric: Fabric, hosts: int = 6, latency: bool = False, **settings: object) -> Outcome:
    names = [f"node{i}" for i in range(1, hosts + 1)]
    return Campaign(
        rails_for(names),
        Settings(**settings),
        fleet_judge.Thresholds(),
        fabric,
        latency=latency,  # type: ignore[arg-type]
    ).run(names)


def findings(outcome: Outcome, status: str | None = None) -> list[CheckResult]:
    return [
        c for c in outcome.conclusion.checks if c.status != "PASS" and (status is None or c.status == status)
    ]


def nic_record(outcome: Outcome, host: str, rail: int) -> dict:
    return next(
        r for r in outcome.conclusion.records if r["kind"] == "nic" and (r["host"], r["rail"]) == (host, rail)
    )


def test_healthy_fabric_stays_quiet_and_measures_every_nic() -> None:
    outcome = campaign(Fabric())
    assert findings(outcome) == []
    summary = next(c for c in outcome.conclusion.checks if c.host is None)
    assert summary.status == "PASS" and "12 NIC(s) on 6 host(s)" in summary.message
    assert outcome.rounds == 1 and outcome.launches == 3
    assert {r["verdict"] for r in outcome.conclusion.records if r["kind"] == "nic"} == {"PASS"}


def test_a_slow_nic_is_named_by_host_hca_and_rail_and_its_partner_cleared() -> None:
    fabric = Fabric(nic={("node4", 1): 0.5})
    outcome = campaign(fabric)
    [failed] = findings(outcome)
    assert (failed.id, failed.host, failed.status) == ("ib.write_bw", "node4", "FAIL")
    assert "mlx5_1 (rail 1)" in failed.message and "slow with 2 of 2 other partner(s)" in failed.message
    assert failed.observed == [{"rail": 1, "hca": "mlx5_1", "gbps": 195.6}]
    assert nic_record(outcome, "node4", 1)["verdict"] == "FAIL"
    assert nic_record(outcome, "node3", 1)["verdict"] == "PASS"  # its first-round partner, fast with others
    assert nic_record(outcome, "node3", 1)["gbps"] == HEALTHY_GBPS
    # node3 and node4 each met two other hosts, in rounds where every host is busy once.
    for chosen in fabric.rounds[1:]:
        busy = [h for pair in chosen for h in pair]
        assert len(busy) == len(set(busy))
    assert outcome.rounds == 1 + len(fabric.rounds[1:])


def test_a_slow_link_between_two_fast_nics_is_named_as_a_link() -> None:
    outcome = campaign(Fabric(link={("node1", "node2", 0): 0.6}))
    [failed] = findings(outcome)
    assert (failed.host, failed.status) == (None, "FAIL")
    assert failed.message.startswith("the link node1 mlx5_0 ↔ node2 mlx5_0 (rail 0) is slow")
    assert (
        "the pair alone is slow" in failed.message and "while each host is fast with others" in failed.message
    )
    assert failed.observed["hosts"] == ["node1", "node2"]
    assert any(r["kind"] == "link" for r in outcome.conclusion.records)
    assert nic_record(outcome, "node1", 0)["verdict"] == "PASS"


def test_two_hosts_cannot_tell_the_nic_from_the_link_and_say_so() -> None:
    outcome = campaign(Fabric(nic={("node2", 0): 0.5}), hosts=2)
    [failed] = findings(outcome)
    assert failed.status == "FAIL" and "NIC or link not told apart" in failed.message
    assert "no other host with a healthy pair" in failed.message


def test_a_rail_short_on_every_pair_is_one_rail_wide_finding_not_every_nic() -> None:
    nic = {(f"node{i}", 0): 0.8 for i in range(1, 7)}
    outcome = campaign(Fabric(nic=nic))
    [failed] = findings(outcome)
    assert failed.host is None and "rail-wide shortfall" in failed.message


def test_rails_together_below_their_sum_alone_warn_of_contention() -> None:
    outcome = campaign(Fabric(together=0.6))
    warned = findings(outcome, "WARN")
    assert len(warned) == 3 and all("shared bottleneck" in c.message for c in warned)


def test_a_pair_that_never_connected_is_an_error_naming_it() -> None:
    outcome = campaign(Fabric(failing={"node6"}))
    errors = findings(outcome, "ERROR")
    assert errors and all("node5" in c.message and "node6" in c.message for c in errors)
    assert "Couldn't connect" in errors[0].message


def test_latency_above_the_p99_bound_fails_naming_the_rail() -> None:
    outcome = campaign(Fabric(latency_us=9.5), latency=True, latency_p99_us=5.0)
    failed = [c for c in findings(outcome, "FAIL") if c.id == "ib.latency" and c.host is None]
    assert any("p99 9.5 µs above 5 µs" in c.message and "(rail 1)" in c.message for c in failed)
    assert campaign(Fabric(), latency=True).conclusion.checks[-1].status == "PASS"


def test_the_budget_stops_rounds_that_cannot_end_in_time_and_says_so() -> None:
    names = [f"node{i}" for i in range(1, 5)]
    now = [0.0]
    outcome = Campaign(
        rails_for(names),
        Settings(duration_s=5),
        fleet_judge.Thresholds(),
        Fabric(),
        clock=lambda: now[0],
        deadline=10.0,
    ).run(names)
    assert outcome.rounds == 0 and outcome.readings == []
    assert any("past the time budget" in c.message for c in findings(outcome, "WARN"))
