"""gpu.dcgm — DCGM's own diagnostics pass on every GPU at the playbook's level.

``dcgmi diag -r <dcgm_diag_level> -j`` runs NVIDIA's validation suite: level 1 the deployment checks
(seconds), level 2 adds short PCIe, memory and compute tests (about 2 minutes), level 3 the long stress,
power and memory-bandwidth tests (about 15 minutes on 8 GPUs), level 4 the extended ones (an hour or more);
the levels need the GPUs to themselves. ``dcgm_diag_level`` 0 (the default) is off: the acceptance
playbooks run level 3, the nightly level 1, node-check none unless asked.

Each test's result is read per GPU with DCGM's warnings and error codes. A Fail is a FAIL, except where
every warning behind it has DCGM's CONFIG severity (5: persistence mode off, say), which is a WARN: the
node needs a setting, not a repair. Warn results WARN; Skip and Not Run are listed, not judged. The action
(docs/actions.md) follows the tests that failed (:data:`TEST_ACTION`): a software or CONFIG finding is a
setting, PCIe a seating, memory and the compute-correctness diagnostic an RMA, the stress tests a reset;
a WARN stops short of an RMA (reset, then run the level again); a test failing with every GPU passing
is DCGM's own error, for support.

The level sets the budget (``BUDGET_S``; ``dcgm_diag_timeout_s`` overrides it): dcgmi runs under its own
``timeout`` inside the command, so a hung dcgmi is stopped at its budget and this check says so (ERROR:
nothing was judged), naming the level and the seconds. ``command_timeout_s``, where a playbook sets one,
caps the budget like every command's. A profile may cap the level for its SKU (``dcgm_diag_max_level``),
and the message then says which level was asked and which ran. The command runs last in the host's batch (``Command.last``): the
passive readings and the census of gpu.processes come first, on idle GPUs, and the host stage waits for
it, so a level-3 acceptance adds its quarter of an hour before the benchmarks. A run's time budget
(``time_budget_s``) still stops it, like any command of the host stage.

No dcgmi on the host is a SKIP naming the package (``datacenter-gpu-manager``), never an ERROR or a FAIL:
DCGM is an addition, not a requirement.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from diagnose.config.profiles import no_gpu_reason, no_gpu_required
from diagnose.core.check import Check, Command, Facts
from diagnose.core.model import CommandOutput, Outcome, strongest
from diagnose.core.vars import Vars
from diagnose.parsers.dcgm_diag import KILL_GRACE_S, dcgm_script, parse_dcgm_diag

#: Seconds dcgmi may take at each level before it counts as hung: about twice what a level takes on an
#: 8-GPU node (DCGM's guide: level 1 under a minute, level 2 about 2 minutes, level 3 about 15, level 4
#: one to two hours).
BUDGET_S = {1: 180, 2: 600, 3: 1800, 4: 7200}
#: What the command itself may take beyond dcgmi's budget (the kill grace, the frame lines).
COMMAND_SLACK_S = 15
CONFIG_SEVERITY = 5  # DCGM_ERROR_CONFIG: "This error can be configured"
INSTALL = (
    "Install DCGM to have its diagnostics run: the datacenter-gpu-manager package from NVIDIA's CUDA "
    "repository (DCGM 4: datacenter-gpu-manager-4-cuda<major>), then `systemctl enable --now nvidia-dcgm`."
)
REMEDIATION = (
    "Read DCGM's warning for each failed test and GPU: hardware errors (memory, PCIe, NVLink, power, thermal) "
    "mean drain the node, reset the GPU (`nvidia-smi -r -i <gpu>`) and run `dcgmi diag -r 3` again; a GPU "
    "that fails again goes to field diagnostics and RMA. CONFIG warnings name the setting to change."
)


#: What a failed DCGM test points at, by its name as DCGM 4 (``targeted_power``) or DCGM 3 (``Targeted
#: Power``) prints it, lower-cased with spaces; a test not named here takes the check's action.
TEST_ACTION = {
    "software": "check_config",
    "denylist": "check_config",
    "nvml library": "check_config",
    "cuda main library": "check_config",
    "cuda toolkit libraries": "check_config",
    "permissions and os blocks": "check_config",
    "persistence mode": "check_config",
    "environment variables": "check_config",
    "graphics processes": "check_user_app",
    "page retirement/row remap": "reset_gpu",
    "inforom": "contact_support",
    "pcie": "reseat_or_replace_cable",
    "memory": "rma_gpu",
    "gpu memory": "rma_gpu",
    "memtest": "rma_gpu",
    "memory bandwidth": "reset_gpu",
    "diagnostic": "rma_gpu",
    "sm stress": "reset_gpu",
    "targeted stress": "reset_gpu",
    "targeted power": "contact_support",
    "pulse test": "contact_support",
    "nvbandwidth": "reset_gpu",
    "nvlink": "reset_gpu",
}


def level_of(host_vars: Vars) -> int | None:
    """``dcgm_diag_level`` (0: off) held to ``dcgm_diag_max_level``; None when it is not a level DCGM knows."""
    level = host_vars.int("dcgm_diag_level", 0) or 0
    if level != 0 and level not in BUDGET_S:
        return None
    cap = host_vars.int("dcgm_diag_max_level")
    return min(level, max(cap, 0)) if cap is not None else level


def cap_note(host_vars: Vars) -> str:
    """What a message adds where the SKU's profile ran a lower level than the playbook asked, else ''.

    Some SKUs' higher levels do not finish in any window worth booking (level 2 hanging in the PCIe and NVLink
    tests on B200 and GB200 with DCGM 4.2), so their profiles cap the level; the report must say the level
    asked for was not the level run, or a PASS would read as the longer diagnostic's."""
    asked, ran = host_vars.int("dcgm_diag_level", 0) or 0, level_of(host_vars)
    if ran is None or ran >= asked:
        return ""
    return f" (level {asked} asked, level {ran} run: dcgm_diag_max_level {ran} for this SKU)"


def budget_of(host_vars: Vars, level: int) -> int:
    """dcgmi's own time limit: the level's budget or ``dcgm_diag_timeout_s``, under ``command_timeout_s``
    (less the kill grace, so dcgmi's own timeout ends it first and the check can name it)."""
    budget = host_vars.float("dcgm_diag_timeout_s", None) or BUDGET_S[level]
    cap = host_vars.float("command_timeout_s", None)
    if cap is not None:
        budget = min(budget, cap - KILL_GRACE_S - 2)
    return max(1, int(budget))


def command_for(level: int, budget: int) -> Command:
    return Command(
        "dcgm_diag", dcgm_script(level, budget), tool="dcgmi", timeout=budget + COMMAND_SLACK_S, last=True
    )


def commands_for(host_vars: Vars) -> tuple[Command, ...]:
    level = level_of(host_vars)
    if not level:
        return ()
    return (command_for(level, budget_of(host_vars, level)),)


def parse(outputs: Mapping[str, CommandOutput], host_vars: Vars) -> Facts:
    output = outputs.get("dcgm_diag")
    if output is None:
        return {"missing": False, "off": True, "tests": []}
    facts = parse_dcgm_diag(output.stdout)
    facts["stderr"] = output.stderr.strip()[:2000]
    return facts


def _short(text: str, limit: int = 220) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _warning(warning: dict[str, Any]) -> str:
    code = f"error {warning['error_id']}: " if warning.get("error_id") is not None else ""
    return code + _short(warning["warning"])


def _config_only(result: dict[str, Any]) -> bool:
    warnings = result["warnings"]
    return bool(warnings) and all(w.get("error_severity") == CONFIG_SEVERITY for w in warnings)


def _findings(tests: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """(failures, warnings), one line per test and GPU, with DCGM's words."""
    fails: list[str] = []
    warns: list[str] = []
    for test in tests:
        bad = [r for r in test["results"] if r["status"] in ("Fail", "Warn")]
        for result in bad:
            where = f"GPU {result['gpu']}" if result["gpu"] is not None else "no GPU named"
            said = "; ".join(_warning(w) for w in result["warnings"]) or "no warning given"
            line = f"{test['name']} {result['status']} on {where} ({said})"
            if result["status"] == "Fail" and _config_only(result):
                warns.append(line + " [a setting: DCGM severity CONFIG]")
            else:
                (fails if result["status"] == "Fail" else warns).append(line)
        if test["status"] in ("Fail", "Warn") and (test["warnings"] or not bad):
            said = "; ".join(_warning(w) for w in test["warnings"]) or "no warning given"
            line = f"{test['name']} {test['status']} ({said})"
            config = test["warnings"] and all(
                w.get("error_severity") == CONFIG_SEVERITY for w in test["warnings"]
            )
            (fails if test["status"] == "Fail" and not config else warns).append(line)
    return fails, warns


def _action(tests: list[dict[str, Any]], status: str) -> str:
    """The action covering every test that failed or warned; a WARN's RMA is a reset and a second run."""
    actions = []
    for test in tests:
        bad = [r for r in test["results"] if r["status"] in ("Fail", "Warn")]
        if not bad and test["status"] not in ("Fail", "Warn"):
            continue
        said = [w for r in bad for w in r["warnings"]] + test["warnings"]
        if said and all(w.get("error_severity") == CONFIG_SEVERITY for w in said):
            actions.append("check_config")
        elif not bad:  # the test failed with every GPU passing: DCGM's own error (NVIDIA/DCGM#253)
            actions.append("contact_support")
        else:
            actions.append(TEST_ACTION.get(test["name"].lower().replace("_", " "), CHECK.action))
    if status == "WARN":
        actions = ["reset_gpu" if a == "rma_gpu" else a for a in actions]
    return strongest(actions)


def _observed(facts: Facts) -> dict[str, Any]:
    return {
        "level": facts.get("level"),
        "version": facts.get("version"),
        "driver": facts.get("driver"),
        "rc": facts.get("rc"),
        "tests": {
            t["name"]: {str(r["gpu"]): r["status"] for r in t["results"]} or t["status"]
            for t in facts["tests"]
        },
    }


def judge(facts: Facts, host_vars: Vars) -> Outcome:
    outcome = _judge(facts, host_vars)
    note = cap_note(host_vars)
    return replace(outcome, message=outcome.message + note) if note else outcome


def _judge(facts: Facts, host_vars: Vars) -> Outcome:
    host = host_vars.host or "this host"
    level = level_of(host_vars)
    if level is None:
        return Outcome(
            "ERROR",
            f"dcgm_diag_level must be 0 (off) or 1-4, got {host_vars.get('dcgm_diag_level')!r}",
            None,
            "dcgm_diag_level 0-4",
        )
    wanted = f"every DCGM diagnostic test passes at level {level} on every GPU"
    if level == 0 or facts.get("off"):
        return Outcome(
            "SKIP", f"DCGM diagnostics off on {host} (dcgm_diag_level 0)", None, "dcgm_diag_level 1-4"
        )
    reason = no_gpu_reason(host_vars)
    if reason:
        return Outcome("SKIP", f"DCGM diagnostics not run on {host}: {reason}", None, wanted)
    if facts["missing"]:
        return Outcome(
            "SKIP",
            f"dcgmi not installed on {host} (package datacenter-gpu-manager): DCGM diagnostics not run",
            None,
            wanted,
            remediation=INSTALL,
        )
    if facts["hung"]:
        return Outcome(
            "ERROR",
            f"dcgmi hung at level {facts['level']} on {host}: stopped after {facts['budget_s']} s, its budget "
            "at this level (dcgm_diag_timeout_s raises it)",
            {"level": facts["level"], "budget_s": facts["budget_s"], "rc": facts["rc"]},
            wanted,
            remediation="Find what holds DCGM (`dcgmi diag` hangs on a GPU that stopped answering, or when "
            "nv-hostengine is stuck): check the kernel log for Xids, restart nvidia-dcgm, reset the GPU, "
            "and run the level again by hand.",
        )
    said = facts.get("runtime_error") or (facts.get("text") if not facts["tests"] else None)
    if said or not facts["tests"]:
        detail = _short(said or facts.get("stderr") or f"no test result (exit {facts.get('rc')})", 300)
        return Outcome(
            "ERROR",
            f"dcgmi diag -r {facts['level']} could not run on {host}: {detail}",
            _observed(facts),
            wanted,
            remediation="Start DCGM's host engine (`systemctl enable --now nvidia-dcgm`, or `nv-hostengine`) "
            "and check that this login may run diagnostics; then run the level again.",
        )
    fails, warns = _findings(facts["tests"])
    gpus = {r["gpu"] for t in facts["tests"] for r in t["results"] if r["gpu"] is not None}
    version = f"DCGM {facts['version']}, " if facts.get("version") else ""
    scope = f"{len(facts['tests'])} tests on {len(gpus)} GPU{'s' if len(gpus) != 1 else ''}"
    if fails or warns:
        return Outcome(
            "FAIL" if fails else "WARN",
            f"dcgmi diag -r {facts['level']} on {host} ({version}{scope}): " + "; ".join(fails + warns),
            _observed(facts),
            wanted,
            remediation=REMEDIATION,
            action=_action(facts["tests"], "FAIL" if fails else "WARN"),
        )
    skipped = [t["name"] for t in facts["tests"] if t["status"] in ("Skip", "Not Run")]
    note = f"; skipped: {', '.join(skipped)}" if skipped else ""
    return Outcome(
        "PASS",
        f"dcgmi diag -r {facts['level']} on {host} ({version}{scope}): every test passed{note}",
        _observed(facts),
        wanted,
    )


CHECK = Check(
    id="gpu.dcgm",
    checklist="H",
    summary="dcgmi diag -r <dcgm_diag_level> -j passes on every GPU (level 0 off; budget per level, "
    "a hung dcgmi stopped and named; no DCGM: SKIP)",
    commands=(command_for(1, BUDGET_S[1]),),
    parse=parse,
    judge=judge,
    remediation=REMEDIATION,
    commands_for=commands_for,
    no_hardware=no_gpu_required,
    folded_under="gpu.topology",
    action="rma_gpu",
)
