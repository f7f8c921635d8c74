"""The rules of issue 26's fabric and NVSwitch checks on facts: gpu.sxid, ib.flaps, ib.optics, versions.firmware.

Outputs are the real captures in tests/fixtures/captured/{sxid,link_events,mlxlink} (see each SOURCE), wrapped in
the header the shared kernel-log command prints where a rule needs the host's clock; a fault the captures do not
show (a BER over the limit, a hot module, another firmware) is the one field it changes, edited in a real
capture. Expected values come from the shipped profiles, overridden the way an inventory would. Traps that must
stay quiet: one flap far outside the window, firmware equal everywhere.
"""

from __future__ import annotations

from typing import Any

from diagnose.checks import gpu_memory, gpu_sxid, ib_flaps, ib_optics, ib_port_state, versions_firmware
from diagnose.config.profile_files import load_profile
from diagnose.core.check import Check
from diagnose.core.model import CommandOutput
from diagnose.core.vars import Vars
from diagnose.engine.evaluate import evaluate_check
from tests.support.paths import CAPTURED

NDR = "h100-8x-ndr400"
# 2026-08-08T09:00:00Z: a day after the syslog flaps of link_events/mlx5_link_down_up_iso_syslog.txt.
DAY_AFTER = "1786179600 86400"


def profile(name: str = NDR, host: str = "node1", **overrides: Any) -> Vars:
    return Vars({**load_profile(name).vars, "diagnose_profile": name, **overrides}, host=host)


def text(fixture: str) -> str:
    return (CAPTURED / fixture).read_text()


def log(body: str, clock: str = "", source: str = "dmesg") -> CommandOutput:
    """Kernel-log lines wrapped in the header KERNEL_LOG_SCRIPT prints before them."""
    header = (f"# clock {clock}\n" if clock else "") + f"# source {source}\n"
    return CommandOutput(stdout=header + body)


def judge(check: Check, vars_: Vars, **outputs: CommandOutput) -> Any:
    return check.judge(check.parse(outputs, vars_), vars_)


HEALTHY_LOG = CommandOutput(stdout=text("kernel_log/h200x2_dmesg_iso_no_xid.txt"))


# ----------------------------------------------------------------------------------------------- gpu.sxid


def test_sxid_quiet_log_passes() -> None:
    outcome = judge(gpu_sxid.CHECK, profile(), kernel_log=HEALTHY_LOG)
    assert outcome.status == "PASS"
    assert "no NVSwitch SXid in the kernel log of node1 since boot (dmesg-iso)" in outcome.message
    # The lent H100's output of the kernel-log command as it is now (NVRM, SXid and mlx5 lines kept).
    lent = CommandOutput(stdout=text("sxid/h100x1_dmesg_iso_no_sxid.txt"))
    assert judge(gpu_sxid.CHECK, profile(), kernel_log=lent).status == "PASS"
    assert judge(ib_flaps.CHECK, profile(), kernel_log=lent).status == "PASS"


def test_sxid_fatal_ltssm_fault_fails_naming_switches_and_links() -> None:
    outcome = judge(gpu_sxid.CHECK, profile(), kernel_log=log(text("sxid/sxid20034_gpud_readme.txt")))
    assert outcome.status == "FAIL"
    assert (
        "SXid 20034 (LTSSM Fault Up, fatal) on nvidia-nvswitch0 (PCI 0000:05:00) links 63, 62 x2"
        in outcome.message
    )
    assert "nvidia-nvswitch2 (PCI 0000:07:00) link 37" in outcome.message
    # The engine and register lines belong to their events: three switches, three entries, no more.
    assert len(outcome.observed["events"]) == 3
    assert "reset all GPUs and NVSwitches" in outcome.remediation


def test_sxid_non_fatal_alone_is_a_warning() -> None:
    outcome = judge(gpu_sxid.CHECK, profile(), kernel_log=log(text("sxid/sxid12028_gpud_test_nonfatal.txt")))
    assert outcome.status == "WARN"
    assert "SXid 12028 (egress non-posted PRIV error, non-fatal) on nvidia-nvswitch3" in outcome.message
    assert "the fabric kept working" in outcome.message


def test_sxid_seen_only_in_a_continuation_line_counts_once() -> None:
    outcome = judge(gpu_sxid.CHECK, profile(), kernel_log=log(text("sxid/sxid_menthos_dataset.txt")))
    assert outcome.status == "FAIL"
    host_access = next(e for e in outcome.observed["events"] if e["sxid"] == 10002)
    assert host_access["count"] == 1 and host_access["severity"] == "FAIL"
    non_fatal = [e for e in outcome.observed["events"] if e["sxid"] == 19084]
    assert {e["severity"] for e in non_fatal} == {"WARN"}


def test_sxid_window_since_the_last_run() -> None:
    """Events before xid_since (the nightly's previous run) decide nothing: each is reported once."""
    body = "\n".join(
        f"2026-08-07T09:24:35Z node4 kernel: {line}"
        for line in text("sxid/sxid_menthos_dataset.txt").splitlines()
    )
    outcome = judge(gpu_sxid.CHECK, profile(xid_since="2026-08-08T00:00:00Z"), kernel_log=log(body))
    assert outcome.status == "PASS"
    assert "7 older SXids outside the window" in outcome.message


def test_sxid_unreadable_log_is_an_error_and_no_gpu_is_a_skip() -> None:
    refused = CommandOutput(stdout=text("kernel_log/h200x2_nonroot_dmesg_refused.txt"))
    result, _ = evaluate_check(gpu_sxid.CHECK, {"kernel_log": refused}, profile(), None)
    assert result.status == "ERROR" and "Operation not permitted" in result.message
    assert judge(gpu_sxid.CHECK, profile("cpu-testbed"), kernel_log=refused).status == "SKIP"


# ----------------------------------------------------------------------------------------------- ib.flaps

HCA_PCI = CommandOutput(stdout="mlx5_bond_0 0000:01:00.0\nmlx5_1 0000:01:00.1\n")


def test_flaps_quiet_log_passes() -> None:
    outcome = judge(ib_flaps.CHECK, profile(), kernel_log=HEALTHY_LOG)
    assert outcome.status == "PASS"
    assert "no RDMA link down or module error in the kernel log of node1 in the last 24 h" in outcome.message


def test_one_flap_warns_and_max_link_flaps_fails_naming_the_hca() -> None:
    # The boot log's [secs] stamps placed by a clock 400 s after boot: everything is in the window.
    boot = log(text("link_events/mlx5_link_flaps_eswitch_boot.txt"), clock="1786179600 400")
    warned = judge(ib_flaps.CHECK, profile(), kernel_log=boot, hca_pci=HCA_PCI)
    assert warned.status == "WARN"
    assert "mlx5_1 (0000:01:00.1 enp1s0f1np1): 2 link downs" in warned.message
    assert "mlx5_bond_0 (0000:01:00.0 enp1s0f0np0): 1 link down" in warned.message
    failed = judge(ib_flaps.CHECK, profile(max_link_flaps=2), kernel_log=boot, hca_pci=HCA_PCI)
    assert failed.status == "FAIL" and "reseat or replace the cable" in failed.remediation


def test_one_flap_far_outside_the_window_stays_quiet() -> None:
    """Trap: the syslog flaps of 2026-08-07, judged a week later in a 24 h window."""
    week_later = "1786698000 86400"
    outcome = judge(
        ib_flaps.CHECK,
        profile(),
        kernel_log=log(text("link_events/mlx5_link_down_up_iso_syslog.txt"), week_later),
    )
    assert outcome.status == "PASS"
    assert "4 older events outside the window" in outcome.message
    inside = judge(
        ib_flaps.CHECK,
        profile(),
        kernel_log=log(text("link_events/mlx5_link_down_up_iso_syslog.txt"), DAY_AFTER),
    )
    assert inside.status == "FAIL" and "0000:01:00.0 enp1s0f0np0: 3 link downs" in inside.message


def test_flaps_count_only_since_the_previous_run() -> None:
    body = log(text("link_events/mlx5_link_down_up_iso_syslog.txt"), DAY_AFTER)
    outcome = judge(ib_flaps.CHECK, profile(flap_since="2026-08-07T12:00:00Z"), kernel_log=body)
    assert outcome.status == "PASS"
    assert "since the previous run (2026-08-07T12:00:00Z)" in outcome.message


# The IB core's port state lines (Linux 6.15+), their [secs] stamps placed by a clock 4500 s after boot.
IB_CORE_CLOCK = "1786179600 4500"


def test_ib_core_port_down_is_a_link_down_of_that_port() -> None:
    """An InfiniBand port has no netdev: the IB core's DOWN line is all the log says of its flap."""
    rmmod = log(text("link_events/ibcore_port_down_rmmod.txt"), IB_CORE_CLOCK)
    outcome = judge(ib_flaps.CHECK, profile(), kernel_log=rmmod)
    assert outcome.status == "WARN", outcome.message
    assert "mlx5_0 port 1 (0000:0a:00.0): 1 link down" in outcome.message
    # A port coming up at boot (INIT, ACTIVE) is no flap.
    boot = log(text("link_events/ibcore_port_state_mlx4_ib_boot.txt"), IB_CORE_CLOCK)
    assert judge(ib_flaps.CHECK, profile(), kernel_log=boot).status == "PASS"


def test_a_roce_port_logged_by_netdev_and_ib_core_counts_each_change_once() -> None:
    """The bond's port: 3 netdev "Link down" and 2 IB core "Link DOWN" lines are 3 flaps, not 5."""
    flaps = log(text("link_events/ibcore_port_state_roce_bond_flaps.txt"), IB_CORE_CLOCK)
    outcome = judge(ib_flaps.CHECK, profile(), kernel_log=flaps)
    assert outcome.status == "FAIL"
    assert outcome.observed["link_downs"] == {"mlx5_3 port 1 (0000:53:00.0 enp83s0f0np0)": 3}
    assert "mlx5_3 port 1 (0000:53:00.0 enp83s0f0np0): 3 link downs" in outcome.message


def test_ib_core_lines_count_only_since_the_previous_run() -> None:
    """A nightly whose previous run was 4442 s after boot: the two later downs count, not the first."""
    flaps = log(text("link_events/ibcore_port_state_roce_bond_flaps.txt"), IB_CORE_CLOCK)
    outcome = judge(ib_flaps.CHECK, profile(flap_since="2026-08-08T08:59:02Z"), kernel_log=flaps)
    assert outcome.status == "WARN", outcome.message
    assert "mlx5_3 port 1 (0000:53:00.0 enp83s0f0np0): 2 link downs" in outcome.message
    assert "3 older events outside the window" in outcome.message


def test_module_error_warns() -> None:
    outcome = judge(
        ib_flaps.CHECK, profile(), kernel_log=log(text("link_events/mlx5_module_high_temp_link_down.txt"))
    )
    assert outcome.status == "WARN"
    assert "module 0 Cable error, High Temperature" in outcome.message
    assert "enp1s0f0np0: 1 link down" in outcome.message


def _counters(symbols: int, downed: int) -> CommandOutput:
    lines = ["mlx5_4 1 state 4: ACTIVE", "mlx5_4 1 link_layer InfiniBand"]
    lines += [f"mlx5_4 1 symbol_error {symbols}", f"mlx5_4 1 link_downed {downed}"]
    return CommandOutput(stdout="\n".join(lines) + "\n")


def test_counter_growth_between_runs() -> None:
    """The previous nightly's counters (ib_counters_before): link_downed growth is a flap of that HCA,
    symbol errors faster than ib_symbol_errors_max_per_h FAIL; counters cleared since are only noted."""
    before = {
        "at": "2026-08-07T09:00:00Z",
        "ports": {"mlx5_4 port 1": {"symbol_error": 10, "link_downed": 0}},
    }
    quiet = log("", DAY_AFTER)
    steady = judge(
        ib_flaps.CHECK, profile(ib_counters_before=before), kernel_log=quiet, ib_counters=_counters(200, 0)
    )
    assert steady.status == "PASS", steady.message
    assert steady.observed["counter_rates"]["mlx5_4 port 1"] == {
        "hours": 24.0,
        "symbol_error": 190,
        "link_downed": 0,
    }
    climbing = judge(
        ib_flaps.CHECK, profile(ib_counters_before=before), kernel_log=quiet, ib_counters=_counters(5000, 1)
    )
    assert climbing.status == "FAIL"
    assert "mlx5_4 port 1: symbol errors +4990 in 24.0 h (208/h > 120/h)" in climbing.message
    assert "mlx5_4 (link_downed): 1 link down" in climbing.message
    cleared = judge(
        ib_flaps.CHECK, profile(ib_counters_before=before), kernel_log=quiet, ib_counters=_counters(0, 0)
    )
    assert cleared.status == "PASS" and "counters cleared since the previous run" in cleared.message


def test_flaps_skip_without_a_fabric() -> None:
    assert judge(ib_flaps.CHECK, profile("single-node-nvlink"), kernel_log=HEALTHY_LOG).status == "SKIP"


# ---------------------------------------------------------------------------------------------- ib.optics

BF3 = text("mlxlink/bf3_100g_dac_2ports.txt")
OPTIC = "# port mlx5_4 1\n" + text("mlxlink/osfp_400g_optic_sichek.txt") + "# rc 0\n"


def test_optics_healthy_ports_pass() -> None:
    outcome = judge(ib_optics.CHECK, profile(), mlxlink=CommandOutput(stdout=BF3))
    assert outcome.status == "PASS"
    assert outcome.message == "node1: 2 ports, highest effective BER 15E-255, no module temperature sensor"
    optic = judge(ib_optics.CHECK, profile(), mlxlink=CommandOutput(stdout=OPTIC))
    assert optic.status == "PASS" and "modules up to 54 C" in optic.message
    assert optic.observed["mlx5_4/1"]["raw_ber"] == "2E-9"


def test_optics_effective_ber_over_the_limit_fails() -> None:
    bad = BF3.replace(
        "Effective Physical BER             : 15E-255", "Effective Physical BER             : 5E-11", 1
    )
    outcome = judge(ib_optics.CHECK, profile(), mlxlink=CommandOutput(stdout=bad))
    assert outcome.status == "FAIL"
    assert (
        "mlx5_0/1 effective BER 5E-11 > 1e-12 (raw 15E-255, FEC Standard RS-FEC - RS(528,514))"
        in outcome.message
    )
    assert "mlx5_1" not in outcome.message
    lenient = judge(ib_optics.CHECK, profile(max_effective_ber=1e-10), mlxlink=CommandOutput(stdout=bad))
    assert lenient.status == "PASS"


def test_optics_module_near_or_over_its_alarm() -> None:
    warm = OPTIC.replace("54 [-5..75]", "72 [-5..75]")
    outcome = judge(ib_optics.CHECK, profile(), mlxlink=CommandOutput(stdout=warm))
    assert outcome.status == "WARN" and "mlx5_4/1 module at 72 C (alarm at 75 C)" in outcome.message
    assert (
        judge(ib_optics.CHECK, profile(optics_temp_margin_c=2), mlxlink=CommandOutput(stdout=warm)).status
        == "PASS"
    )
    hot = OPTIC.replace("54 [-5..75]", "76 [-5..75]")
    assert judge(ib_optics.CHECK, profile(), mlxlink=CommandOutput(stdout=hot)).status == "FAIL"


def test_optics_firmware_recommendation_warns() -> None:
    advice = BF3.replace(
        "Recommendation                     : No issue was observed",
        "Recommendation                     : Bad signal integrity",
        1,
    )
    outcome = judge(ib_optics.CHECK, profile(), mlxlink=CommandOutput(stdout=advice))
    assert (
        outcome.status == "WARN" and "mlx5_0/1: mlxlink recommends: Bad signal integrity" in outcome.message
    )


def test_optics_without_mlxlink_skips_naming_the_package() -> None:
    missing = CommandOutput(stdout=text("mlxlink/h100x1_no_mlxlink.txt"), exit_code=0)
    result, _ = evaluate_check(ib_optics.CHECK, {"mlxlink": missing}, profile(), None)
    assert result.status == "SKIP"
    assert "mlxlink is not installed on node1" in result.message
    assert "mstflint" in result.remediation and "MFT" in result.remediation


def test_optics_unreadable_devices_are_an_error_and_no_fabric_a_skip() -> None:
    refused = "# port mlx5_0 1\n-E- Failed to open device: mlx5_0\n# rc 1\n"
    outcome = judge(ib_optics.CHECK, profile(), mlxlink=CommandOutput(stdout=refused))
    assert outcome.status == "ERROR" and "-E- Failed to open device" in outcome.message
    assert (
        judge(ib_optics.CHECK, profile("single-node-nvlink"), mlxlink=CommandOutput(stdout=BF3)).status
        == "SKIP"
    )
    assert judge(ib_optics.CHECK, profile(), mlxlink=CommandOutput(stdout="")).status == "SKIP"


# -------------------------------------------------------------------------------------- versions.firmware

IBSTAT = text("ibstat/h100_cx7_ndr400_8hca_bond.txt")
QUERY = text("hostkit/h100x8_gpu_query_healthy.txt")


def _host(ibstat: str = IBSTAT, query: str = QUERY, optics: str = BF3) -> dict[str, Any]:
    v = profile()
    return {
        "ib.port_state": ib_port_state.CHECK.parse({"ibstat": CommandOutput(stdout=ibstat)}, v),
        "gpu.memory": gpu_memory.CHECK.parse({"gpu_query": CommandOutput(stdout=query)}, v),
        "ib.optics": ib_optics.CHECK.parse({"mlxlink": CommandOutput(stdout=optics)}, v),
    }


def _firmware(facts: dict[str, dict[str, Any]]) -> list[Any]:
    return versions_firmware.CHECK.judge(facts, {h: profile(host=h) for h in facts})


def test_firmware_equal_everywhere_stays_quiet() -> None:
    outcomes = _firmware({h: _host() for h in ("node1", "node2", "node3")})
    assert [o.status for o in outcomes] == ["PASS"]
    assert "HCA MT4129 28.41.1000 on 3 hosts" in outcomes[0].message
    assert "VBIOS of NVIDIA H100 80GB HBM3 96.00.89.00.01 on 3 hosts" in outcomes[0].message


def test_firmware_odd_hosts_are_named_with_their_versions() -> None:
    """One HCA of node3 on 28.39.4082 (a release seen beside 28.41.1000 on one public node's CX-7s), and node2
    with the lent H100's real VBIOS (96.00.CF.00.01) where the others run 96.00.89.00.01."""
    at = IBSTAT.index("CA 'mlx5_4'")
    odd_hca = IBSTAT[:at] + IBSTAT[at:].replace("28.41.1000", "28.39.4082", 1)
    odd_gpu = text("gpu_query/h100x1_580_with_vbios.txt")
    outcomes = _firmware({"node1": _host(), "node2": _host(query=odd_gpu), "node3": _host(ibstat=odd_hca)})
    by_host = {o.host: o for o in outcomes}
    assert by_host[None].status == "FAIL"
    assert by_host["node3"].status == "FAIL"
    assert (
        by_host["node3"].message == "node3 runs HCA MT4129 28.39.4082/28.41.1000, the other hosts 28.41.1000"
    )
    assert (
        by_host["node2"].message
        == "node2 runs VBIOS of NVIDIA H100 80GB HBM3 96.00.CF.00.01, the other hosts 96.00.89.00.01"
    )
    assert "node1" not in by_host


def test_firmware_mixed_within_every_host_is_still_named() -> None:
    at = IBSTAT.index("CA 'mlx5_4'")
    mixed = IBSTAT[:at] + IBSTAT[at:].replace("28.41.1000", "28.39.4082", 1)
    outcomes = _firmware({"node1": _host(ibstat=mixed), "node2": _host(ibstat=mixed)})
    assert outcomes[0].status == "FAIL"
    assert {o.host for o in outcomes[1:]} == {"node1", "node2"}
    assert "node1 runs HCA MT4129 28.39.4082 and 28.41.1000 on its own devices" in outcomes[1].message


def test_transceiver_firmware_drift_only_warns() -> None:
    other = BF3.replace(
        "FW Version                         : N/A", "FW Version                         : 2.9"
    )
    newer = BF3.replace(
        "FW Version                         : N/A", "FW Version                         : 3.1"
    )
    outcomes = _firmware(
        {"node1": _host(optics=other), "node2": _host(optics=other), "node3": _host(optics=newer)}
    )
    assert outcomes[0].status == "WARN"
    assert outcomes[1].host == "node3" and "transceiver Q28-PC03 firmware 3.1" in outcomes[1].message
