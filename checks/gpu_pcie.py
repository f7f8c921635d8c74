"""gpu.pcie — every GPU's PCIe link is as wide as it should be, and as fast under load.

A link that trained narrower than its maximum (x8 on an x16 GPU: a bad riser, a dirty connector, a slot
bifurcated by the BIOS) halves host-to-GPU bandwidth and, on HGX boards, the bandwidth between the GPU and
the NIC behind the same PCIe switch, i.e. GPUDirect RDMA: FAIL. ``expected_pcie_width`` (16 on the SXM
profiles) replaces the GPU's own maximum as the expectation, which catches a GPU whose maximum itself is
misreported behind a switch.

The generation is different: GPUs drop to Gen1 when idle to save power, so a generation below the maximum
in an idle snapshot is normal and is *not judged* (the message says so). It is judged on samples taken
under load: ``judge_under_load(samples, vars)`` for snapshots the benchmark stage takes while collectives
run, and ``judge_delta(before, after, vars)`` when the after-benchmark snapshot still shows load. A Gen4
link on a Gen5 slot under load is a link that failed to train up: FAIL.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from diagnose.config.profiles import no_gpu_reason, no_gpu_required
from diagnose.core.check import Check, Facts
from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.units import counted
from diagnose.core.vars import Vars
from diagnose.parsers.gpu_query import GPU_QUERY, flag, gpu_label, integer, parse_gpu_query

# A snapshot counts as "under load" when the GPU was busy at least this share of the sample period.
LOAD_UTILIZATION_PCT = 10

REMEDIATION_WIDTH = (
    "Reseat the GPU (or the HGX board's PCIe cable/riser), clean the connectors, check the slot's "
    "bifurcation setting in the BIOS; `lspci -vv -s <bus id>` shows LnkCap vs LnkSta. A link that trains "
    "narrow again after a reseat is a board/riser RMA."
)
REMEDIATION_GEN = (
    "The link trained to a lower generation under load: check the BIOS PCIe speed setting for the slot, "
    "reseat the GPU/riser, update the system BIOS and GPU VBIOS; `lspci -vv -s <bus id>` shows the speed."
)


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    gpus = []
    for row in outputs["gpu_query"].parsed(parse_gpu_query):
        utilization = integer(row.get("utilization.gpu"))
        idle = flag(row.get("clocks_event_reasons.gpu_idle"))
        gpus.append(
            {
                "index": row.get("index"),
                "bus_id": row.get("pci.bus_id"),
                "gen": integer(row.get("pcie.link.gen.current")),
                "gen_max": integer(row.get("pcie.link.gen.max")),
                "width": integer(row.get("pcie.link.width.current")),
                "width_max": integer(row.get("pcie.link.width.max")),
                "utilization_pct": utilization,
                "under_load": (utilization or 0) >= LOAD_UTILIZATION_PCT and idle is not True,
            }
        )
    return {"gpus": gpus}


def _label(gpu: dict[str, Any]) -> str:
    return gpu_label({"index": gpu["index"], "pci.bus_id": gpu["bus_id"]})


def _width_failures(gpus: list[dict[str, Any]], host_vars: Vars) -> list[str]:
    expected = host_vars.int("expected_pcie_width")
    failures = []
    for gpu in gpus:
        want = expected or gpu["width_max"]
        if gpu["width"] is not None and want is not None and gpu["width"] < want:
            source = "expected_pcie_width" if expected else "its maximum"
            failures.append(f"{_label(gpu)} link x{gpu['width']}, {source} x{want}")
    return failures


def _gen_findings(gpus: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """(failures under load, notes for GPUs whose generation was sampled at idle)."""
    failures, idle = [], []
    for gpu in gpus:
        if gpu["gen"] is None or gpu["gen_max"] is None or gpu["gen"] >= gpu["gen_max"]:
            continue
        if gpu["under_load"]:
            failures.append(
                f"{_label(gpu)} at Gen{gpu['gen']} under load ({gpu['utilization_pct']}% busy), max Gen{gpu['gen_max']}"
            )
        else:
            idle.append(
                f"{_label(gpu)} generation Gen{gpu['gen']} at idle, max Gen{gpu['gen_max']}: not judged at idle"
            )
    return failures, idle


def _observed(gpus: list[dict[str, Any]]) -> dict[str, str]:
    return {
        str(g["index"]): f"Gen{g['gen']} x{g['width']} (max Gen{g['gen_max']} x{g['width_max']})"
        + (" under load" if g["under_load"] else "")
        for g in gpus
    }


def _expected(host_vars: Vars) -> str:
    width = host_vars.int("expected_pcie_width")
    return (
        f"x{width} on every GPU" if width else "every GPU at its maximum width; maximum generation under load"
    )


def _verdict(
    host: str, gpus: list[dict[str, Any]], host_vars: Vars, extra_fail: Sequence[str] = ()
) -> Outcome:
    observed = _observed(gpus)
    wanted = _expected(host_vars)
    width = _width_failures(gpus, host_vars)
    gen_fail, idle = _gen_findings(gpus)
    fails = [*width, *extra_fail, *gen_fail]
    if fails:
        remediation = " ".join(
            ([REMEDIATION_WIDTH] if width else []) + ([REMEDIATION_GEN] if gen_fail or extra_fail else [])
        )
        return Outcome(
            "FAIL", f"{host}: " + "; ".join(fails + idle), observed, wanted, remediation=remediation
        )
    links = sorted(
        {f"Gen{g['gen']} x{g['width']}" for g in gpus if g["width"] is not None and g["gen"] is not None}
    )
    loaded = " under load" if gpus and all(g["under_load"] for g in gpus) else ""
    summary = (
        f"{counted(len(gpus), 'GPU')} at {'/'.join(links)}{loaded}" if links else counted(len(gpus), "GPU")
    )
    return Outcome("PASS", f"{host}: {summary}" + ("; " + "; ".join(idle) if idle else ""), observed, wanted)


def judge(facts: Facts, host_vars: Vars) -> Outcome:
    host = host_vars.host or "this host"
    reason = no_gpu_reason(host_vars)
    if reason:
        return Outcome("SKIP", f"PCIe links not judged on {host}: {reason}", None, _expected(host_vars))
    if not facts["gpus"]:
        return Outcome(
            "ERROR", f"nvidia-smi lists no GPU on {host}, so PCIe links cannot be judged (see gpu.topology)"
        )
    return _verdict(host, facts["gpus"], host_vars)


def judge_delta(before: Facts, after: Facts, host_vars: Vars) -> Outcome:
    """Width on both snapshots (a link that retrained narrower during the run fails); the generation on
    the after-benchmark snapshot where it still shows load."""
    outcome = judge(after, host_vars)
    if outcome.status in ("SKIP", "ERROR"):
        return outcome
    narrowed = [
        f"{_label(b)} was x{b['width']} before the benchmarks"
        for b in before.get("gpus", [])
        for a in after["gpus"]
        if a["index"] == b["index"] and None not in (a["width"], b["width"]) and a["width"] < b["width"]
    ]
    if narrowed:
        return _verdict(host_vars.host or "this host", after["gpus"], host_vars, extra_fail=narrowed)
    return outcome


def judge_under_load(samples: Sequence[Facts], host_vars: Vars) -> Outcome:
    """The generation judged on snapshots taken while the benchmarks ran (each a ``parse`` result).

    Each GPU is judged on its best sample under load, so one sample caught between two collectives (the
    link already idling down) does not fail a healthy link.
    """
    host = host_vars.host or "this host"
    reason = no_gpu_reason(host_vars)
    if reason:
        return Outcome("SKIP", f"PCIe generation not judged on {host}: {reason}")
    best: dict[str, dict[str, Any]] = {}
    for sample in samples:
        for gpu in sample.get("gpus", []):
            if not gpu["under_load"] or gpu["gen"] is None:
                continue
            key = str(gpu["index"])
            if key not in best or gpu["gen"] > best[key]["gen"]:
                best[key] = gpu
    if not best:
        return Outcome(
            "SKIP",
            f"no sample of {host} caught a GPU under load (>= {LOAD_UTILIZATION_PCT}% busy), so the PCIe "
            "generation is not judged",
        )
    return _verdict(host, list(best.values()), host_vars)


CHECK = Check(
    id="gpu.pcie",
    checklist="H",
    summary="PCIe link width at its maximum (FAIL below); generation judged under load only",
    commands=(GPU_QUERY,),
    parse=parse,
    judge=judge,
    remediation="Reseat GPUs whose PCIe link trained narrow or slow.",
    no_hardware=no_gpu_required,
    judge_delta=judge_delta,
    judge_under_load=judge_under_load,
    folded_under="gpu.topology",
    action="reseat_or_replace_cable",
)
