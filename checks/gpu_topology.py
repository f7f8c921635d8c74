"""gpu.topology — the GPUs, their NVLink mesh and their distance to the NICs are what the profile says.

``nvidia-smi`` gives the GPU count, model, driver and CUDA version; ``nvidia-smi topo -m`` gives, for each
GPU pair, NV# (a bonded set of # NVLinks) or a PCIe path, and for each GPU–NIC pair how far apart they sit
on PCIe. GPUDirect RDMA is only fast (and by NCCL's default only used) when the NIC sits behind the same
PCIe switch as the GPU (PIX, or PXB through several switches); PHB, NODE and SYS send every byte through
the CPU's root complex or across sockets.

Only the GPUs ``CUDA_VISIBLE_DEVICES`` leaves visible are in the run's scope: the benchmarks start one rank
per visible GPU, because a rank on a GPU it cannot see dies ("invalid device ordinal").
:mod:`diagnose.parsers.visible_gpus` reads the variable against ``nvidia-smi -L``; the facts carry the
visible count and a note that names the variable and the GPUs left out, which the verdict and the benchmark
stage both repeat. The GPU count the profile expects is the hardware's (a missing GPU is a fault); fewer of
them in scope is a warning that the run did not cover them, and a variable naming no GPU here a failure.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from diagnose.config.profiles import no_gpu_reason, no_gpu_required
from diagnose.core.check import Check, Command, Facts
from diagnose.core.model import CommandOutput, Outcome
from diagnose.core.units import counted
from diagnose.core.vars import Vars
from diagnose.parsers.nvidia_smi import (
    PCIE_RANK,
    SMI_LIST,
    SMI_SUMMARY,
    model_matches,
    nvlink_links,
    parse_smi_summary,
    parse_topo,
)
from diagnose.parsers.visible_gpus import ENV_COMMAND, parse_smi_list, parse_visibility_env, resolve_visible

GOOD_NIC_RELATIONS = ("PIX", "PXB")
SCOPE_REMEDIATION = (
    "CUDA_VISIBLE_DEVICES decides which GPUs CUDA programs (the benchmark ranks among them) see: unset it to "
    "accept every GPU, or name GPUs this host has, by index or by UUID (`nvidia-smi -L` lists both), in the "
    "environment diagnose's commands run in (this shell for the local connection, the login environment over "
    "SSH, the container's in a pod, the job's under Slurm)."
)


def _visibility(outputs: Mapping[str, CommandOutput], gpus: list[dict]) -> dict:
    """Which of nvidia-smi's GPUs CUDA sees: every one when the variables could not be read."""
    env_out, list_out = outputs.get(ENV_COMMAND.key), outputs.get(SMI_LIST.key)
    env = parse_visibility_env(env_out.stdout) if env_out is not None and env_out.ok else {}
    listed = {g["index"]: g for g in parse_smi_list(list_out.stdout)} if list_out and list_out.ok else {}
    merged = [
        {**g, **{k: listed[g["index"]][k] for k in ("uuid", "mig")}} if g["index"] in listed else g
        for g in gpus
    ]
    return resolve_visible(env, merged)


def _scope_note(visible: dict, total: int) -> str | None:
    """``1 of 4 GPUs visible (CUDA_VISIBLE_DEVICES=0); GPUs 1, 2, 3 not in scope``; None when CUDA sees
    every GPU nvidia-smi lists."""
    if not visible["hidden"] and not visible["stopped_at"]:
        return None
    named = ", ".join(f"{name}={value}" for name, value in visible["env"].items())
    note = f"{len(visible['visible'])} of {total} GPUs visible ({named})"
    if visible["stopped_at"] is not None:
        after = f" and the {len(visible['ignored']) - 1} after it" if len(visible["ignored"]) > 1 else ""
        note += (
            f"; CUDA stops at entry {visible['stopped_at']!r}, which names no GPU of this host (or one named "
            f"before), and ignores it{after}"
        )
    if visible["hidden"]:
        word = "GPU" if len(visible["hidden"]) == 1 else "GPUs"
        note += f"; {word} {', '.join(map(str, visible['hidden']))} not in scope"
    return note


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    facts = parse_smi_summary(outputs["nvidia_smi"].stdout)
    topo = parse_topo(outputs["topo"].stdout)
    gpus = topo["gpus"]
    pairs = [(a, b, topo["links"][a][b]) for i, a in enumerate(gpus) for b in gpus[i + 1 :]]
    nearest = {}
    for gpu in gpus:
        relations = [(topo["links"][gpu].get(n["column"]), n["device"]) for n in topo["nics"]]
        ranked = sorted((PCIE_RANK.get(rel, 99), rel, dev) for rel, dev in relations if rel)
        if ranked:
            nearest[gpu] = {"relation": ranked[0][1], "nic": ranked[0][2]}
    numa: dict[str, list[str]] = defaultdict(list)
    for gpu in gpus:
        numa[str(topo["affinity"].get(gpu, {}).get("numa"))].append(gpu)
    facts.update(
        topo_gpus=gpus,
        nics=[n["device"] for n in topo["nics"]],
        gpu_pairs=[{"a": a, "b": b, "relation": rel, "nvlinks": nvlink_links(rel)} for a, b, rel in pairs],
        nearest_nic=nearest,
        affinity=topo["affinity"],
        numa_groups=dict(numa),
    )
    visible = _visibility(outputs, facts["gpus"])
    facts.update(
        visible=visible,
        visible_gpu_count=len(visible["visible"]),
        visible_note=_scope_note(visible, facts["gpu_count"]),
    )
    return facts


def _summary(facts: Facts) -> str:
    pairs = facts["gpu_pairs"]
    links = sorted({p["nvlinks"] for p in pairs if p["nvlinks"] is not None})
    if not pairs:
        mesh = "one GPU"
    elif all(p["nvlinks"] is not None for p in pairs):
        mesh = "NVLink on every pair (" + "/".join(f"NV{n}" for n in links) + ")"
    else:
        nv = sum(p["nvlinks"] is not None for p in pairs)
        mesh = f"NVLink on {nv} of {len(pairs)} pairs"
    nearest = facts["nearest_nic"]
    if not facts["nics"]:
        nic = "no NIC in the matrix"
    else:
        good = sum(v["relation"] in GOOD_NIC_RELATIONS for v in nearest.values())
        nic = f"{good} of {len(facts['topo_gpus'])} GPUs with a NIC at PIX/PXB"
    numa = ", ".join(f"NUMA {node}: {', '.join(gpus)}" for node, gpus in facts["numa_groups"].items())
    model = facts["gpu_model"] or "GPU"
    scope = f"; {facts['visible_note']}" if facts.get("visible_note") else ""
    return f"{facts['gpu_count']}x {model}; {mesh}; {nic}; {numa}{scope}"


def _scope_findings(facts: Facts, count: int | None) -> tuple[list[str], list[str]]:
    """(failures, warnings) of the GPUs in scope: none visible to CUDA is a failure (every GPU benchmark
    would die), an entry CUDA stops at or fewer GPUs in scope than the profile expects a warning."""
    note, seen = facts.get("visible_note"), facts.get("visible_gpu_count", facts["gpu_count"])
    if not note or not facts["gpu_count"]:
        return [], []
    if seen == 0:
        return [f"CUDA programs see none of the {facts['gpu_count']} GPUs: {note}"], []
    if facts["visible"]["stopped_at"] is not None:
        return [], [note]
    if count is not None and seen < count <= facts["gpu_count"]:
        return [], [f"only {seen} of the {count} expected GPUs in scope, the others not tested: {note}"]
    return [], []


def judge(facts: Facts, host_vars: Vars) -> Outcome:
    host = host_vars.host or "this host"
    observed = _summary(facts)
    count = host_vars.int("expected_gpu_count")
    model = host_vars.str("expected_gpu_model")
    want_nvlink = host_vars.bool("expected_nvlink", False)
    want_nic = host_vars.bool("expected_nic_per_gpu", False)
    parts = [f"{count}x" if count is not None else ">= 1", model or "GPU"]
    if want_nvlink:
        parts.append("NVLink between every pair")
    if want_nic:
        parts.append("a NIC at PIX/PXB for every GPU")
    wanted = ", ".join([" ".join(parts[:2]), *parts[2:]])
    reason = no_gpu_reason(host_vars)
    if reason:
        return Outcome(
            "SKIP", f"{counted(facts['gpu_count'], 'GPU')} on {host} not judged: {reason}", observed, "no GPU"
        )
    failures: list[str] = []
    warnings: list[str] = []
    if facts["gpu_count"] == 0:
        failures.append("nvidia-smi lists no GPU")
    elif count is not None and facts["gpu_count"] != count:
        failures.append(f"{counted(facts['gpu_count'], 'GPU')}, expected {count}")
    scope_failures, scope_warnings = _scope_findings(facts, count)
    warnings.extend(scope_warnings)
    if facts["topo_gpus"] and len(facts["topo_gpus"]) != facts["gpu_count"]:
        warnings.append(f"topo -m shows {len(facts['topo_gpus'])} GPUs but nvidia-smi {facts['gpu_count']}")
    if model:
        odd = sorted({g["name"] for g in facts["gpus"] if not model_matches(model, g["name"])})
        if odd:
            failures.append(f"GPU model {', '.join(odd)} is not {model}")
    if want_nvlink:
        pcie = [f"{p['a']}-{p['b']} {p['relation']}" for p in facts["gpu_pairs"] if p["nvlinks"] is None]
        if pcie:
            shown = ", ".join(pcie[:6]) + (f" and {len(pcie) - 6} more" if len(pcie) > 6 else "")
            failures.append(f"{len(pcie)} GPU pairs without NVLink ({shown})")
    if want_nic and facts["gpu_count"]:
        if not facts["nics"]:
            warnings.append("nvidia-smi topo -m shows no NIC, so no GPU has a local NIC")
        else:
            far = [
                f"{gpu} nearest NIC {v['nic']} is {v['relation']}"
                for gpu, v in facts["nearest_nic"].items()
                if v["relation"] not in GOOD_NIC_RELATIONS
            ]
            if far:
                warnings.append("; ".join(far))
    if failures:
        return Outcome(
            "FAIL",
            f"{host}: " + "; ".join(failures + warnings),
            observed,
            wanted,
            remediation="A missing GPU is usually a fallen-off-the-bus device (dmesg: Xid 79) or a failed "
            "HGX board; missing NVLink on an HGX/DGX system points at the NVSwitch fabric: check that "
            "nvidia-fabricmanager runs and `nvidia-smi nvlink --status` shows every link up.",
        )
    if scope_failures:
        return Outcome(
            "FAIL",
            f"{host}: " + "; ".join(scope_failures + warnings),
            observed,
            wanted,
            remediation=SCOPE_REMEDIATION,
            action="check_config",
        )
    if scope_warnings and scope_warnings == warnings:
        return Outcome(
            "WARN",
            f"{host}: " + "; ".join(warnings),
            observed,
            wanted,
            remediation=SCOPE_REMEDIATION,
            action="check_config",
        )
    if warnings:
        return Outcome(
            "WARN",
            f"{host}: " + "; ".join(warnings),
            observed,
            wanted,
            remediation="GPUDirect RDMA is fast only with the NIC behind the GPU's own PCIe switch: check the "
            "NIC slots against the vendor's GPU/NIC pairing, and that the NICs are not hidden from the "
            "driver (ACS, VM passthrough).",
        )
    return Outcome("PASS", f"{host}: {observed}", observed, wanted)


CHECK = Check(
    id="gpu.topology",
    checklist="1",
    summary="nvidia-smi topo -m: GPU count and model, NVLink between GPU pairs, GPU–NIC locality",
    commands=(
        Command("topo", "nvidia-smi topo -m", tool="nvidia-smi", timeout=30),
        SMI_SUMMARY,
        SMI_LIST,
        ENV_COMMAND,
    ),
    parse=parse,
    judge=judge,
    remediation="Make the GPUs, NVLink mesh and NIC placement match the hardware profile.",
    no_hardware=no_gpu_required,
    action="reboot",
    warn_action="check_config",
)
