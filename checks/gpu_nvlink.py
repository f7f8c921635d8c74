"""gpu.nvlink — every NVLink is up at full speed, and its error counters did not move during the run.

``nvidia-smi nvlink --status`` shows each link's speed or ``<inactive>``. A link that did not train (or
trained slower) silently removes 1/18 of the GPU's NVLink bandwidth: NCCL still runs, just slower, which is
why this is checked link by link rather than inferred from the busbw. ``expected_nvlinks_per_gpu`` (18 on
H100/H200 SXM, 12 on A100 SXM) and ``expected_nvlink_speed_gbps`` (26.562, 25) come from the profile;
without them, links of one host must at least agree with each other.

The error counters (``nvidia-smi nvlink -e``) count since the driver loaded, so an absolute value says
little about today: ``judge`` only WARNs on recovery errors (a link that had to retrain), noting they may
predate the run. ``judge_delta`` judges what the benchmarks did to them, with thresholds chosen for a run
of minutes:

* recovery errors grew: FAIL. A recovery is a link retrain that stalls all traffic on the link; a healthy
  link does not retrain under load, and repeated recoveries end in Xid 74.
* CRC errors grew by ``nvlink_crc_fail_delta`` (default 100) or more on one link: FAIL; fewer: WARN. CRC
  errors are caught and replayed by the link layer, so a handful cost little; hundreds in minutes mean a
  bit-error rate far outside spec (a marginal connector or board trace) that costs bandwidth and tends to
  escalate to recoveries.
* replay errors grew: WARN. A replay is the link layer's retry after a CRC error: correct data, lost
  bandwidth, worth watching rather than failing the node.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from diagnose.config.profiles import no_nvlink_reason, no_nvlink_required
from diagnose.core.check import Check, Command, Facts
from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.vars import Vars
from diagnose.parsers.nvlink import counter_kind, parse_nvlink_errors, parse_nvlink_status

DEFAULT_CRC_FAIL_DELTA = 100
SPEED_TOLERANCE = 0.01

REMEDIATION_LINKS = (
    "Inactive or slow NVLinks: check the fabric manager (gpu.fabricmanager) and `nvidia-smi nvlink -s`, reset "
    "the GPU or reboot; if the same link stays down, reseat the GPU on the HGX baseboard; a link that does "
    "not come back is an RMA of the GPU or the NVSwitch board."
)
REMEDIATION_COUNTERS = (
    "NVLink errors during the run: note the GPU and link, compare with Xid 74 in the kernel log (gpu.xid), "
    "reset the counters (`nvidia-smi nvlink -re`) and rerun the benchmarks; errors that come back on the "
    "same link mean reseating the GPU, then RMA."
)


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    facts = parse_nvlink_status(outputs["nvlink_status"].stdout)
    errors = outputs.get("nvlink_errors")
    facts["errors_read"] = errors is not None and errors.ok
    facts["counters"] = parse_nvlink_errors(errors.stdout)["counters"] if facts["errors_read"] else {}
    return facts


def _link_findings(facts: Facts, host_vars: Vars) -> tuple[list[str], list[str], str]:
    """(failures, warnings, summary) for the links' state and speed."""
    expected = host_vars.int("expected_nvlinks_per_gpu")
    want_speed = host_vars.float("expected_nvlink_speed_gbps")
    fails: list[str] = []
    warns: list[str] = []
    speeds = sorted({link["speed_gbps"] for g in facts["gpus"] for link in g["links"] if link["active"]})
    for gpu in facts["gpus"]:
        active = [link for link in gpu["links"] if link["active"]]
        inactive = [str(link["link"]) for link in gpu["links"] if not link["active"]]
        down = f" (inactive: link {', '.join(inactive)})" if inactive else ""
        if expected and len(active) < expected:
            fails.append(f"GPU {gpu['index']}: {len(active)} of {expected} NVLinks active{down}")
        elif inactive and active:
            warns.append(
                f"GPU {gpu['index']}: link {', '.join(inactive)} inactive next to {len(active)} active"
            )
        slow = [
            f"link {link['link']} at {link['speed_gbps']:g} GB/s"
            for link in active
            if want_speed and link["speed_gbps"] < want_speed * (1 - SPEED_TOLERANCE)
        ]
        if slow:
            fails.append(f"GPU {gpu['index']}: {', '.join(slow)}, expected {want_speed:g} GB/s")
    if not want_speed and len(speeds) > 1:
        fails.append("links run at different speeds: " + ", ".join(f"{s:g} GB/s" for s in speeds))
    counts = sorted({sum(link["active"] for link in g["links"]) for g in facts["gpus"]})
    summary = (
        f"{len(facts['gpus'])} GPUs x {'/'.join(map(str, counts))} active NVLinks at "
        + "/".join(f"{s:g}" for s in speeds)
        + " GB/s"
    )
    return fails, warns, summary


def _totals(counters: dict[str, dict[str, dict[str, int]]]) -> dict[str, int]:
    totals = {"replay": 0, "recovery": 0, "crc": 0}
    for links in counters.values():
        for values in links.values():
            for name, value in values.items():
                kind = counter_kind(name)
                if kind:
                    totals[kind] += value
    return totals


def _gate(facts: Facts, host_vars: Vars) -> Outcome | None:
    """SKIP/FAIL before any link is judged: no NVLink expected, or none reported."""
    host = host_vars.host or "this host"
    reason = no_nvlink_reason(host_vars)
    if reason:
        return Outcome("SKIP", f"NVLink not judged on {host}: {reason}")
    if not facts["supported"]:
        expected = host_vars.int("expected_nvlinks_per_gpu")
        if expected:
            return Outcome(
                "FAIL",
                f"nvidia-smi reports no NVLink on {host}; the profile expects {expected} per GPU",
                "no NVLink",
                f"{expected} NVLinks per GPU",
                remediation=REMEDIATION_LINKS,
            )
        return Outcome("SKIP", f"no NVLink on {host} (`nvidia-smi nvlink --status` lists no link)")
    return None


def _expected(host_vars: Vars) -> str:
    count = host_vars.int("expected_nvlinks_per_gpu")
    speed = host_vars.float("expected_nvlink_speed_gbps")
    links = f"{count} NVLinks per GPU" if count else "every NVLink active"
    return links + (f" at {speed:g} GB/s" if speed else ", one speed") + ", no error counter growth"


def judge(facts: Facts, host_vars: Vars) -> Outcome:
    host = host_vars.host or "this host"
    gate = _gate(facts, host_vars)
    if gate:
        return gate
    fails, warns, summary = _link_findings(facts, host_vars)
    totals = _totals(facts["counters"])
    counters = (
        f"since driver load: {totals['replay']} replay, {totals['recovery']} recovery, {totals['crc']} CRC errors"
        if facts["errors_read"]
        else "error counters not read"
    )
    observed = {"links": summary, "counters": counters}
    if totals["recovery"]:
        warns.append(
            f"{totals['recovery']} NVLink recovery errors since the driver loaded (may predate this run)"
        )
    wanted = _expected(host_vars)
    if fails:
        return Outcome(
            "FAIL", f"{host}: " + "; ".join(fails + warns), observed, wanted, remediation=REMEDIATION_LINKS
        )
    if warns:
        return Outcome(
            "WARN", f"{host}: " + "; ".join(warns), observed, wanted, remediation=REMEDIATION_COUNTERS
        )
    return Outcome("PASS", f"{host}: {summary}; {counters}", observed, wanted)


def _deltas(before: Facts, after: Facts) -> tuple[list[dict[str, Any]], bool]:
    """Per link and counter kind, how much it grew; and whether any counter went backwards (a reset)."""
    grown: list[dict[str, Any]] = []
    reset = False
    for gpu, links in after["counters"].items():
        for link, values in links.items():
            old = before.get("counters", {}).get(gpu, {}).get(link, {})
            for name, value in values.items():
                kind = counter_kind(name)
                if kind is None or name not in old:
                    continue
                change = value - old[name]
                if change < 0:
                    reset = True
                elif change:
                    grown.append({"gpu": gpu, "link": link, "kind": kind, "counter": name, "delta": change})
    return grown, reset


def judge_delta(before: Facts, after: Facts, host_vars: Vars) -> Outcome:
    host = host_vars.host or "this host"
    gate = _gate(after, host_vars)
    if gate:
        return gate
    fails, warns, summary = _link_findings(after, host_vars)
    fixes = [REMEDIATION_LINKS] if fails else []
    wanted = _expected(host_vars)
    if not (before.get("errors_read") and after["errors_read"]):
        warns.append(
            "NVLink error counters were not read before and after the run, so their growth is not judged"
        )
        grown, reset = [], False
    else:
        grown, reset = _deltas(before, after)
    if reset:
        warns.append("some NVLink counters went backwards (reset during the run); their growth is not judged")
    limit = host_vars.int("nvlink_crc_fail_delta", DEFAULT_CRC_FAIL_DELTA) or DEFAULT_CRC_FAIL_DELTA
    for g in grown:
        where = (
            f"GPU {g['gpu']} link {g['link']}: {g['counter'].replace('_', ' ')} +{g['delta']} during the run"
        )
        if g["kind"] == "recovery" or (g["kind"] == "crc" and g["delta"] >= limit):
            fails.append(where)
        else:
            warns.append(where)
    observed = {"links": summary, "grown": grown}
    if fails:
        remediation = " ".join([*fixes, REMEDIATION_COUNTERS] if grown else fixes)
        return Outcome(
            "FAIL", f"{host}: " + "; ".join(fails + warns), observed, wanted, remediation=remediation
        )
    if warns:
        return Outcome(
            "WARN", f"{host}: " + "; ".join(warns), observed, wanted, remediation=REMEDIATION_COUNTERS
        )
    return Outcome(
        "PASS", f"{host}: {summary}; no NVLink error counter moved during the run", observed, wanted
    )


CHECK = Check(
    id="gpu.nvlink",
    checklist="H",
    summary="every NVLink active at the expected speed; replay/recovery/CRC counters did not grow during the run",
    commands=(
        Command("nvlink_status", "nvidia-smi nvlink --status", tool="nvidia-smi", timeout=30),
        Command("nvlink_errors", "nvidia-smi nvlink -e", tool="nvidia-smi", timeout=30, required=False),
    ),
    parse=parse,
    judge=judge,
    remediation="Bring every NVLink up at full speed; investigate links whose error counters grow.",
    no_hardware=no_nvlink_required,
    judge_delta=judge_delta,
    folded_under="gpu.topology",
    action="reset_gpu",
)
