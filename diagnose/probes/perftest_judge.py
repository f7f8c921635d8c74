"""Verdicts of the per-NIC benchmark: which NIC or link is slow, from pair readings.

Pure: readings in, suspects, localization tasks, checks and results.json ``fabric`` records out;
:mod:`diagnose.probes.perftest` measures.

A pair's reading on a rail is the slower of its two directions (a NIC slow only when it sends, or only
when it receives, is slow). It is **slow** when it falls below ``min_nic_bw_fraction`` of the line rate
of the slower of the two ports (``ibstat``), or when it is odd against the rail's fleet: below the median
of every first-round pair on that rail by more than the fleet threshold (robust statistics of
:mod:`diagnose.probes.fleet_judge`: ``fleet_mad_k`` robust deviations and ``fleet_min_rel_dev_pct``).
When most of a rail's pairs are below the line-rate floor the whole rail is short (one cluster-wide
finding: the fabric's settings, not a NIC), and only odd pairs are chased.

A slow pair does not say which end is slow. Like the collectives' localization (:mod:`diagnose.localize`:
fresh partners already seen fast, a quorum), each end is measured again with two other hosts whose
own pair on that rail was healthy:

* an end slow with every one of them is **accused** (its NIC on that rail, named by host, HCA and rail);
  with fewer partners than the quorum the accusation is weak (a warning);
* an end fast with any of them is cleared;
* a pair whose two ends are both cleared is a slow **link** (cable, transceiver, switch port), in
  ``bench.link``'s words: the pair alone is slow while each host is fast with others;
* anything else (an end slow with one partner and fast with the other) stays a suspect, said so.

Rails run one at a time and then all at once: a pair whose rails together deliver less than the fraction
of what they reach one by one shares a bottleneck (PCIe switch, NUMA node, host memory) on one of its
hosts. Latency (``ib_write_lat``) is judged against ``max_ib_latency_p99_us``.

The readings and rail fleets are in :mod:`diagnose.probes.perftest_readings`, the choice of partners and
each end's verdict in :mod:`diagnose.probes.perftest_localize`; this module says what they mean.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from diagnose.catalog.stage_ids import IB_LATENCY, IB_WRITE_BW
from diagnose.core.model import CheckResult
from diagnose.core.units import counted, human_bytes
from diagnose.probes.perftest_localize import EndVerdict, Suspect, end_verdict
from diagnose.probes.perftest_plan import HostRails
from diagnose.probes.perftest_readings import PairRail, RailFleet, Reading, pair_rails
from diagnose.probes.perftest_settings import Settings

CHECKLIST = {IB_WRITE_BW: "1", IB_LATENCY: "3"}
REMEDIATION_NIC = (
    "The named HCA is slow with every partner: check it with `mlxlink -d <hca> -p 1` (negotiated speed and "
    "width, BER; ib.optics), its error counters (ib.counters), its PCIe link (`lspci -vv`: LnkSta against "
    "LnkCap), its firmware (versions.firmware) and the NUMA placement of its buffers; reseat or replace its "
    "cable and transceiver first (action: reseat_or_replace_cable), then the HCA if it stays slow."
)
REMEDIATION_LINK = (
    "Both NICs are fast with other partners: the path between them is slow. Reseat or replace the cable or "
    "transceivers of the named ports, check the switch ports on both ends (error counters, speed, split "
    "mode) and, between leaves, the spine links the pair's traffic hashes onto (action: "
    "reseat_or_replace_cable)."
)
#: The actions the judge chooses (docs/actions.md): a slow NIC, link or pair is its cable or transceiver
#: first; a rail short as a whole and rails that cannot run together are settings (fabric, PCIe, NUMA).
CABLE, CONFIG = "reseat_or_replace_cable", "check_config"
REMEDIATION_PAIR = (
    "Measure the named hosts against other partners (more hosts in the run), or check both NICs and the "
    "cable between them: ibstat rates, mlxlink, error counters."
)
REMEDIATION_CONTENTION = (
    "The rails reach their rate one at a time but not together: look for a shared bottleneck on one of the "
    "hosts — NICs behind one PCIe switch or root port with too few lanes (gpu.pcie, pci.acs), buffers on the "
    "wrong NUMA node, a throttled CPU (host.cpu_governor)."
)
REMEDIATION_LATENCY = (
    "Check the path of the named rail: switch hops and congestion control, adaptive routing, the HCAs' "
    "error counters; compare with the rail's other pairs."
)


# ---------------------------------------------------------------------------------------------------------
# Checks and records


@dataclass
class Conclusion:
    checks: list[CheckResult] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)


def _gbps(value: float | None) -> str:
    return "failed" if value is None else f"{value:.0f}"


def _partners(items: Sequence[tuple[str, float]]) -> str:
    return ", ".join(f"with {h} {_gbps(v)} Gb/s" for h, v in items)


class Judge:
    """Everything one stage measured, turned into checks and records."""

    def __init__(self, rails: Mapping[str, HostRails], settings: Settings) -> None:
        self.rails = rails
        self.settings = settings
        self.out = Conclusion()

    def hca(self, host: str, rail: int) -> str:
        return self.rails[host].nics[rail].hca

    def nic(self, host: str, rail: int) -> str:
        return f"{host} {self.hca(host, rail)} (rail {rail})"

    def emit(self, check_id: str, host: str | None, status: str, message: str, **extra: Any) -> None:
        self.out.checks.append(
            CheckResult(check_id, host, CHECKLIST[check_id], status, message=message, **extra)
        )

    # -- bandwidth ------------------------------------------------------------------------------------
    def bandwidth(
        self,
        readings: Sequence[Reading],
        fleets: Mapping[int, RailFleet],
        suspects: Sequence[Suspect],
    ) -> None:
        fraction = self.settings.fraction
        first = pair_rails(readings, ("single",))
        lines = {(p.a, p.b): p.line for p in pair_rails(readings, ("single", "check")).values()}
        accused: dict[str, list[tuple[int, float, str]]] = {}
        verdicts: dict[tuple[str, int], str] = {}
        for suspect in suspects:
            pair, fleet = suspect.pair, fleets[suspect.pair.rail]
            ends = [end_verdict(suspect, end, fleet, lines, fraction) for end in (pair.a, pair.b)]
            self._conclude(suspect, ends, accused, verdicts)
        for host, items in sorted(accused.items()):
            weak = all(why.startswith("weak") for _, _, why in items)
            named = "; ".join(why.partition(":")[2].strip() for _, _, why in items)
            self.emit(
                IB_WRITE_BW,
                host,
                "WARN" if weak else "FAIL",
                f"slow NIC on {host}: {named}",
                observed=[{"rail": r, "hca": self.hca(host, r), "gbps": v} for r, v, _ in items],
                expected=f"≥ {fraction:g} × line rate and in line with the rail",
                remediation=REMEDIATION_NIC,
                action=CABLE,
            )
        self._failures(first)
        self._summary(first, fleets, suspects)
        self._nic_records(readings, fleets, verdicts)

    def _conclude(
        self,
        suspect: Suspect,
        ends: Sequence[EndVerdict],
        accused: dict[str, list[tuple[int, float, str]]],
        verdicts: dict[tuple[str, int], str],
    ) -> None:
        pair, rail = suspect.pair, suspect.pair.rail
        value = pair.value or 0.0
        line = pair.line
        deficit = f"{(1 - value / line) * 100:.0f} % below the {line:g} Gb/s line rate" if line else ""
        for end in ends:
            if end.state in ("accused", "weak"):
                label = "weak: " if end.state == "weak" else "slow: "
                accused.setdefault(end.host, []).append(
                    (
                        rail,
                        value,
                        f"{label}{self.hca(end.host, rail)} (rail {rail}) at {_gbps(value)} Gb/s ({deficit or suspect.why}); "
                        f"slow with {len(end.slow_with)} of {counted(len(end.slow_with), 'other partner')} "
                        f"({_partners(end.slow_with)})"
                        + (
                            "; fewer partners than the quorum of 2: a weak verdict"
                            if end.state == "weak"
                            else ""
                        ),
                    )
                )
                verdicts[(end.host, rail)] = "WARN" if end.state == "weak" else "FAIL"
        if any(e.state in ("accused", "weak") for e in ends):
            return
        a, b = ends
        hcas = (self.hca(pair.a, rail), self.hca(pair.b, rail))
        observed = {"hosts": [pair.a, pair.b], "hcas": list(hcas), "rail": rail, "gbps": pair.value}
        if a.state == "cleared" and b.state == "cleared":
            cleared = "; ".join(f"{e.host} {_partners(e.fast_with)}" for e in ends)
            self.emit(
                IB_WRITE_BW,
                None,
                "FAIL",
                f"the link {pair.a} {hcas[0]} ↔ {pair.b} {hcas[1]} (rail {rail}) is slow: the pair alone is slow "
                f"({_gbps(value)} Gb/s, {deficit or suspect.why}) while each host is fast with others ({cleared})",
                observed=observed,
                expected=f"≥ {self.settings.fraction:g} × line rate and in line with the rail",
                remediation=REMEDIATION_LINK,
                action=CABLE,
            )
            self.out.records.append(
                {"kind": "link", **observed, "line_rate_gbps": line, "verdict": "FAIL", "why": suspect.why}
            )
            for end in (pair.a, pair.b):
                verdicts.setdefault((end, rail), "PASS")
            return
        if all(e.state == "alone" for e in ends):
            why = "no other host with a healthy pair on this rail to measure either end against"
        else:
            said = "; ".join(
                f"{e.host}: {e.state}"
                + (f" ({_partners(e.slow_with)}" if e.slow_with else " (")
                + (f"{'; ' if e.slow_with else ''}fast {_partners(e.fast_with)})" if e.fast_with else ")")
                for e in ends
            )
            why = f"the re-measurements do not settle it ({said})"
        status = "FAIL" if line and value < self.settings.fraction * line else "WARN"
        self.emit(
            IB_WRITE_BW,
            None,
            status,
            f"the pair {pair.a} {hcas[0]} ↔ {pair.b} {hcas[1]} (rail {rail}) is slow at {_gbps(value)} Gb/s "
            f"({suspect.why}); NIC or link not told apart: {why}",
            observed=observed,
            remediation=REMEDIATION_PAIR,
            action=CABLE,
        )
        for end in (pair.a, pair.b):
            verdicts[(end, rail)] = "WARN"

    def _failures(self, first: Mapping[tuple[str, str, int], PairRail]) -> None:
        failed = [p for p in first.values() if p.value is None]
        for pair in sorted(failed, key=lambda p: (p.a, p.b, p.rail)):
            self.emit(
                IB_WRITE_BW,
                None,
                "ERROR",
                f"{pair.a} {self.hca(pair.a, pair.rail)} ↔ {pair.b} {self.hca(pair.b, pair.rail)} (rail {pair.rail}) "
                f"not measured: {pair.error or 'no reading'}",
                evidence=next((e for r in pair.readings for e in r.evidence), None),
            )

    def _summary(
        self,
        first: Mapping[tuple[str, str, int], PairRail],
        fleets: Mapping[int, RailFleet],
        suspects: Sequence[Suspect],
    ) -> None:
        parts, status = [], "PASS"
        for rail, fleet in sorted(fleets.items()):
            median = fleet.median
            line = f" of {fleet.line_gbps:g}" if fleet.line_gbps else ""
            parts.append(
                f"rail {rail} median {_gbps(median)}{line} Gb/s over {counted(len(fleet.verdict.hosts) or 1, 'pair')}"
            )
            if fleet.short:
                status = "FAIL"
                parts[-1] += (
                    f" — below {self.settings.fraction:g} × line rate on the whole rail: a rail-wide shortfall "
                    "(fabric settings, cabling class, the profile's rate), not one NIC"
                )
            self.out.records.append(
                {
                    "kind": "rail",
                    "rail": rail,
                    "pairs": len(fleet.verdict.hosts),
                    "median_gbps": None if median is None else round(median, 3),
                    "mad_gbps": None if fleet.verdict.mad is None else round(fleet.verdict.mad, 3),
                    "line_rate_gbps": fleet.line_gbps,
                    "floor_gbps": fleet.floor_gbps,
                    "verdict": "FAIL" if fleet.short else "PASS",
                    "message": fleet.verdict.message,
                }
            )
        measured = [p for p in first.values() if p.value is not None]
        hosts = {h for p in measured for h in (p.a, p.b)}
        nics = len({(h, p.rail) for p in measured for h in (p.a, p.b)})
        slow = (
            f"; {counted(len(suspects), 'slow pair-rail')} re-measured with other partners"
            if suspects
            else ""
        )
        self.emit(
            IB_WRITE_BW,
            None,
            status,
            f"{counted(nics, 'NIC')} on {counted(len(hosts), 'host')} written to with ib_write_bw "
            f"({human_bytes(self.settings.message_bytes)} messages, {self.settings.duration_s} s each way): "
            + "; ".join(parts)
            + slow,
            observed={str(r): f.median for r, f in fleets.items()},
            expected=f"≥ {self.settings.fraction:g} × line rate",
            # a rail short as a whole is the fabric's settings or the profile's rate, not one cable
            action=CONFIG if status == "FAIL" else None,
        )

    def _nic_records(
        self,
        readings: Sequence[Reading],
        fleets: Mapping[int, RailFleet],
        verdicts: Mapping[tuple[str, int], str],
    ) -> None:
        best: dict[tuple[str, int], list[tuple[str, float | None]]] = {}
        memory: dict[tuple[str, int], str] = {}
        for pair in pair_rails(readings, ("single", "check")).values():
            for end, other in ((pair.a, pair.b), (pair.b, pair.a)):
                best.setdefault((end, pair.rail), []).append((other, pair.value))
        for reading in readings:
            if reading.step.kind == "bw":
                memory.setdefault((reading.step.writer, reading.rail), reading.memory.split("→")[0])
        for host, rails in sorted(self.rails.items()):
            for nic in rails.nics:
                seen = best.get((host, nic.rail))
                if seen is None:
                    continue
                values = [v for _, v in seen if v is not None]
                figure = max(values) if values else None
                fleet = fleets.get(nic.rail)
                verdict = verdicts.get((host, nic.rail), "PASS" if values else "ERROR")
                self.out.records.append(
                    {
                        "kind": "nic",
                        "host": host,
                        "rail": nic.rail,
                        "hca": nic.hca,
                        "port": nic.port,
                        "rate_gbps": nic.rate_gbps,
                        "gbps": figure,
                        "ratio": None
                        if figure is None or not nic.rate_gbps
                        else round(figure / nic.rate_gbps, 4),
                        "rail_median_gbps": None
                        if fleet is None or fleet.median is None
                        else round(fleet.median, 3),
                        "memory": memory.get((host, nic.rail), "host"),
                        "partners": [{"host": h, "gbps": v} for h, v in seen],
                        "verdict": verdict,
                    }
                )

    # -- rails together ----------------------------------------------------------------------------------
    def together(self, readings: Sequence[Reading]) -> None:
        single = pair_rails(readings, ("single",))
        both = pair_rails(readings, ("together",))
        pairs = sorted({(a, b) for a, b, _ in both})
        for a, b in pairs:
            rails = sorted(r for x, y, r in both if (x, y) == (a, b))
            alone = [single.get((a, b, r)) for r in rails]
            at_once = [both[(a, b, r)] for r in rails]
            if any(p is None or p.value is None for p in alone) or any(p.value is None for p in at_once):
                continue
            total_alone = sum(p.value or 0.0 for p in alone if p is not None)
            total = sum(p.value or 0.0 for p in at_once)
            ratio = total / total_alone if total_alone else 1.0
            verdict = "WARN" if ratio < self.settings.fraction else "PASS"
            self.out.records.append(
                {
                    "kind": "together",
                    "hosts": [a, b],
                    "rails": rails,
                    "single_gbps": round(total_alone, 3),
                    "together_gbps": round(total, 3),
                    "ratio": round(ratio, 4),
                    "verdict": verdict,
                }
            )
            if verdict == "WARN":
                worst = min(
                    zip(rails, alone, at_once, strict=True),
                    key=lambda t: (t[2].value or 0) / (t[1].value or 1),
                )
                self.emit(
                    IB_WRITE_BW,
                    None,
                    "WARN",
                    f"{a} ↔ {b}: {len(rails)} rails together deliver {total:.0f} of the {total_alone:.0f} Gb/s they "
                    f"reach one at a time ({ratio * 100:.0f} %; rail {worst[0]} falls to {_gbps(worst[2].value)} from "
                    f"{_gbps(worst[1].value)} Gb/s): a shared bottleneck on {a} or {b}",
                    observed={"single_gbps": round(total_alone, 3), "together_gbps": round(total, 3)},
                    remediation=REMEDIATION_CONTENTION,
                    action=CONFIG,
                )

    # -- latency --------------------------------------------------------------------------------------------
    def latency(self, readings: Sequence[Reading]) -> None:
        bound = self.settings.latency_p99_us
        found = [r for r in readings if r.step.kind == "lat"]
        if not found:
            return
        slow, failed = [], []
        for reading in found:
            p99 = (reading.latency or {}).get("p99_us")
            a, b, rail = reading.step.writer, reading.step.server, reading.rail
            verdict = "ERROR" if p99 is None else ("FAIL" if p99 > bound else "PASS")
            self.out.records.append(
                {
                    "kind": "latency",
                    "hosts": [a, b],
                    "hcas": [reading.writer_hca, reading.server_hca],
                    "rail": rail,
                    **(reading.latency or {}),
                    "bound_us": bound,
                    "verdict": verdict,
                }
            )
            if verdict == "FAIL":
                slow.append(reading)
            elif verdict == "ERROR":
                failed.append(reading)
        for reading in slow:
            lat = reading.latency or {}
            self.emit(
                IB_LATENCY,
                None,
                "FAIL",
                f"{reading.step.writer} {reading.writer_hca} → {reading.step.server} {reading.server_hca} "
                f"(rail {reading.rail}): p99 {lat.get('p99_us')} µs above {bound:g} µs (typical {lat.get('typical_us')} µs)",
                observed=lat,
                expected=f"p99 ≤ {bound:g} µs",
                remediation=REMEDIATION_LATENCY,
            )
        for reading in failed:
            self.emit(
                IB_LATENCY,
                None,
                "ERROR",
                f"{reading.step.describe()} not measured: {reading.error or 'no reading'}",
                evidence=reading.evidence[0] if reading.evidence else None,
            )
        measured = [r.latency for r in found if r.latency and r.latency.get("p99_us") is not None]
        p99s = [float(m["p99_us"]) for m in measured if m.get("p99_us") is not None]
        typical = [float(m["typical_us"]) for m in measured if m.get("typical_us") is not None]
        shown = (
            f"median typical {statistics.median(typical):.2f} µs, worst p99 {max(p99s):.2f} µs"
            if p99s and typical
            else "nothing measured"
        )
        self.emit(
            IB_LATENCY,
            None,
            "FAIL" if slow else ("ERROR" if not p99s else "PASS"),
            f"ib_write_lat ({counted(len(found), 'rail pair')}, 2 B, {self.settings.latency_iters} iterations): {shown}; "
            f"{len(slow)} above the p99 bound of {bound:g} µs",
            observed={"worst_p99_us": max(p99s) if p99s else None},
            expected=f"p99 ≤ {bound:g} µs",
        )
