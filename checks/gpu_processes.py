"""gpu.processes — no compute process that diagnose did not start holds a GPU before the measurements.

A second process on a GPU takes its SMs, memory bandwidth and memory: measured on a lent H100, a bf16
matmul loop in another process left the verdict of ``diagnose run`` unchanged and only halved the host
memcpy figure. A sign-off measured on a shared GPU is not one. The host stage runs before any benchmark
or probe, so every compute process ``nvidia-smi --query-compute-apps`` lists then belongs to someone
else (a job the scheduler still runs, a leftover of a crashed one, a monitoring agent).

The verdict is ``foreign_processes_status``: FAIL (the default, and the acceptance playbooks: measurements
taken beside another process do not accept a cluster) or WARN (nightly and node-check: the node works, the
figures are marked). Either way the facts keep ``processes``, and the benchmark stage marks the entries
measured on such a host ``shared_gpu`` in results.json and the report. GPUs are named by the index and
bus id of the shared GPU query (the auxiliary command: without it, by bus id alone).

A process on a GPU that ``CUDA_VISIBLE_DEVICES`` keeps out of this host's scope (another job's GPUs on a
shared node, the other half of a machine split into two hosts) touches nothing diagnose measures here: it is
listed, not judged. Without the GPU query the scope cannot be told and every process is judged.

nvidia-smi lists only the processes of its own pid namespace: inside a container (or a test host with its own
namespaces) another container's job is not listed, yet it holds the GPU. So a GPU in scope that the shared GPU
query finds busy (``utilization.gpu`` at ``BUSY_PCT`` or more, before diagnose has started anything) with no
process listed counts as held by a process this host cannot see. On a lent 4x H200 split into two hosts a
matmul loop started outside both left the listing empty, its GPU at 100 %, and halved that GPU's figures.
An idle process holds memory without keeping the GPU busy: on a lent 2x H200 split the same way, a process
outside both hosts held 120 GiB of one GPU at 0 % utilization, and the memory test, the KV transfer and the
stress allocations found a GPU a sixth its size. So memory in use on a GPU in scope beyond what the listed
processes account for, by ``HELD_MIB`` or more, is held by a process this host cannot see as well. The driver's
own reserve is not in ``memory.used`` (it reads 0 MiB on an idle H100 and H200; the reserve is its own field),
and diagnose has started nothing on the GPU at the host stage, so nothing else explains it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from diagnose.config.profiles import no_gpu_reason, no_gpu_required
from diagnose.core.check import Check, Facts
from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.units import human_bytes
from diagnose.core.vars import Vars
from diagnose.parsers.compute_apps import COMPUTE_APPS, parse_compute_apps
from diagnose.parsers.gpu_query import GPU_QUERY, number, parse_gpu_query
from diagnose.parsers.visible_gpus import ENV_COMMAND, parse_visibility_env, resolve_visible

STATUSES = ("FAIL", "WARN")
DEFAULT_STATUS = "FAIL"
MIB = 1024 * 1024
#: For a GPU busy with no process in sight: the pid is only to be had where every process shows.
UNSEEN_REMEDIATION = (
    "Run `nvidia-smi --query-compute-apps=gpu_bus_id,pid,process_name --format=csv` on the machine itself (not in "
    "the container or pod): it lists every process on the GPU; find its owner and stop it, or drain the node and "
    "wait for its jobs to end. Then run again."
)
#: A GPU this busy before any measurement, with no process listed, is held by one this host cannot see.
BUSY_PCT = 50
#: Memory in use beyond the listed processes' that is held by one this host cannot see: twice a bare CUDA
#: context (about 0.5 GiB), so a context the driver is still tearing down is not a holder.
HELD_MIB = 1024

REMEDIATION = (
    "Find who owns each process (`ps -o user,etime,args -p <pid>`) and stop it, or drain the node in the "
    "scheduler and wait for its jobs to end before measuring; a context left by a crashed job goes away when "
    "its process is killed. Then run again: figures measured beside another process do not describe the node."
)


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    processes = parse_compute_apps(outputs["compute_apps"].stdout)
    query = outputs.get("gpu_query")
    gpus: list[dict[str, Any]] = []
    if query is not None and query.ok:
        try:
            gpus = [
                {
                    "index": r.get("index"),
                    "bus_id": r.get("pci.bus_id"),
                    "utilization": _percent(r),
                    "memory_used_mib": _mib(r.get("memory.used")),
                    "memory_total_mib": _mib(r.get("memory.total")),
                }
                for r in query.parsed(parse_gpu_query)
            ]
        except ValueError:
            gpus = []  # named by bus id alone; the GPU checks report the query's own problem
    index = {str(g["bus_id"]).lower(): g["index"] for g in gpus if g["bus_id"]}
    for process in processes:
        process["gpu"] = index.get(process["bus_id"].lower())
    visibility = outputs.get("gpu_visibility")
    env = parse_visibility_env(visibility.stdout) if visibility is not None and visibility.ok else {}
    scope = None
    if env.get("CUDA_VISIBLE_DEVICES") is not None and gpus and all(g["index"] is not None for g in gpus):
        resolved = resolve_visible(env, [{"index": g["index"]} for g in gpus])
        if not resolved["unresolved"]:
            scope = {
                "variable": "CUDA_VISIBLE_DEVICES",
                "value": resolved["value"],
                "gpus": resolved["visible"],
            }
    facts = {"processes": processes, "gpus": gpus, "scope": scope}
    facts["unseen"] = _unseen(facts, scope)
    return facts


def _percent(row: Mapping[str, Any]) -> int | None:
    try:
        return int(str(row.get("utilization.gpu")).strip().rstrip("%").strip())
    except ValueError:
        return None


def _mib(value: str | None) -> int | None:
    read = number(value)
    return int(read) if read is not None else None


def _unseen(facts: Facts, scope: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """GPUs in scope that a process this host cannot see holds at the host stage: busy with no process
    listed, or with memory in use beyond what the listed processes account for (``held_mib``)."""
    inside = {str(i) for i in scope["gpus"]} if scope is not None else None
    found = []
    for gpu in facts["gpus"]:
        if inside is not None and str(gpu["index"]) not in inside:
            continue
        bus = str(gpu["bus_id"]).lower()
        on_it = [p for p in facts["processes"] if str(p["bus_id"]).lower() == bus]
        busy = not on_it and (gpu.get("utilization") or 0) >= BUSY_PCT
        held = None
        used = gpu.get("memory_used_mib")
        if used is not None and all(p.get("used_mib") is not None for p in on_it):
            beyond = used - sum(p["used_mib"] for p in on_it)
            held = beyond if beyond >= HELD_MIB else None
        if busy or held is not None:
            found.append({**gpu, "busy": busy, "held_mib": held})
    return found


def _unseen_words(gpu: Mapping[str, Any]) -> str:
    """``GPU 1 (…) 100 % busy, 120.5 GiB of 140.0 GiB held`` — what the query showed that no listing explains."""
    parts = [f"{gpu['utilization']} % busy"] if gpu["busy"] else []
    if gpu["held_mib"] is not None:
        total = gpu.get("memory_total_mib")
        of = f" of {human_bytes(total * MIB)}" if total else ""
        parts.append(f"{human_bytes(gpu['held_mib'] * MIB)}{of} held")
    return f"GPU {gpu['index']} ({gpu['bus_id']}) {', '.join(parts)}"


def describe(process: dict[str, Any]) -> str:
    """GPU, pid, name and memory of one process, as the message and the report name it."""
    gpu = (
        f"GPU {process['gpu']} ({process['bus_id']})"
        if process.get("gpu") is not None
        else f"GPU {process['bus_id']}"
    )
    used = process.get("used_mib")
    memory = human_bytes(used * MIB) if used is not None else "memory not reported"
    return f"{gpu}: pid {process['pid']} {process['process_name']}, {memory}"


def judge(facts: Facts, host_vars: Vars) -> Outcome:
    host = host_vars.host or "this host"
    wanted = "no compute process on any GPU before diagnose measures"
    reason = no_gpu_reason(host_vars)
    if reason:
        return Outcome("SKIP", f"GPU processes not looked for on {host}: {reason}", None, wanted)
    status = (host_vars.str("foreign_processes_status") or DEFAULT_STATUS).strip().upper()
    if status not in STATUSES:
        return Outcome(
            "ERROR",
            f"foreign_processes_status must be FAIL or WARN, got {host_vars.str('foreign_processes_status')!r}",
            None,
            wanted,
        )
    scope = facts.get("scope")
    outside: list[dict[str, Any]] = []
    processes = facts["processes"]
    gpus = len(facts["gpus"])
    if scope is not None:
        inside = {str(i) for i in scope["gpus"]}
        outside = [p for p in processes if p.get("gpu") is not None and str(p["gpu"]) not in inside]
        processes = [p for p in processes if p not in outside]
        gpus = len(scope["gpus"])
    besides = (
        f"; not judged, on GPUs outside {scope['variable']}={scope['value']}: "
        + "; ".join(describe(p) for p in outside)
        if outside and scope
        else ""
    )
    unseen = facts["unseen"]
    if not processes and not unseen:
        of = f"the {gpus} GPU{'s' if gpus != 1 else ''} of {host}" if gpus else f"any GPU of {host}"
        if scope is not None:
            of += f" in scope ({scope['variable']}={scope['value']})"
        return Outcome("PASS", f"no compute process on {of}{besides}", [], wanted)
    what = "not a sign-off" if status == "FAIL" else "marked shared_gpu"
    hidden = [
        {
            "bus_id": g["bus_id"],
            "gpu": g["index"],
            "utilization_pct": g["utilization"],
            "held_mib": g["held_mib"],
            "memory_total_mib": g.get("memory_total_mib"),
        }
        for g in unseen
    ]
    cannot_see = (
        f"{'; '.join(_unseen_words(g) for g in unseen)} before diagnose started anything, by no process this "
        "host can see (nvidia-smi lists only its own pid namespace: a job in another container or on the "
        "machine itself)"
    )
    if not processes:
        return Outcome(
            status,
            f"{host}: {cannot_see}; measurements on this host are {what}{besides}",
            hidden,
            wanted,
            remediation=UNSEEN_REMEDIATION,
        )
    shared = len({p["bus_id"] for p in processes})
    on = (
        f"{shared} of its {gpus} GPU{'s' if gpus != 1 else ''}"
        if gpus
        else f"{shared} GPU{'s' if shared != 1 else ''}"
    )
    listed = "; ".join(describe(p) for p in processes)
    count = f"{len(processes)} compute process{'es' if len(processes) != 1 else ''}"
    also = f"; and {cannot_see}" if unseen else ""
    return Outcome(
        status,
        f"{host}: {count} diagnose did not start, on {on} ({listed}){also}; measurements on this host are "
        f"{what}{besides}",
        processes + hidden,
        wanted,
        remediation=f"{REMEDIATION} {UNSEEN_REMEDIATION}" if unseen else REMEDIATION,
    )


CHECK = Check(
    id="gpu.processes",
    checklist="H",
    summary="no compute process diagnose did not start on any GPU (nvidia-smi --query-compute-apps); "
    "foreign_processes_status FAIL|WARN",
    commands=(COMPUTE_APPS, replace(GPU_QUERY, required=False, auxiliary=True), ENV_COMMAND),
    parse=parse,
    judge=judge,
    remediation=REMEDIATION,
    no_hardware=no_gpu_required,
    folded_under="gpu.topology",
    action="check_user_app",
)
