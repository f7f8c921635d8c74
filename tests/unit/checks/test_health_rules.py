"""The node-health rules on facts: the healthy lent H200 first, then each fault each check must name.

Outputs are the real or composed captures in tests/fixtures/captured/{gpu_query,kernel_log,nvlink,
ib_counters,limits} (see each SOURCE); expected values come from the shipped profiles, overridden the way
an inventory would. The evaluation path (missing tool, refused log) goes through evaluate_check.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from diagnose.checks import (
    gpu_clocks,
    gpu_fabricmanager,
    gpu_memory,
    gpu_nvlink,
    gpu_pcie,
    gpu_xid,
    host_memlock,
    ib_counters,
)
from diagnose.config.profile_files import load_profile
from diagnose.core.check import Check
from diagnose.core.model import CommandOutput
from diagnose.core.vars import Vars
from diagnose.engine.evaluate import evaluate_check
from tests.support.paths import CAPTURED

HEALTHY_QUERY = "gpu_query/h200x2_580_healthy.txt"
MISSING = CommandOutput(stdout="", stderr="sh: 1: nvidia-smi: not found", exit_code=127)


def profile(name: str, host: str = "node1", **overrides: Any) -> Vars:
    return Vars({**load_profile(name).vars, "diagnose_profile": name, **overrides}, host=host)


def lent_h200(**overrides: Any) -> Vars:
    """The lent VM as an inventory would describe it: single-node-nvlink with its two GPUs."""
    return profile("single-node-nvlink", host="vm", expected_gpu_count=2, **overrides)


def out(fixture: str | None = None, text: str = "", rc: int = 0) -> CommandOutput:
    return CommandOutput(stdout=(CAPTURED / fixture).read_text() if fixture else text, exit_code=rc)


def kernel_log(fixture: str, source: str = "dmesg", clock: str = "") -> CommandOutput:
    """A pasted kernel log wrapped in the header the check's command prints before its NVRM lines."""
    header = (f"# clock {clock}\n" if clock else "") + f"# source {source}\n"
    return out(text=header + (CAPTURED / fixture).read_text())


def judge(check: Check, vars_: Vars, **outputs: CommandOutput) -> Any:
    return check.judge(check.parse(outputs, vars_), vars_)


HEALTHY = {
    "gpu_query": out(HEALTHY_QUERY),
    "kernel_log": out("kernel_log/h200x2_dmesg_iso_no_xid.txt"),
    "nvlink_status": out("nvlink/h200x2_status.txt"),
    "nvlink_errors": out("nvlink/h200x2_errors.txt"),
    "fabric_manager": out("gpu_query/h200x2_fm_probe_no_systemctl.txt"),
    "ib_counters": out("ib_counters/h200x2_no_rdma_device.txt"),
    "memlock": out("limits/h200x2_root_unlimited.txt"),
}
ALL = (gpu_xid, gpu_memory, gpu_clocks, gpu_pcie, gpu_nvlink, gpu_fabricmanager, ib_counters, host_memlock)


# ------------------------------------------------------------------------------------ the healthy machine


@pytest.mark.parametrize("module", ALL, ids=lambda m: m.CHECK.id)
def test_healthy_lent_h200_passes_or_skips_with_reason(module: Any) -> None:
    result, facts = evaluate_check(module.CHECK, HEALTHY, lent_h200(), "raw/vm/x.txt")
    assert result.status in ("PASS", "SKIP"), result.message
    assert result.checklist == "H"
    if result.status == "SKIP":
        assert module is ib_counters
        assert "no RDMA device on vm; see ib.devices" in result.message
    assert facts is not None


def test_healthy_messages_say_what_was_seen() -> None:
    v = lent_h200()
    assert (
        "no Xid in the kernel log of vm since boot (dmesg-iso, 4 NVRM lines)"
        in judge(gpu_xid.CHECK, v, **HEALTHY).message
    )
    nvlink = judge(gpu_nvlink.CHECK, v, **HEALTHY)
    assert "2 GPUs x 18 active NVLinks at 26.562 GB/s" in nvlink.message
    fabric = judge(gpu_fabricmanager.CHECK, v, **HEALTHY)
    assert "fabric trained (Completed/Success on 2 GPUs)" in fabric.message
    assert "managed outside the guest" in fabric.message
    assert "x16" in judge(gpu_pcie.CHECK, v, **HEALTHY).message
    assert "active: GPU idle" in judge(gpu_clocks.CHECK, v, **HEALTHY).message


def test_healthy_h200_under_the_8_gpu_profile_links_and_pcie() -> None:
    v = profile("h200-8x-ndr400")
    assert judge(gpu_nvlink.CHECK, v, **HEALTHY).status == "PASS"
    assert judge(gpu_pcie.CHECK, v, **HEALTHY).status == "PASS"
    assert judge(gpu_fabricmanager.CHECK, v, **HEALTHY).status == "PASS"
    assert judge(host_memlock.CHECK, v, **HEALTHY).status == "PASS"


def test_cpu_testbed_skips_every_gpu_check() -> None:
    v = profile("cpu-testbed")
    for module in (gpu_xid, gpu_memory, gpu_clocks, gpu_pcie, gpu_nvlink, gpu_fabricmanager):
        result, _ = evaluate_check(
            module.CHECK, {**HEALTHY, "gpu_query": MISSING, "nvlink_status": MISSING}, v, None
        )
        assert result.status == "SKIP", (module.CHECK.id, result.message)


# ------------------------------------------------------------------------------------------------ gpu.xid


def test_xid_unreadable_log_is_an_error_naming_the_refusal_never_a_pass() -> None:
    for fixture in (
        "kernel_log/h200x2_nonroot_dmesg_refused.txt",
        "kernel_log/devbox_nonroot_journal_and_dmesg_refused.txt",
    ):
        result, _ = evaluate_check(gpu_xid.CHECK, {**HEALTHY, "kernel_log": out(fixture)}, lent_h200(), None)
        assert result.status == "ERROR"
        assert "read kernel buffer failed: Operation not permitted" in result.message
        assert "dmesg_restrict=0" in result.remediation and "systemd-journal" in result.remediation
    skipped = judge(
        gpu_xid.CHECK, profile("cpu-testbed"), kernel_log=out("kernel_log/h200x2_nonroot_dmesg_refused.txt")
    )
    assert skipped.status == "SKIP"


def test_xid_79_fails_and_names_the_missing_gpu() -> None:
    outcome = judge(
        gpu_xid.CHECK,
        lent_h200(),
        kernel_log=kernel_log("kernel_log/xid79_gpud_sxid_readme.txt"),
        gpu_query=out(HEALTHY_QUERY),
    )
    assert outcome.status == "FAIL"
    assert (
        "Xid 79 (GPU has fallen off the bus) on the GPU at PCI 0000:91:00 (not listed by nvidia-smi)"
        in outcome.message
    )
    assert "drain the node" in outcome.remediation


def test_xid_event_is_mapped_to_gpu_index_and_nvidia_smi_bus_id() -> None:
    # The healthy query with GPU 1's bus id set to the one of the Xid lines (0000:38:00), to show the
    # mapping between the two spellings; the Xid lines themselves are real.
    query = (CAPTURED / HEALTHY_QUERY).read_text().replace("00000000:00:07.0", "00000000:38:00.0")
    outcome = judge(
        gpu_xid.CHECK,
        lent_h200(),
        kernel_log=kernel_log("kernel_log/xid13_43_gpud_dmesg_decode_iso.txt"),
        gpu_query=out(text=query),
    )
    assert outcome.status == "WARN"
    assert "Xid 13 (Graphics Engine Exception) on GPU 1 (00000000:38:00.0) x16" in outcome.message
    assert "Xid 43" in outcome.message
    assert "repeat across jobs" in outcome.message


@pytest.mark.parametrize(
    ("fixture", "status", "words"),
    [
        ("kernel_log/xid119_gpud_testdata_ctime.txt", "FAIL", "Xid 119 (GSP RPC Timeout)"),
        ("kernel_log/xid48_gpu_operator_1146.txt", "FAIL", "Xid 48 (Double Bit ECC Error)"),
        (
            "kernel_log/xid74_nvsentinel_design.txt",
            "FAIL",
            "Xid 74 (NVLink Error) on the GPU at PCI 0003:00:00",
        ),
        ("kernel_log/xid63_syslog_row_remapper.txt", "WARN", "Xid 63"),
        (
            "kernel_log/fallen_off_no_xid_nvsentinel_155.txt",
            "FAIL",
            "Xid 79 (GPU has fallen off the bus) on the GPU at PCI 0000:b3:00",
        ),
        ("kernel_log/rminitadapter_not_xid.txt", "PASS", "no Xid"),
        ("kernel_log/h200x2_dmesg_T_nvrm_not_xid.txt", "PASS", "no Xid"),
    ],
)
def test_xid_verdicts(fixture: str, status: str, words: str) -> None:
    outcome = judge(gpu_xid.CHECK, lent_h200(), kernel_log=kernel_log(fixture), gpu_query=out(HEALTHY_QUERY))
    assert outcome.status == status, outcome.message
    assert words in outcome.message


def test_xid_remediations_follow_the_category() -> None:
    gsp = judge(
        gpu_xid.CHECK, lent_h200(), kernel_log=kernel_log("kernel_log/xid119_gpud_testdata_ctime.txt")
    )
    assert "GPU System Processor" in gsp.remediation
    memory = judge(
        gpu_xid.CHECK, lent_h200(), kernel_log=kernel_log("kernel_log/xid48_gpu_operator_1146.txt")
    )
    assert "gpu.memory" in memory.remediation
    remap = judge(
        gpu_xid.CHECK, lent_h200(), kernel_log=kernel_log("kernel_log/xid63_syslog_row_remapper.txt")
    )
    assert "gpu.memory" in remap.remediation


def test_xid_nvlink_nonfatal_is_a_warning_fatal_a_failure() -> None:
    outcome = judge(
        gpu_xid.CHECK, lent_h200(), kernel_log=kernel_log("kernel_log/xid149_145_94_gpud_pr1174.txt")
    )
    assert outcome.status == "FAIL"
    events = {e["xid"]: e["severity"] for e in outcome.observed["events"]}
    assert events == {149: "FAIL", 145: "WARN", 94: "FAIL"}


def test_xid_window_since_the_last_run() -> None:
    log = kernel_log("kernel_log/xid13_43_gpud_dmesg_decode_iso.txt")
    later = judge(gpu_xid.CHECK, lent_h200(xid_since="2025-01-22T00:00:00Z"), kernel_log=log)
    assert later.status == "PASS"
    assert "17 older events outside the window" in later.message
    assert len(later.observed["outside_window"]) == 2
    earlier = judge(gpu_xid.CHECK, lent_h200(xid_since="2025-01-21T04:00:00Z"), kernel_log=log)
    assert earlier.status == "WARN"
    assert "since 2025-01-21T04:00:00Z" in earlier.message


def test_xid_window_span_uses_the_hosts_clock() -> None:
    log = kernel_log(
        "kernel_log/xid13_43_gpud_dmesg_decode_iso.txt", clock="1737435000 100.0"
    )  # 2025-01-21T04:50Z
    assert judge(gpu_xid.CHECK, lent_h200(xid_window="24h"), kernel_log=log).status == "WARN"
    assert judge(gpu_xid.CHECK, lent_h200(xid_window="5m"), kernel_log=log).status == "PASS"
    assert judge(gpu_xid.CHECK, lent_h200(xid_window="yesterday"), kernel_log=log).status == "ERROR"


# --------------------------------------------------------------------------------------------- gpu.memory


def test_memory_remap_pending_fails_with_reset() -> None:
    outcome = judge(gpu_memory.CHECK, lent_h200(), gpu_query=out("gpu_query/remap_pending_gpu1.txt"))
    assert outcome.status == "FAIL"
    assert (
        "GPU 1 (00000000:00:07.0): remapped rows pending (4 uncorrectable), GPU reset needed"
        in outcome.message
    )
    assert "nvidia-smi -r" in outcome.remediation


def test_memory_remap_failure_is_an_rma() -> None:
    outcome = judge(gpu_memory.CHECK, lent_h200(), gpu_query=out("gpu_query/remap_failure_gpu0.txt"))
    assert outcome.status == "FAIL"
    assert "GPU 0 (00000000:00:06.0): row remapping failure" in outcome.message
    assert "RMA" in outcome.remediation


def test_memory_not_applicable_is_never_a_failure() -> None:
    facts = gpu_memory.parse({"gpu_query": out(HEALTHY_QUERY)}, lent_h200())
    assert facts["gpus"][0]["retired_pending"] is None and facts["gpus"][0]["retired_dbe"] is None
    assert gpu_memory.judge(facts, lent_h200()).status == "PASS"


def test_memory_lifetime_errors_and_ecc_off_warn() -> None:
    facts = gpu_memory.parse({"gpu_query": out(HEALTHY_QUERY)}, lent_h200())
    history = copy.deepcopy(facts)
    history["gpus"][0]["uncorrected_aggregate"] = 3
    assert "3 uncorrectable ECC errors in its lifetime" in gpu_memory.judge(history, lent_h200()).message
    ecc_off = copy.deepcopy(facts)
    ecc_off["gpus"][1]["ecc_mode"] = False
    outcome = gpu_memory.judge(ecc_off, lent_h200())
    assert outcome.status == "WARN" and "GPU 1 (00000000:00:07.0): ECC is disabled" in outcome.message


# --------------------------------------------------------------------------------------------- gpu.clocks


def test_clocks_hw_slowdown_fails_naming_the_gpu() -> None:
    outcome = judge(gpu_clocks.CHECK, lent_h200(), gpu_query=out("gpu_query/hw_slowdown_gpu1.txt"))
    assert outcome.status == "FAIL"
    assert "GPU 1 (00000000:00:07.0): HW slowdown, HW thermal slowdown active, 91 C" in outcome.message


def test_clocks_bitmask_alone_is_decoded() -> None:
    assert gpu_clocks.decode(0x48) == ["hw_slowdown", "hw_thermal_slowdown"]
    assert gpu_clocks.decode(0x1) == ["gpu_idle"]
    assert gpu_clocks.decode(0xA0) == ["sw_thermal_slowdown", "hw_power_brake_slowdown"]
    query = "index, pci.bus_id, clocks_event_reasons.active\n0, 00000000:00:06.0, 0x0000000000000020\n"
    outcome = judge(gpu_clocks.CHECK, lent_h200(), gpu_query=out(text=query))
    assert outcome.status == "WARN" and "SW thermal slowdown" in outcome.message


def test_clocks_with_the_old_column_names() -> None:
    outcome = judge(
        gpu_clocks.CHECK, lent_h200(), gpu_query=out("gpu_query/h200x2_throttle_names_answered_as_event.txt")
    )
    assert outcome.status == "PASS"


# ----------------------------------------------------------------------------------------------- gpu.pcie


def test_pcie_x8_fails_naming_the_gpu() -> None:
    outcome = judge(gpu_pcie.CHECK, lent_h200(), gpu_query=out("gpu_query/pcie_x8_gpu1.txt"))
    assert outcome.status == "FAIL"
    assert "GPU 1 (00000000:00:07.0) link x8, expected_pcie_width x16" in outcome.message


def test_pcie_generation_at_idle_is_not_judged() -> None:
    outcome = judge(gpu_pcie.CHECK, lent_h200(), gpu_query=out("gpu_query/pcie_gen1_idle.txt"))
    assert outcome.status == "PASS"
    assert "generation Gen1 at idle, max Gen5: not judged at idle" in outcome.message


def test_pcie_generation_under_load() -> None:
    v = lent_h200()
    load = gpu_pcie.parse({"gpu_query": out("gpu_query/pcie_gen4_under_load_gpu0.txt")}, v)
    idle = gpu_pcie.parse({"gpu_query": out("gpu_query/pcie_gen1_idle.txt")}, v)
    healthy = gpu_pcie.parse({"gpu_query": out(HEALTHY_QUERY)}, v)
    assert gpu_pcie.judge(load, v).status == "FAIL"
    under = gpu_pcie.judge_under_load([idle, load], v)
    assert under.status == "FAIL" and "GPU 0 (00000000:00:06.0) at Gen4 under load" in under.message
    assert gpu_pcie.judge_under_load([idle], v).status == "SKIP"
    assert gpu_pcie.judge_delta(healthy, load, v).status == "FAIL"
    narrowed = gpu_pcie.parse({"gpu_query": out("gpu_query/pcie_x8_gpu1.txt")}, v)
    assert (
        gpu_pcie.judge_delta(
            healthy, narrowed, profile("single-node-nvlink", expected_pcie_width=None)
        ).status
        == "FAIL"
    )
    assert gpu_pcie.judge_delta(healthy, healthy, v).status == "PASS"


# --------------------------------------------------------------------------------------------- gpu.nvlink


def nvlink_facts(status: str, errors: str | None = "nvlink/h200x2_errors.txt") -> dict[str, Any]:
    outputs = {"nvlink_status": out(status)}
    if errors:
        outputs["nvlink_errors"] = out(errors)
    return gpu_nvlink.parse(outputs, lent_h200())


def test_nvlink_inactive_link_fails_naming_gpu_and_link() -> None:
    facts = nvlink_facts("nvlink/h200x2_status_gpu1_link3_inactive.txt")
    outcome = gpu_nvlink.judge(facts, profile("h200-8x-ndr400"))
    assert outcome.status == "FAIL"
    assert "GPU 1: 17 of 18 NVLinks active (inactive: link 3)" in outcome.message
    assert gpu_nvlink.judge(facts, lent_h200()).status == "WARN"


def test_nvlink_a100_and_speed_expectation() -> None:
    facts = nvlink_facts("nvlink/a100_8gpu_status_gpud.txt", errors=None)
    assert gpu_nvlink.judge(facts, profile("a100-8x-hdr200")).status == "PASS"
    slow = gpu_nvlink.judge(facts, profile("h100-8x-ndr400"))
    assert (
        slow.status == "FAIL"
        and "12 of 18 NVLinks active" in slow.message
        and "expected 26.562 GB/s" in slow.message
    )


def test_nvlink_absent_skips_unless_the_profile_counts_links() -> None:
    facts = nvlink_facts("nvlink/a10_pcie_status_gpud.txt", errors=None)
    assert gpu_nvlink.judge(facts, lent_h200()).status == "SKIP"
    assert gpu_nvlink.judge(facts, profile("h100-8x-ndr400")).status == "FAIL"
    assert gpu_nvlink.judge(nvlink_facts("nvlink/h200x2_status.txt"), profile("cpu-testbed")).status == "SKIP"


def test_nvlink_absolute_recovery_errors_warn() -> None:
    facts = nvlink_facts("nvlink/h200x2_status.txt", "nvlink/h200x2_errors_after_replay_crc_recovery.txt")
    outcome = gpu_nvlink.judge(facts, lent_h200())
    assert outcome.status == "WARN" and "may predate this run" in outcome.message


def test_nvlink_delta() -> None:
    before = nvlink_facts("nvlink/h200x2_status.txt")
    after = nvlink_facts("nvlink/h200x2_status.txt", "nvlink/h200x2_errors_after_replay_crc_recovery.txt")
    outcome = gpu_nvlink.judge_delta(before, after, lent_h200())
    assert outcome.status == "FAIL"
    assert "GPU 1 link 7: recovery errors +1 during the run" in outcome.message
    assert (
        "GPU 0 link 5: replay errors +12" in outcome.message
        and "GPU 0 link 5: crc errors +3" in outcome.message
    )
    no_recovery = copy.deepcopy(after)
    no_recovery["counters"]["1"]["7"]["recovery_errors"] = 0
    assert gpu_nvlink.judge_delta(before, no_recovery, lent_h200()).status == "WARN"
    assert gpu_nvlink.judge_delta(before, no_recovery, lent_h200(nvlink_crc_fail_delta=3)).status == "FAIL"
    quiet = gpu_nvlink.judge_delta(before, before, lent_h200())
    assert quiet.status == "PASS" and "no NVLink error counter moved" in quiet.message


# -------------------------------------------------------------------------------------- gpu.fabricmanager


def fabric(query: str, probe: CommandOutput, vars_: Vars) -> Any:
    return judge(gpu_fabricmanager.CHECK, vars_, gpu_query=out(query), fabric_manager=probe)


VM_PROBE = out("gpu_query/h200x2_fm_probe_no_systemctl.txt")


def test_fabric_in_progress_fails() -> None:
    outcome = fabric("gpu_query/fabric_in_progress.txt", VM_PROBE, lent_h200())
    assert outcome.status == "FAIL"
    assert "GPU 0 (00000000:00:06.0) fabric In Progress" in outcome.message
    assert "system not yet initialized" in outcome.message


def test_fabric_without_nvswitch_skips_and_a100_needs_the_manager() -> None:
    assert fabric("gpu_query/pcie_card_no_fabric.txt", VM_PROBE, lent_h200()).status == "SKIP"
    a100 = profile("a100-8x-hdr200")
    missing = fabric("gpu_query/pcie_card_no_fabric.txt", VM_PROBE, a100)
    assert missing.status == "FAIL" and "expects NVSwitch" in missing.message
    running = out(text="systemctl active\nprocess running\n")
    assert fabric("gpu_query/pcie_card_no_fabric.txt", running, a100).status == "PASS"


def test_fabric_from_the_q_section_of_an_old_driver() -> None:
    outcome = fabric("gpu_query/pre550_fallback_tier_with_q_fabric.txt", VM_PROBE, lent_h200())
    assert outcome.status == "PASS"
    failed_unit = out(text="systemctl failed\nprocess none\n")
    assert fabric(HEALTHY_QUERY, failed_unit, lent_h200()).status == "WARN"


# -------------------------------------------------------------------------------------------- ib.counters


def ib_facts(fixture: str) -> dict[str, Any]:
    return ib_counters.parse({"ib_counters": out(fixture)}, profile("h100-8x-ndr400"))


def test_ib_counters_absolute_values_warn_and_leave_ethernet_out() -> None:
    outcome = ib_counters.judge(
        ib_facts("ib_counters/h100_gpud_sysfs_testdata.txt"), profile("h100-8x-ndr400")
    )
    assert outcome.status == "WARN"
    assert "mlx5_1 port 1: link_downed 255 (saturated)" in outcome.message
    assert "not necessarily now" in outcome.message
    assert "mlx5_bond_0 port 1 (Ethernet, not judged)" in outcome.message
    assert outcome.observed["mlx5_0 port 1"]["port_rcv_errors"] == 14


def test_ib_counters_flap_during_the_run_fails_naming_the_port() -> None:
    v = profile("h100-8x-ndr400")
    before = ib_facts("ib_counters/h100_gpud_sysfs_testdata.txt")
    after = ib_facts("ib_counters/h100_gpud_sysfs_after_flap_mlx5_4.txt")
    outcome = ib_counters.judge_delta(before, after, v)
    assert outcome.status == "FAIL"
    assert "mlx5_4 port 1: link_downed +1 during the run (link flap)" in outcome.message
    assert "mlx5_4 port 1: symbol_error +37 during the run" in outcome.message
    assert "mlx5_6 port 1: port_xmit_discards +220" in outcome.message
    assert outcome.observed["delta"]["mlx5_4 port 1"] == {"symbol_error": 37, "link_downed": 1}


def test_ib_counters_nothing_moved_passes() -> None:
    facts = ib_facts("ib_counters/h100_gpud_sysfs_testdata.txt")
    saturated = ib_counters.judge_delta(facts, facts, profile("h100-8x-ndr400"))
    assert saturated.status == "WARN" and "saturated at 255 and cannot show growth" in saturated.message
    cleared = copy.deepcopy(facts)
    for port in cleared["ports"]:
        port["counters"]["link_downed"] = 0
    quiet = ib_counters.judge_delta(cleared, cleared, profile("h100-8x-ndr400"))
    assert quiet.status == "PASS" and "no error counter moved on 8 fabric ports" in quiet.message


def test_ib_counters_without_devices_points_at_ib_devices() -> None:
    outcome = ib_counters.judge(ib_facts("ib_counters/h200x2_no_rdma_device.txt"), profile("h100-8x-ndr400"))
    assert outcome.status == "SKIP" and "no RDMA device on node1; see ib.devices" in outcome.message


# ------------------------------------------------------------------------------------------- host.memlock


def test_memlock() -> None:
    low = {"memlock": out("limits/devbox_nonroot_8192.txt")}
    failed = judge(host_memlock.CHECK, profile("h100-8x-ndr400"), **low)
    assert failed.status == "FAIL" and "ibv_reg_mr" in failed.message
    assert "LimitMEMLOCK=infinity" in failed.remediation and "memlock unlimited" in failed.remediation
    assert judge(host_memlock.CHECK, lent_h200(), **low).status == "SKIP"
    assert judge(host_memlock.CHECK, profile("h100-8x-ndr400", min_memlock_kib=8192), **low).status == "PASS"
    soft_only = {"memlock": out(text="64\nunlimited\n")}
    assert judge(host_memlock.CHECK, profile("h100-8x-ndr400"), **soft_only).status == "WARN"
    assert (
        judge(
            host_memlock.CHECK,
            profile("h100-8x-ndr400"),
            memlock=out("limits/h200x2_capture_ulimit_and_proc_limits.txt"),
        ).status
        == "PASS"
    )


# ------------------------------------------------------------------------------------ the evaluation path


def test_missing_nvidia_smi_is_an_error_where_gpus_are_expected() -> None:
    result, facts = evaluate_check(gpu_memory.CHECK, {"gpu_query": MISSING}, lent_h200(), None)
    assert result.status == "ERROR" and "nvidia-smi is missing on vm" in result.message
    assert facts is None


def test_rejected_fields_on_every_tier_are_an_error_quoting_nvidia_smi() -> None:
    rejected = out(text='Field "fabric.state" is not a valid field to query.\n', rc=2)
    result, _ = evaluate_check(gpu_pcie.CHECK, {"gpu_query": rejected}, lent_h200(), None)
    assert result.status == "ERROR" and "not a valid field" in result.message


def test_xid_runs_without_nvidia_smi() -> None:
    outputs = {"kernel_log": kernel_log("kernel_log/xid79_gpud_sxid_readme.txt"), "gpu_query": MISSING}
    result, _ = evaluate_check(gpu_xid.CHECK, outputs, lent_h200(), None)
    assert result.status == "FAIL" and "Xid 79" in result.message


def test_ib_counters_keep_to_the_compute_rails_of_a_b300() -> None:
    """An HGX B300's NVLink-switch management ConnectX-7s (MT4129) are InfiniBand and Active beside its
    ConnectX-8 rails (the published XE9780 ibstat's shape); sysfs gives each device's hca_type. Errors counted
    on a management port are not the compute fabric's. Composed lines in the script's format."""
    lines = []
    for device, ca_type, symbol in (
        ("mlx5_0", "MT4131", 0),
        ("mlx5_1", "MT4131", 0),
        ("mlx5_2", "MT4129", 9),
    ):
        lines += [
            f"{device} 1 hca_type {ca_type}",
            f"{device} 1 state 4: ACTIVE",
            f"{device} 1 link_layer InfiniBand",
        ]
        lines += [
            f"{device} 1 {name} {symbol if name == 'symbol_error' else 0}" for name in ib_counters.LINK_LEVEL
        ]
    facts = ib_counters.parse({"ib_counters": out(text="\n".join(lines) + "\n")}, profile("b300-8x-xdr800"))
    assert [p.get("ca_type") for p in facts["ports"]] == ["MT4131", "MT4131", "MT4129"]
    outcome = ib_counters.judge(facts, profile("b300-8x-xdr800"))
    assert outcome.status == "PASS", outcome.message
    assert "mlx5_2 port 1 (ConnectX-7 (MT4129), not a compute rail)" in outcome.message
    assert ib_counters.judge(facts, profile("h100-8x-ndr400")).status == "WARN", (
        "without the CA types: judged"
    )
