"""The action every finding carries (docs/actions.md): declared by every catalog check and stage id, taken
per code from the Xid and SXid catalogs on captured kernel lines, refined by the rules from their facts.

Kernel lines are the captures in tests/fixtures/captured/{kernel_log,sxid} (see each SOURCE); where a case
needs the same fault at two moments, the captured line is repeated with two timestamps in the format of
the dmesg capture it comes with.
"""

from __future__ import annotations

from typing import Any

import pytest

from diagnose.catalog import sxid, xid
from diagnose.catalog.actions import MEANING, action_of, declared, declarer_of
from diagnose.catalog.loading import load_catalog
from diagnose.catalog.stage_ids import STAGE_IDS
from diagnose.checks import gpu_dcgm, gpu_memory, gpu_sxid, gpu_xid, host_reachable, ib_devices, ib_port_state
from diagnose.cli import main
from diagnose.config.profile_files import load_profile
from diagnose.core.check import Check, Command
from diagnose.core.model import ACTIONS, CheckResult, CommandOutput, Outcome, strongest
from diagnose.core.vars import Vars
from diagnose.engine.evaluate import evaluate_check
from tests.support.paths import CAPTURED

DECLARERS = [*load_catalog(), *STAGE_IDS]
HEALTHY_QUERY = "gpu_query/h200x2_580_healthy.txt"


def profile(name: str, host: str = "node1", **overrides: Any) -> Vars:
    return Vars({**load_profile(name).vars, "diagnose_profile": name, **overrides}, host=host)


def ndr_profile(**overrides: Any) -> Vars:
    return profile("h100-8x-ndr400", **overrides)


def lent_h200() -> Vars:
    """The lent two-GPU VM as an inventory would describe it."""
    return profile("single-node-nvlink", host="vm", expected_gpu_count=2)


def text(fixture: str) -> str:
    return (CAPTURED / fixture).read_text()


def out(fixture: str | None = None, body: str = "") -> CommandOutput:
    return CommandOutput(stdout=text(fixture) if fixture else body, exit_code=0)


def log(body: str) -> CommandOutput:
    """Kernel-log lines behind the header the shared kernel-log command prints before them."""
    return CommandOutput(stdout="# source dmesg\n" + body)


def kernel_log(fixture: str) -> CommandOutput:
    return log(text(fixture))


def judge(check: Check, vars_: Vars, **outputs: CommandOutput) -> Any:
    return check.judge(check.parse(outputs, vars_), vars_)


@pytest.mark.parametrize("entry", DECLARERS, ids=lambda e: e.id)
def test_every_check_and_stage_id_declares_valid_actions(entry: Any) -> None:
    assert entry.action in ACTIONS and entry.action != "none", f"{entry.id} declares no action for a FAIL"
    assert entry.warn_action is None or entry.warn_action in ACTIONS
    assert entry.error_action in ACTIONS
    for status in ("FAIL", "WARN", "ERROR"):
        assert declared(entry, status, "") in ACTIONS
    assert declared(entry, "PASS") is None and declared(entry, "SKIP") == "none"


def test_every_action_is_explained_and_every_id_finds_its_declarer() -> None:
    assert set(MEANING) == set(ACTIONS)
    for entry in DECLARERS:
        concrete = entry.id.replace("<collective>", "all_reduce").replace("<module>::<test>", "site::test_x")
        assert declarer_of(concrete) is entry, concrete


def test_every_xid_and_sxid_row_has_two_valid_actions() -> None:
    for row in [*xid.CATALOG.values(), xid.lookup(9999)]:
        assert all(a in ACTIONS for a in row.actions), row
    assert set(xid.ACTION) == set(xid.REMEDIATION)
    assert set(sxid.ACTION) == set(sxid.REMEDIATION)
    assert all(a in ACTIONS for pair in sxid.ACTION.values() for a in pair)


def xid_outcome(fixture: str) -> Outcome:
    return judge(gpu_xid.CHECK, lent_h200(), kernel_log=kernel_log(fixture), gpu_query=out(HEALTHY_QUERY))


@pytest.mark.parametrize(
    ("fixture", "status", "action"),
    [
        ("kernel_log/xid79_gpud_sxid_readme.txt", "FAIL", "reboot"),  # off the bus: a reset cannot reach it
        ("kernel_log/fallen_off_no_xid_nvsentinel_155.txt", "FAIL", "reboot"),
        ("kernel_log/xid48_gpu_operator_1146.txt", "FAIL", "reset_gpu"),  # DBE: reset so the remap applies
        ("kernel_log/xid63_syslog_row_remapper.txt", "WARN", "reset_gpu"),  # "reset gpu to activate"
        ("kernel_log/xid13_43_gpud_dmesg_decode_iso.txt", "WARN", "check_user_app"),
        ("kernel_log/xid119_gpud_testdata_ctime.txt", "FAIL", "reset_gpu"),  # GSP RPC timeout
        ("kernel_log/xid74_nvsentinel_design.txt", "FAIL", "reset_gpu"),
        ("kernel_log/xid149_145_94_gpud_pr1174.txt", "FAIL", "reset_gpu"),
    ],
)
def test_xid_action_per_code_on_captured_lines(fixture: str, status: str, action: str) -> None:
    outcome = xid_outcome(fixture)
    assert (outcome.status, outcome.action) == (status, action), outcome.message
    assert all(e["action"] in ACTIONS for e in outcome.observed["events"])


def test_xid_events_carry_their_own_action_and_the_result_the_strongest() -> None:
    outcome = xid_outcome("kernel_log/xid149_145_94_gpud_pr1174.txt")
    actions = {e["xid"]: e["action"] for e in outcome.observed["events"]}
    assert actions == {149: "reset_gpu", 145: "reset_gpu", 94: "reset_gpu"}
    assert strongest(["reboot", "reset_gpu", "check_user_app"]) == "reboot"
    assert strongest(["rma_gpu", "reboot"]) == "rma_gpu"


def _at(moments: list[str], fixture: str, xid_line: str) -> str:
    """The captured Xid line of ``fixture`` at each of ``moments`` (dmesg --time-format iso prefixes)."""
    line = next(x for x in text(fixture).splitlines() if xid_line in x)
    body = line[line.index("NVRM:") :]
    return "\n".join(f"kern  :warn  : {m}+00:00 {body}" for m in moments)


@pytest.mark.parametrize(
    ("fixture", "number", "once", "again"),
    [
        ("kernel_log/xid79_gpud_sxid_readme.txt", 79, "reboot", "rma_gpu"),
        ("kernel_log/xid48_gpu_operator_1146.txt", 48, "reset_gpu", "rma_gpu"),
        ("kernel_log/xid74_nvsentinel_design.txt", 74, "reset_gpu", "reseat_or_replace_cable"),
        ("kernel_log/xid119_gpud_testdata_ctime.txt", 119, "reset_gpu", "reboot"),
    ],
)
def test_an_xid_that_comes_back_takes_its_second_action_a_burst_does_not(
    fixture: str, number: int, once: str, again: str
) -> None:
    marker = f"): {number},"
    burst = _at(["2025-01-21T04:41:44,283302", "2025-01-21T04:41:45,100000"], fixture, marker)
    recurs = _at(["2025-01-21T04:41:44,283302", "2025-01-21T09:12:01,000000"], fixture, marker)
    for body, want in ((burst, once), (recurs, again)):
        outcome = judge(gpu_xid.CHECK, lent_h200(), kernel_log=log(body), gpu_query=out(HEALTHY_QUERY))
        event = next(e for e in outcome.observed["events"] if e["xid"] == number)
        assert event["count"] == 2 and event["action"] == want, event
        assert outcome.action == want


def test_xid_154_follows_the_recovery_its_text_asks_for() -> None:
    # Xid 154's text as NVIDIA's Xid catalog describes it: the recovery action, code and words.
    assert (
        xid.action(154, "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)")
        == "reboot"
    )
    assert (
        xid.action(154, "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)")
        == "reset_gpu"
    )
    assert xid.action(154, "") == "reset_gpu"
    assert xid.action(9999, "") == "contact_support"  # an Xid this table does not know: no advice of ours
    assert xid.occurrences([]) == 1 and xid.occurrences([0.0, 30.0, 200.0, 205.0]) == 2


@pytest.mark.parametrize(
    ("fixture", "status", "action"),
    [
        ("sxid/sxid20034_gpud_readme.txt", "FAIL", "reset_gpu"),  # fatal: reset GPUs and switches together
        ("sxid/sxid12028_gpud_test_nonfatal.txt", "WARN", "none"),  # corrected: nothing to do for one event
        ("sxid/sxid_menthos_dataset.txt", "FAIL", "reset_gpu"),  # fatal and host-access SXids
    ],
)
def test_sxid_action_per_group_on_captured_lines(fixture: str, status: str, action: str) -> None:
    outcome = judge(gpu_sxid.CHECK, ndr_profile(), kernel_log=log(text(fixture)))
    assert (outcome.status, outcome.action) == (status, action), outcome.message


def test_a_fatal_sxid_again_on_the_same_link_is_a_service_case() -> None:
    line = next(x for x in text("sxid/sxid20034_gpud_readme.txt").splitlines() if "Link 48" in x)
    outcome = judge(gpu_sxid.CHECK, ndr_profile(), kernel_log=log(f"{line}\n{line}"))
    assert outcome.observed["events"][0]["count"] == 2
    assert outcome.action == "contact_support"


def test_a_missing_adapter_is_replace_hca_a_down_port_a_cable() -> None:
    ibstat = out("ibstat/h100_cx7_ndr400_8hca_bond.txt")  # eight NDR ports, all Active
    ports_short = judge(ib_port_state.CHECK, ndr_profile(expected_hca_count=9), ibstat=ibstat)
    assert ports_short.status == "FAIL" and ports_short.action == "replace_hca"
    down = out(body=ibstat.stdout.replace("State: Active", "State: Down", 1))
    cable = judge(ib_port_state.CHECK, ndr_profile(), ibstat=down)
    assert cable.status == "FAIL" and cable.action is None  # the declared one: a cable
    assert declared(ib_port_state.CHECK, cable.status) == "reseat_or_replace_cable"
    roce = judge(ib_port_state.CHECK, ndr_profile(), ibstat=out("ibstat/roce_cx7_down_polling.txt"))
    assert roce.status == "FAIL" and roce.action == "check_config"  # the wrong link layer: the profile
    assert ib_devices.CHECK.action == "check_config"


@pytest.mark.parametrize(
    ("message", "action"),
    [
        ("node1 is unreachable: connection to 10.0.0.7:22 timed out after 10 s", "reboot"),
        ("node1 is unreachable: cannot connect to 10.0.0.7:22: No route to host", "reboot"),
        (
            "node1 is unreachable: connection to 10.0.0.7:22 refused (no SSH server listening?)",
            "check_config",
        ),
        ("node1 is unreachable: authentication failed for root@10.0.0.7:22: denied", "check_config"),
        ("node1 is unreachable: cannot resolve gpu-07: Name or service not known", "check_config"),
    ],
)
def test_unreachable_host_action_follows_the_reason(message: str, action: str) -> None:
    assert action_of(host_reachable.CHECK.id, "FAIL", message) == action
    assert action_of(host_reachable.CHECK.id, "ERROR", "internal error: boom") == "contact_support"


FAKE = Check(
    id="fake.thing",
    checklist="–",
    summary="a test check",
    commands=(Command("thing", "thing --query", tool="thing"),),
    parse=lambda outputs, _vars: {"value": int(outputs["thing"].stdout)},
    judge=lambda facts, _vars: Outcome("FAIL" if facts["value"] else "PASS", "seen"),
    remediation="fix it",
    action="reseat_or_replace_cable",
    error_action="check_config",
)


def test_evaluation_sets_the_action_of_each_way_a_check_ends() -> None:
    host = lent_h200()
    passed = evaluate_check(FAKE, {"thing": CommandOutput("0\n", exit_code=0)}, host, None)[0]
    assert passed.action is None and "action" not in passed.to_dict()
    failed = evaluate_check(FAKE, {"thing": CommandOutput("1\n", exit_code=0)}, host, None)[0]
    assert failed.to_dict()["action"] == "reseat_or_replace_cable"
    missing = evaluate_check(FAKE, {"thing": CommandOutput("", "not found", 127)}, host, None)[0]
    assert (missing.status, missing.action) == ("ERROR", "check_config")
    hung = evaluate_check(FAKE, {"thing": CommandOutput(timed_out=True)}, host, None)[0]
    assert (hung.status, hung.action) == ("ERROR", "check_config")
    garbled = evaluate_check(FAKE, {"thing": CommandOutput("x\n", exit_code=0)}, host, None)[0]
    assert (garbled.status, garbled.action) == ("ERROR", "contact_support")  # our parser, not their host


def test_an_action_outside_the_nine_words_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown action"):
        Outcome("FAIL", "x", action="replace_everything")
    with pytest.raises(ValueError, match="unknown action"):
        action_of("ib.port_state", "FAIL", "x", "reboot please")
    assert action_of("ib.port_state", "PASS", "", "reboot") is None
    assert action_of("no.such_id", "FAIL") == "contact_support"
    assert isinstance(CheckResult("a", None, "–", "FAIL").to_dict(), dict)


@pytest.mark.parametrize(
    ("fixture", "action"),
    [
        ("gpu_query/remap_pending_gpu1.txt", "reset_gpu"),  # a reset applies the pending remap
        ("gpu_query/remap_failure_gpu0.txt", "rma_gpu"),  # the GPU cannot repair its memory any more
    ],
)
def test_gpu_memory_action_follows_what_the_memory_can_still_do(fixture: str, action: str) -> None:
    outcome = judge(gpu_memory.CHECK, lent_h200(), gpu_query=out(fixture))
    assert (outcome.status, outcome.action) == ("FAIL", action)


def test_diagnose_checks_shows_each_ids_action(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["checks"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["id", "list", "action", "needs"]
    # One block a check: its id, list, action and needs on the first line, what it judges indented beneath.
    listed = {
        line.split()[0]: line.split()[2] for line in lines[1:] if line.strip() and not line[0].isspace()
    }
    assert listed["gpu.memtest"] == "rma_gpu" and listed["ib.port_state"] == "reseat_or_replace_cable"
    assert listed["train.sync"] == "check_user_app" and listed["net.port_range"] == "check_config"


@pytest.mark.parametrize(
    ("fixture", "status", "action"),
    [
        ("dcgm_diag/h100x8_level3_diagnostic_fail_gpu3.txt", "FAIL", "rma_gpu"),  # faulty memory elements
        ("dcgm_diag/h100x8_level3_software_persistence_gpu0.txt", "WARN", "check_config"),  # CONFIG severity
        ("dcgm_diag/b200x8_level2_pcie_internal_error.txt", "FAIL", "contact_support"),  # no GPU failed
    ],
)
def test_gpu_dcgm_action_follows_the_failed_test(fixture: str, status: str, action: str) -> None:
    host = profile("h100-8x-ndr400", dcgm_diag_level=3)
    outcome = judge(gpu_dcgm.CHECK, host, dcgm_diag=out(fixture))
    assert (outcome.status, outcome.action) == (status, action), outcome.message


def test_gpu_dcgm_test_names_of_both_dcgm_layouts_map_to_valid_actions() -> None:
    assert set(gpu_dcgm.TEST_ACTION.values()) <= set(ACTIONS)
    pcie_gpu2 = profile("h100-8x-ndr400", dcgm_diag_level=3)
    facts = gpu_dcgm.parse({"dcgm_diag": out("dcgm_diag/h100x8_level3_pass.txt")}, pcie_gpu2)
    facts["tests"][3]["results"][2]["status"] = "Warn"  # pcie warns on GPU 2: a seating, even as a WARN
    assert gpu_dcgm.judge(facts, pcie_gpu2).action == "reseat_or_replace_cable"
    facts["tests"][1]["results"][0]["status"] = "Warn"  # memory warns too: a reset and a second run
    assert gpu_dcgm.judge(facts, pcie_gpu2).action == "reseat_or_replace_cable"
    facts["tests"][1]["results"][0]["status"] = "Fail"
    assert gpu_dcgm.judge(facts, pcie_gpu2).action == "rma_gpu"
