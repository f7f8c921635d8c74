"""The report's localization chapter: which host or link made a collective slow, and how the search got there.

Reads the ``localization`` list of results.json (:func:`diagnose.benchmarks.straggler.localization_record`):
per search, the run that set it off, the finding with each accusation's numbers (deficit, confidence, the
measurements that convict it and, for a link, those that clear its ends), then every round — how many
groups, how often each was measured, the noise, and every group that was not plainly fast. A round of
at most :data:`ALL_GROUPS` groups is shown whole; above that, its fast groups are counted, not listed
(a first round over a thousand hosts has dozens).
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median
from typing import Any

from diagnose.core.units import MISSING, duration, is_number, number, percent, significant
from diagnose.render.hostlist import summarize

ALL_GROUPS = 16
VERDICT_CLASS = {
    "slow": "st-fail",
    "failed": "st-fail",
    "unclear": "st-warn",
    "ok": "st-pass",
    "unjudged": "st-skip",
}
STATUS_LABEL = {"accused": "FAIL", "none": "WARN", "incomplete": "WARN"}


@dataclass
class MeasurementView:
    hosts: str
    role: str
    values: str
    reference: str
    ratio: str
    z: str
    verdict: str
    css: str


@dataclass
class AccusedView:
    kind: str
    name: str
    deficit: str
    confidence: str
    evidence: list[MeasurementView]
    cleared_by: list[MeasurementView]


@dataclass
class StepView:
    round: int
    groups: int
    repeats: str
    waves: int
    seconds: str
    noise: str
    critical: str
    shown: list[MeasurementView]
    fast_hidden: int
    fast_median: str
    notes: list[str]


@dataclass
class SearchView:
    collective: str
    backend: str
    hosts: str
    host_count: int
    trigger: str
    status: str
    summary: str
    confidence: str
    measurements: int
    rounds: int
    seconds: str
    budget: str
    accused: list[AccusedView]
    unresolved: str
    steps: list[StepView]


def _confidence(value: Any) -> str:
    """Two decimals, and never "100.00 %": a statistical search is never certain."""
    return "> 99.99 %" if is_number(value) and value > 0.9999 else percent(value, 2)


def _values(values: Any) -> str:
    if not isinstance(values, list) or not values:
        return MISSING
    return ", ".join("failed" if v is None else significant(v) for v in values)


def _measurement(entry: dict[str, Any]) -> MeasurementView:
    verdict = str(entry.get("verdict") or "unjudged")
    z = entry.get("z")
    return MeasurementView(
        hosts="+".join(str(h) for h in entry.get("hosts") or []) if len(entry.get("hosts") or []) <= 3 else
        summarize(str(h) for h in entry.get("hosts") or []),
        role=str(entry.get("role") or "—"),
        values=_values(entry.get("values")),
        reference=significant(entry.get("reference_gbps")),
        ratio=f"×{number(entry['ratio'], 3)}" if is_number(entry.get("ratio")) else MISSING,
        z="∞" if z == "inf" else number(z, 1),
        verdict=verdict,
        css=VERDICT_CLASS.get(verdict, "st-skip"),
    )  # fmt: skip


def _step(step: dict[str, Any]) -> StepView:
    groups = step.get("groups") or []
    values = step.get("values") or []
    verdicts = step.get("verdicts") or []
    entries = [
        {
            **(verdicts[i] if i < len(verdicts) and isinstance(verdicts[i], dict) else {}),
            "hosts": g,
            "values": v,
        }
        for i, (g, v) in enumerate(zip(groups, values, strict=False))
    ]
    small = len(entries) <= ALL_GROUPS
    shown = [e for e in entries if small or e.get("verdict") != "ok"]
    fast = [e for e in entries if not small and e.get("verdict") == "ok"]
    means = [
        sum(x for x in e["values"] if isinstance(x, int | float)) / len(e["values"])
        for e in fast
        if e.get("values")
    ]
    repeats = sorted({len(e["values"]) for e in entries if isinstance(e.get("values"), list)})
    return StepView(
        round=int(step.get("round") or 0),
        groups=len(entries),
        repeats="–".join(str(r) for r in (repeats[0], repeats[-1])) if len(repeats) > 1 else number(step.get("repeats"), 0),
        waves=int(step.get("waves") or 0),
        seconds=duration(step.get("seconds")),
        noise=number(step.get("noise_pct"), 1, unit=" %"),
        critical=number(step.get("critical_z"), 2),
        shown=[_measurement(e) for e in shown],
        fast_hidden=len(fast),
        fast_median=significant(median(means)) if means else MISSING,
        notes=[str(n) for n in step.get("notes") or []],
    )  # fmt: skip


def _trigger(trigger: dict[str, Any], collective: str) -> str:
    if not isinstance(trigger, dict) or trigger.get("busbw_gbps") is None:
        return f"{collective} below its normal range on {trigger.get('nodes', '?') if isinstance(trigger, dict) else '?'} nodes"
    text = f"{collective} busbw {significant(trigger['busbw_gbps'], unit=' GB/s')} on {trigger.get('nodes')} nodes"
    normal = trigger.get("normal_range_gbps")
    if isinstance(normal, list) and len(normal) == 2:
        text += f", normal range {number(normal[0], 0)}–{number(normal[1], 0)} GB/s"
    if trigger.get("shortfall") is not None:
        text += f" (×{number(trigger['shortfall'], 2)} of the expected)"
    return text


def _search(entry: dict[str, Any]) -> SearchView:
    finding = entry.get("finding") if isinstance(entry.get("finding"), dict) else {}
    settings = entry.get("settings") if isinstance(entry.get("settings"), dict) else {}
    hosts = [str(h) for h in entry.get("hosts") or []]
    collective = str(entry.get("collective") or "?")
    accused = []
    for a in finding.get("accused") or []:
        if not isinstance(a, dict):
            continue
        accused.append(
            AccusedView(
                kind=str(a.get("kind") or "?"),
                name=str(a.get("name") or "?"),
                deficit=number(a.get("deficit_pct"), 0, unit=" %"),
                confidence=_confidence(a.get("confidence")),
                evidence=[_measurement(m) for m in a.get("measurements") or [] if isinstance(m, dict)],
                cleared_by=[_measurement(m) for m in a.get("cleared_by") or [] if isinstance(m, dict)],
            )
        )
    status = str(finding.get("status") or "none")
    return SearchView(
        collective=collective,
        backend=str(entry.get("backend") or "—"),
        hosts=summarize(hosts) or "—",
        host_count=len(hosts),
        trigger=_trigger(entry.get("trigger") or {}, collective),
        status=STATUS_LABEL.get(status, "WARN"),
        summary=str(finding.get("summary") or ""),
        confidence=_confidence(entry.get("confidence")),
        measurements=int(entry.get("measurements") or 0),
        rounds=int(entry.get("rounds") or 0),
        seconds=duration(entry.get("real_seconds")),
        budget=duration(settings.get("budget_s")),
        accused=accused,
        unresolved=", ".join(str(u) for u in finding.get("unresolved") or []),
        steps=[_step(s) for s in entry.get("steps") or [] if isinstance(s, dict)],
    )


def build_localization(results: dict[str, Any]) -> list[SearchView] | None:
    """The chapter's searches, or None when the run localized nothing."""
    entries = [e for e in results.get("localization") or [] if isinstance(e, dict)]
    return [_search(e) for e in entries] or None
