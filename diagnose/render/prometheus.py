"""A node_exporter textfile-collector file: check statuses, the run's counts and coverage, benchmark busbw,
every NIC's RDMA write bandwidth and the watch list's components as gauges.

Nightly runs drop this file into the collector's folder, so that the same alerting that watches the
cluster's nodes also sees "ib.port_state went to FAIL on gpu042" or "all_reduce busbw fell". A status is a
number on the scale of :data:`diagnose.core.model.SEVERITY` rather than a label, so that a series keeps its
identity when the status changes and ``max by (check)`` finds the worst host. The per-check and
per-benchmark series carry the result's ``action`` (docs/actions.md) as a label: one of eleven words, ``none``
on a PASS, so alert routes can send ``rma_gpu`` to the vendor queue and ``check_config`` to the team; the
series of a check changes its action label when its verdict changes, as an alert on it does anyway.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from diagnose.catalog.stage_ids import HISTORY_WATCH, bench_id
from diagnose.core.model import ACTIONS, SEVERITY, strongest
from diagnose.render.acted import outcome_counts
from diagnose.render.hostlist import natural_key
from diagnose.render.tally import LIMITED_BELOW, coverage_of

_SCALE = ", ".join(f"{v} {k}" for k, v in sorted(SEVERITY.items(), key=lambda kv: kv[1]))


def escape_label(value: object) -> str:
    """A label value in the exposition format: backslash, double quote and newline escaped."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(labels: dict[str, object]) -> str:
    return "{" + ",".join(f'{k}="{escape_label(v)}"' for k, v in labels.items()) + "}"


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


class _Family:
    """One metric with its HELP/TYPE header; a repeated label set keeps its first value only.

    node_exporter rejects the whole file when a series appears twice, so one odd duplicate in the results
    must not cost every other metric.
    """

    def __init__(self, name: str, help_text: str) -> None:
        self.name = name
        self.help = help_text
        self.samples: dict[str, str] = {}

    def add(self, labels: dict[str, object], value: float) -> None:
        self.samples.setdefault(_labels(labels), _number(value))

    def lines(self) -> list[str]:
        if not self.samples:
            return []
        head = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} gauge"]
        return head + [f"{self.name}{labels} {value}" for labels, value in self.samples.items()]


def action_label(entry: dict[str, Any]) -> str:
    """The ``action`` label of a result: its recorded action, ``none`` on PASS; empty (no label) where an
    older file recorded none or a hand-made one holds a word outside the eleven, so the label stays bounded."""
    if entry.get("status") == "PASS":
        return "none"
    action = entry.get("action")
    return action if action in ACTIONS else ""


def _timestamp(stamp: Any) -> float | None:
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except (TypeError, ValueError):
        return None


def render_prometheus(results: dict[str, Any]) -> bytes:
    """The textfile content for a cleaned results dict."""
    run = results.get("run") or {}
    status = _Family(
        "diagnose_check_status",
        f"Result of a check per host ({_SCALE}); host is empty for cluster-wide checks.",
    )
    worst_per_series: dict[tuple[str, str, str], tuple[int, str]] = {}
    rows = [r for r in results.get("checks") or [] if isinstance(r, dict) and r.get("status") in SEVERITY]
    rows.sort(
        key=lambda r: (str(r.get("id")), natural_key("" if r.get("host") is None else str(r.get("host"))))
    )
    for row in rows:
        key = (
            str(row.get("id", "?")),
            "" if row.get("host") is None else str(row.get("host")),
            str(row.get("checklist") or ""),
        )
        value, action = SEVERITY[row["status"]], action_label(row)
        seen, seen_action = worst_per_series.get(key, (-1, ""))
        if value == seen:  # two results of one series alike: the action that covers both
            action = strongest([a for a in (action, seen_action) if a]) if action or seen_action else ""
        if value >= seen:
            worst_per_series[key] = (value, action)
    for (check_id, host, checklist), (value, action) in worst_per_series.items():
        status.add({"check": check_id, "host": host, "checklist": checklist, "action": action}, value)

    coverage = coverage_of(results)
    counts = _Family(
        "diagnose_checks",
        "Number of results of a status in the run (check rows; a benchmark counts once, as its bench row).",
    )
    for name in SEVERITY:
        counts.add({"status": name}, coverage.counts[name])
    shown = _Family(
        "diagnose_shown",
        "PASS results that showed a function working and judged no figure (not in diagnose_checks' PASS).",
    )
    shown.add({}, coverage.shown)
    measured = _Family(
        "diagnose_coverage_ratio", "Share of the run's results measured (PASS, WARN or FAIL; SKIP is not)."
    )
    measured.add({}, coverage.measured / coverage.total if coverage.total else 0.0)
    limited = _Family(
        "diagnose_coverage_limited",
        f"1 when the verdict is a PASS on under {LIMITED_BELOW * 100:.0f} % of its results (limited coverage).",
    )
    limited.add({}, float(results.get("verdict") == "PASS" and coverage.limited))
    skipped = _Family("diagnose_skipped", "Skipped results by cause (no GPU, no fabric, ...).")
    for cause, n in coverage.by_reason.items():
        skipped.add({"cause": cause}, n)
    verdict = _Family("diagnose_verdict", f"Verdict of the run ({_SCALE}); absent when it is INCOMPLETE.")
    if results.get("verdict") in SEVERITY:
        verdict.add({}, SEVERITY[results["verdict"]])
    incomplete = _Family(
        "diagnose_run_incomplete",
        "1 when the run was cut short (Ctrl-C, SIGTERM): every figure here is what was measured before the stop.",
    )
    incomplete.add({}, float(results.get("verdict") == "INCOMPLETE"))
    hosts = results.get("hosts") or []
    host_count = _Family("diagnose_hosts", "Hosts in the run, by whether they could be reached.")
    host_count.add({"reachable": "true"}, sum(1 for h in hosts if isinstance(h, dict) and h.get("reachable")))
    host_count.add(
        {"reachable": "false"}, sum(1 for h in hosts if isinstance(h, dict) and not h.get("reachable"))
    )
    finished = _Family("diagnose_run_timestamp_seconds", "When the run finished (or started), Unix time.")
    moment = _timestamp(run.get("finished")) or _timestamp(run.get("started"))
    if moment is not None:
        finished.add({}, moment)

    busbw = _Family("diagnose_benchmark_busbw_gbps", "Measured busbw at one message size, GB/s.")
    peak = _Family("diagnose_benchmark_peak_busbw_gbps", "Best busbw over the size sweep, GB/s.")
    expected = _Family("diagnose_benchmark_expected_busbw_gbps", "busbw expected at large sizes, GB/s.")
    bench_status = _Family("diagnose_benchmark_status", f"Benchmark result ({_SCALE}).")
    for bench in results.get("benchmarks") or []:
        if not isinstance(bench, dict):
            continue
        labels: dict[str, object] = {
            "check": bench_id(bench.get("collective")),
            "collective": bench.get("collective"),
            "tool": bench.get("tool"),
            "backend": bench.get("backend"),
            "nodes": bench.get("nodes"),
            "ranks": bench.get("ranks"),
        }
        values = []
        for row in bench.get("rows") or []:
            value = row.get("busbw_gbps") if isinstance(row, dict) else None
            if isinstance(value, int | float) and isinstance(row.get("bytes"), int):
                busbw.add({**labels, "bytes": row["bytes"]}, value)
                values.append(float(value))
        if values:
            peak.add(labels, max(values))
        if isinstance(bench.get("expected_busbw_gbps"), int | float):
            expected.add(labels, bench["expected_busbw_gbps"])
        if bench.get("status") in SEVERITY:
            bench_status.add({**labels, "action": action_label(bench)}, SEVERITY[bench["status"]])

    lines: list[str] = []
    families = (status, counts, shown, measured, limited, skipped, verdict, incomplete, host_count, finished)
    for family in (*families, busbw, peak, expected, bench_status):
        lines += family.lines()
    for family in _nic_families(results):
        lines += family.lines()
    for family in _stress_families(results):
        lines += family.lines()
    lines += _quarantine_family(results).lines()
    for family in _watch_families(results):
        lines += family.lines()
    return ("\n".join(lines) + "\n").encode("utf-8")


def _nic_families(results: dict[str, Any]) -> list[_Family]:
    """Per NIC of the fabric benchmark (results.json ``fabric``, ib.write_bw): Gb/s, share of line rate,
    verdict, labelled by host, HCA and rail, so a dashboard can follow one NIC from night to night."""
    gbps = _Family("diagnose_nic_write_bw_gbps", "RDMA write bandwidth of a NIC (its best pairing), Gb/s.")
    ratio = _Family(
        "diagnose_nic_write_bw_line_ratio", "A NIC's RDMA write bandwidth over its port's line rate."
    )
    status = _Family("diagnose_nic_status", f"A NIC's verdict in ib.write_bw ({_SCALE}).")
    for record in results.get("fabric") or []:
        if not isinstance(record, dict) or record.get("kind") != "nic":
            continue
        labels = {"host": record.get("host"), "hca": record.get("hca"), "rail": record.get("rail")}
        for family, key in ((gbps, "gbps"), (ratio, "ratio")):
            if isinstance(record.get(key), int | float):
                family.add(labels, record[key])
        if record.get("verdict") in SEVERITY:
            status.add(labels, SEVERITY[record["verdict"]])
    return [gbps, ratio, status]


def _stress_families(results: dict[str, Any]) -> list[_Family]:
    """Per GPU, the stress figures of results.json ``stress`` (diagnose/probes/stress.py)."""
    gemm = _Family("diagnose_gpu_gemm_tflops", "Dense GEMM throughput of one GPU, TFLOP/s.")
    hbm = _Family("diagnose_gpu_hbm_gbps", "Device memory bandwidth of one GPU (1e9 bytes/s).")
    tested = _Family("diagnose_gpu_memtest_tested_bytes", "GPU memory the pattern test covered, bytes.")
    wrong = _Family("diagnose_gpu_memtest_mismatches", "Words the pattern test read back wrong.")
    agrees = _Family("diagnose_gpu_sdc_agrees", "1 when the seeded GEMM's bits match the reference.")
    clock = _Family("diagnose_gpu_burnin_min_sm_clock_mhz", "Lowest SM clock under the burn-in's load, MHz.")
    heat = _Family("diagnose_gpu_burnin_max_temperature_celsius", "Highest GPU temperature in the burn-in.")
    power = _Family("diagnose_gpu_burnin_max_power_watts", "Highest power draw in the burn-in, W.")
    reasons = _Family("diagnose_gpu_burnin_clock_event_seconds", "Seconds a clock-event reason was active.")
    status = _Family("diagnose_gpu_stress_status", f"Verdict of one GPU's stress figure ({_SCALE}).")
    expected = [
        (
            _Family("diagnose_gpu_stress_reference", "Measured reference of the GPU's model for a figure."),
            "reference",
        ),
        (
            _Family(
                "diagnose_gpu_stress_floor", "Floor of a figure: reference less tolerance, power-scaled."
            ),
            "floor",
        ),
        (
            _Family("diagnose_gpu_stress_sm_clock_mhz", "Median SM clock while the phase ran, MHz."),
            "sm_clock_mhz",
        ),
        (_Family("diagnose_gpu_stress_power_watts", "Median power draw while the phase ran, W."), "power_w"),
        (
            _Family("diagnose_gpu_stress_power_limit_watts", "Enforced power limit during the phase, W."),
            "power_limit_w",
        ),
    ]
    for record in results.get("stress") or []:
        if not isinstance(record, dict) or record.get("metric") == "stage" or record.get("gpu") is None:
            continue
        labels: dict[str, object] = {
            "host": record.get("host"),
            "gpu": record.get("gpu"),
            "bus_id": record.get("bus_id"),
        }
        metric = str(record.get("metric"))
        value = record.get("value")
        if metric.startswith(("gemm.", "hbm.")):
            for family, key in expected:
                if isinstance(record.get(key), int | float):
                    family.add({**labels, "metric": metric}, record[key])
        if metric.startswith("gemm.") and isinstance(value, int | float):
            gemm.add({**labels, "dtype": metric.partition(".")[2]}, value)
        elif metric.startswith("hbm.") and isinstance(value, int | float):
            hbm.add({**labels, "kernel": metric.partition(".")[2]}, value)
        elif metric == "memtest":
            tested.add(labels, float(record.get("tested_bytes") or 0))
            wrong.add(labels, float(record.get("mismatches") or 0))
        elif metric == "sdc" and record.get("reference"):
            agrees.add(labels, 1.0 if record.get("checksum") == record.get("reference") else 0.0)
        elif metric == "burnin":
            summary = record.get("summary") or {}
            for family, key in ((clock, "min_sm_mhz"), (heat, "max_temp_c"), (power, "max_power_w")):
                if isinstance(summary.get(key), int | float):
                    family.add(labels, summary[key])
            for reason, seconds in (summary.get("reason_s") or {}).items():
                reasons.add({**labels, "reason": reason}, seconds)
        if record.get("verdict") in SEVERITY:
            status.add(
                {**labels, "check": record.get("check"), "metric": metric}, SEVERITY[record["verdict"]]
            )
    return [gemm, hbm, *(f for f, _ in expected), tested, wrong, agrees, clock, heat, power, reasons, status]


def _quarantine_family(results: dict[str, Any]) -> _Family:
    """Nodes per scheduler by what the run did to them (results.json ``quarantine``, folded by
    :mod:`diagnose.render.acted`): ``out`` (drained, cordoned or tainted), ``withheld`` by the quarantine cap, ``lifted``, ``left`` to an
    operator, ``failed`` (the scheduler refused a step). No series on a run that acted on no node."""
    nodes = _Family(
        "diagnose_quarantined_nodes",
        "Nodes the run acted on, by scheduler and outcome (out, withheld, lifted, left, failed).",
    )
    for (scheduler, outcome), count in sorted(outcome_counts(results).items()):
        nodes.add({"scheduler": scheduler, "state": outcome}, count)
    return nodes


def _watch_families(results: dict[str, Any]) -> list[_Family]:
    """The watch list (``history.watch``): one series per watched component and metric, labelled so an alert
    can route on the action and a dashboard can list the parts; the projection where a limit is known."""
    watched = _Family(
        "diagnose_watch_component",
        "1 for each metric of a component on the watch list (getting worse night after night).",
    )
    to_limit = _Family(
        "diagnose_watch_nights_to_limit", "Nights until a watched metric reaches its limit at its trend."
    )
    slope = _Family("diagnose_watch_slope_per_night", "Robust slope of a watched metric, per night.")
    for row in results.get("checks") or []:
        observed = row.get("observed") if isinstance(row, dict) else None
        if row.get("id") != HISTORY_WATCH or not isinstance(observed, dict):
            continue
        for entry in observed.get("metrics") or []:
            if not isinstance(entry, dict):
                continue
            labels = {
                "component": observed.get("component"),
                "host": row.get("host"),
                "metric": entry.get("metric"),
            }
            action = entry.get("action")
            watched.add({**labels, "action": action if action in ACTIONS else ""}, 1.0)
            if isinstance(entry.get("nights_to_limit"), int | float):
                to_limit.add(labels, entry["nights_to_limit"])
            if isinstance(entry.get("slope_per_night"), int | float):
                slope.add(labels, entry["slope_per_night"])
    counts = _Family(
        "diagnose_watch_components",
        "Components the watch list read in the run, how many it watches, and the counters counting steadily.",
    )
    steady = _Family(
        "diagnose_watch_steady_per_night",
        "Rate per night of a counter counting steadily (no trend, so not watched): its later rise is judged on it.",
    )
    summary = (
        (results.get("history") or {}).get("watch") if isinstance(results.get("history"), dict) else None
    )
    if isinstance(summary, dict):
        for state, key in (("read", "components"), ("watched", "watched")):
            if isinstance(summary.get(key), int):
                counts.add({"state": state}, summary[key])
        counting = [e for e in summary.get("steady") or [] if isinstance(e, dict)]
        if "steady" in summary:
            counts.add({"state": "steady"}, len(counting))
        for entry in counting:
            if isinstance(entry.get("rate_per_night"), int | float):
                labels = {k: entry.get(k) for k in ("component", "host", "metric")}
                steady.add(labels, entry["rate_per_night"])
    return [watched, to_limit, slope, counts, steady]
