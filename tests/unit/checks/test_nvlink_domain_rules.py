"""gpu.nvlink_domain, gpu.imex and nvlink.rack on real tray outputs (tests/fixtures/captured/{nvlink_fabric,imex}).

A rack here is built from the published GB200 tray (4 GPUs, tray 4, clique 2): each further tray is the
same output with its tray index changed, and a fault is one published odd block (Insufficient Resources,
an Unhealthy summary) put in place of one GPU's, or one field changed where no capture exists (another
clique id; an IMEX node missing from the published two-node table). No rule depends on 18 trays.
"""

from __future__ import annotations

import re
from typing import Any

from diagnose.checks import gpu_imex, gpu_nvlink_domain, nvlink_rack
from diagnose.core.model import CommandOutput
from diagnose.core.vars import Vars
from diagnose.parsers.nvlink_fabric import parse_fabric_text
from diagnose.render.cause_links import root_of
from tests.support.paths import CAPTURED
from tests.support.rulekit import profile

GB200 = (CAPTURED / "nvlink_fabric/gb200_tray_p6e_qx_fabric.xml").read_text()
B200 = (CAPTURED / "nvlink_fabric/b200_hgx_gpu0_qx_fabric.xml").read_text()
IMEX_TWO = (CAPTURED / "imex/gh200_2node_ctl_N_ready.txt").read_text()
CHANNEL = "channel0\n"


def _tray(index: int) -> str:
    return GB200.replace("<tray_index>4</tray_index>", f"<tray_index>{index}</tray_index>")


def _domain(xml: str, host: str, **overrides: Any) -> tuple[dict[str, Any], Vars]:
    host_vars = profile("h100-8x-ndr400", host=host, **overrides)
    outputs = {"nvidia_smi_qx": CommandOutput(stdout=xml, exit_code=0)}
    return gpu_nvlink_domain.parse(outputs, host_vars), host_vars


def _imex(
    host: str, address: str, nodes: str = IMEX_TWO, daemon: str = "active", channels: str = CHANNEL
) -> dict[str, Any]:
    probe = (
        f"systemctl {daemon}\nprocess {'running' if daemon == 'active' else 'none'}\naddresses {address}\n"
    )
    outputs = {
        "imex_daemon": CommandOutput(stdout=probe, exit_code=0),
        "imex_nodes": CommandOutput(stdout=nodes, exit_code=0),
        "imex_channels": CommandOutput(stdout=channels, exit_code=0),
    }
    return gpu_imex.parse(outputs, profile("h100-8x-ndr400", host=host))


def _imex_table(addresses: list[str], missing: str | None = None) -> str:
    """The published table's format for these nodes; ``missing``'s row and column read D, not C."""
    nodes = [f"Node #{i}   - {a}   - READY" for i, a in enumerate(addresses)]
    header = " Nodes From\\To  " + "  ".join(str(i) for i in range(len(addresses)))
    rows = [
        f"       {i}        " + "  ".join("D" if missing in (a, b) and a != b else "C" for b in addresses)
        for i, a in enumerate(addresses)
    ]
    return "\n".join(["Nodes:", *nodes, "", header, *rows, "Domain State: UP", ""])


def test_published_gb200_tray_passes() -> None:
    facts, host_vars = _domain(GB200, "tray4")
    outcome = gpu_nvlink_domain.judge(facts, host_vars)
    assert outcome.status == "PASS", outcome.message
    assert "tray 4 (tray4) of rack 1654000000101" in outcome.message and "clique 2" in outcome.message


def test_hgx_b200_and_hosts_without_xml_skip() -> None:
    facts, host_vars = _domain(B200, "hgx")
    assert gpu_nvlink_domain.judge(facts, host_vars).status == "SKIP"
    silent = gpu_nvlink_domain.parse(
        {"nvidia_smi_qx": CommandOutput(stdout="", stderr="fake nvidia-smi: no reply", exit_code=64)},
        host_vars,
    )
    assert gpu_nvlink_domain.judge(silent, host_vars).status == "SKIP"


def test_expected_domain_turns_a_zero_uuid_into_a_fail() -> None:
    """A tray whose registration failed reads like an HGX board: only the profile tells them apart."""
    facts, host_vars = _domain(B200, "tray", expected_nvlink_domain_gpus=72)
    outcome = gpu_nvlink_domain.judge(facts, host_vars)
    assert outcome.status == "FAIL" and "in no NVLink domain" in outcome.message


def _with_text_gpu(xml: str, text: str) -> str:
    """The first GPU's fabric fields replaced by a published text block's (state, status, clique, uuid, health)."""
    (gpu,) = parse_fabric_text(text)
    first_end = xml.index("</fabric>")
    head, tail = xml[:first_end], xml[first_end:]
    for tag, key in (("state", "state"), ("status", "status"), ("cliqueId", "clique_id")):
        head = re.sub(rf"<{tag}>[^<]*</{tag}>", f"<{tag}>{gpu[key]}</{tag}>", head, count=1)
    head = re.sub(
        r"<clusterUuid>[^<]*</clusterUuid>", f"<clusterUuid>{gpu['cluster_uuid']}</clusterUuid>", head
    )
    if gpu.get("health"):
        head = re.sub(r"<summary>[^<]*</summary>", f"<summary>{gpu['health']}</summary>", head)
    return head + tail


INSUFFICIENT = (CAPTURED / "nvlink_fabric/gb_azure_q_fabric_insufficient_resources.txt").read_text()
UNHEALTHY = (CAPTURED / "nvlink_fabric/mnnvl_q_fabric_grep_unhealthy.txt").read_text()


def test_insufficient_resources_and_unhealthy_fail_the_tray() -> None:
    facts, host_vars = _domain(_with_text_gpu(GB200, INSUFFICIENT), "tray4")
    outcome = gpu_nvlink_domain.judge(facts, host_vars)
    assert outcome.status == "FAIL"
    assert "GPU 00000000:29:00.0 module 2 fabric Completed/Insufficient Resources" in outcome.message
    facts, host_vars = _domain(_with_text_gpu(GB200, UNHEALTHY), "tray4")
    outcome = gpu_nvlink_domain.judge(facts, host_vars)
    assert outcome.status == "FAIL" and "fabric health Unhealthy" in outcome.message


def _rack(xmls: dict[str, str], imex: dict[str, dict[str, Any]] | None = None) -> list[Any]:
    facts = {}
    host_vars = {}
    for host, xml in xmls.items():
        domain, vars_ = _domain(xml, host)
        facts[host] = {"gpu.nvlink_domain": domain, **({"gpu.imex": imex[host]} if imex else {})}
        host_vars[host] = vars_
    return nvlink_rack.judge(facts, host_vars)


def _named(outcomes: list[Any]) -> dict[str | None, str]:
    return {o.host: o.message for o in outcomes if o.status == "FAIL" and o.host is not None}


def test_healthy_rack_of_four_trays_passes() -> None:
    addresses = [f"10.0.0.{i}" for i in range(1, 5)]
    imex = {f"t{i}": _imex(f"t{i}", a, _imex_table(addresses)) for i, a in enumerate(addresses, 1)}
    outcomes = _rack({f"t{i}": _tray(i) for i in range(1, 5)}, imex)
    assert [o.status for o in outcomes] == ["PASS"], outcomes[0].message
    assert "rack 1654000000101: 4 trays" in outcomes[0].message


def test_failed_tray_is_named_with_tray_and_rack_and_nobody_else() -> None:
    xmls = {f"t{i}": _tray(i) for i in range(1, 5)}
    xmls["t3"] = _with_text_gpu(_tray(3), INSUFFICIENT)
    named = _named(_rack(xmls))
    assert list(named) == ["t3"]
    assert named["t3"].startswith("tray 3 (t3) of rack 1654000000101: NVLink fabric registration failed")
    assert "Insufficient Resources" in named["t3"] and "3 other trays" in named["t3"]


def test_every_tray_failing_is_the_racks_fault() -> None:
    xmls = {f"t{i}": _with_text_gpu(_tray(i), INSUFFICIENT) for i in range(1, 5)}
    outcomes = _rack(xmls)
    assert _named(outcomes) == {}
    rack = [o for o in outcomes if o.status == "FAIL" and "all 4 trays" in o.message]
    assert len(rack) == 1 and "rack 1654000000101" in rack[0].message and "NVSwitch" in rack[0].message


def test_rack_split_into_two_cliques_names_the_minority() -> None:
    xmls = {f"t{i}": _tray(i) for i in range(1, 5)}
    xmls["t4"] = _tray(4).replace("<cliqueId>2</cliqueId>", "<cliqueId>3</cliqueId>")
    named = _named(_rack(xmls))
    assert list(named) == ["t4"]
    assert "tray 4 (t4) of rack 1654000000101 is in clique 3" in named["t4"]
    assert "split into 2 NVLink domains" in named["t4"]


def test_missing_imex_peer_is_named_by_its_tray_not_by_the_trays_that_see_it() -> None:
    addresses = [f"10.0.0.{i}" for i in range(1, 5)]
    imex = {
        f"t{i}": _imex(f"t{i}", a, _imex_table(addresses, missing="10.0.0.2"))
        for i, a in enumerate(addresses, 1)
    }
    imex["t2"] = _imex("t2", "10.0.0.2", _imex_table(addresses, missing="10.0.0.2"), daemon="inactive")
    # The trays that see the peer missing pass their own check; the missing tray fails its own.
    statuses = {h: gpu_imex.judge(f, profile("h100-8x-ndr400", host=h)).status for h, f in imex.items()}
    assert statuses == {"t1": "PASS", "t2": "FAIL", "t3": "PASS", "t4": "PASS"}
    named = _named(_rack({f"t{i}": _tray(i) for i in range(1, 5)}, imex))
    assert list(named) == ["t2"]
    assert named["t2"].startswith("tray 2 (t2) of rack 1654000000101: IMEX peer missing")
    assert (
        "its IMEX daemon is not running" in named["t2"] and "t1's IMEX does not see 10.0.0.2" in named["t2"]
    )


def test_a_tray_absent_from_the_peers_node_tables_is_named() -> None:
    addresses = [f"10.0.0.{i}" for i in range(1, 5)]
    without = _imex_table(addresses[:3])
    imex = {f"t{i}": _imex(f"t{i}", a, without) for i, a in enumerate(addresses, 1)}
    imex["t4"] = _imex("t4", "10.0.0.4", _imex_table(addresses))
    named = _named(_rack({f"t{i}": _tray(i) for i in range(1, 5)}, imex))
    assert list(named) == ["t4"] and "node table does not list it" in named["t4"]


def test_published_imex_table_passes_and_no_imex_skips() -> None:
    facts = _imex("gh1", "10.42.7.11")
    host_vars = profile("h100-8x-ndr400", host="gh1")
    outcome = gpu_imex.judge(facts, host_vars)
    assert outcome.status == "PASS" and "all 2 nodes READY" in outcome.message
    absent = gpu_imex.parse(
        {
            "imex_daemon": CommandOutput(
                stdout="systemctl inactive\nprocess none\naddresses 10.0.0.9\n", exit_code=0
            ),
            "imex_nodes": CommandOutput(stderr="nvidia-imex-ctl: not found", exit_code=127),
            "imex_channels": CommandOutput(stdout="", exit_code=0),
        },
        host_vars,
    )
    assert gpu_imex.judge(absent, host_vars).status == "SKIP"
    expected = profile("h100-8x-ndr400", host="gh1", expected_nvlink_domain_gpus=72)
    outcome = gpu_imex.judge(absent, expected)
    assert outcome.status == "FAIL"
    assert "IMEX daemon not running" in outcome.message and "0 IMEX channels" in outcome.message


def test_no_tray_skips_the_rack_rule() -> None:
    facts, host_vars = _domain(B200, "hgx")
    outcomes = nvlink_rack.judge({"hgx": {"gpu.nvlink_domain": facts}}, {"hgx": host_vars})
    assert [o.status for o in outcomes] == ["SKIP"]


def test_a_trays_fabric_fault_explains_the_racks_and_imex_results() -> None:
    """One cause line for a tray out of the domain: its IMEX and the rack's rule see the same fault."""
    fabric, imex = root_of("gpu.nvlink_domain"), root_of("gpu.imex")
    assert fabric is not None and fabric.covers("nvlink.rack") and fabric.covers("gpu.imex")
    assert imex is not None and imex.covers("nvlink.rack") and not imex.covers("gpu.nvlink_domain")


def test_imex_ctl_without_a_node_table_is_no_imex_where_none_is_expected() -> None:
    """The tool ships with drivers on hosts that never run IMEX: only a node table makes IMEX present.
    The output here is the published table's legend alone (composed: what a table without nodes leaves)."""
    legend = IMEX_TWO.split("\nNodes:")[0] + "\n"
    outputs = {
        "imex_daemon": CommandOutput(
            stdout="systemctl inactive\nprocess none\naddresses 10.0.0.9\n", exit_code=0
        ),
        "imex_nodes": CommandOutput(stdout=legend, exit_code=1),
        "imex_channels": CommandOutput(stdout="", exit_code=0),
    }
    facts = gpu_imex.parse(outputs, profile("h100-8x-ndr400", host="hgx"))
    assert gpu_imex.judge(facts, profile("h100-8x-ndr400", host="hgx")).status == "SKIP"
    outcome = gpu_imex.judge(facts, profile("h100-8x-ndr400", host="hgx", expected_nvlink_domain_gpus=72))
    assert outcome.status == "FAIL" and "lists no node" in outcome.message


def test_a_racks_only_tray_failing_is_named_as_such() -> None:
    named = _named(_rack({"t1": _with_text_gpu(_tray(1), INSUFFICIENT)}))
    assert list(named) == ["t1"] and named["t1"].endswith("(the rack's only tray seen)")
